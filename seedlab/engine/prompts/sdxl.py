"""A1111's prompt syntax on SDXL, conditioned as AUTOMATIC1111 1.10 conditions SDXL.

What A1111 1.10 does (its sources, and Stability-AI/generative-models' `sgm` at 45c443b, the commit A1111 1.10
pins in modules/launch_utils.py, with configs/inference/sd_xl_base.yaml):

- modules/sd_hijack.py `StableDiffusionModelHijack.hijack`: SDXL's cond-stage model is sgm's GeneralConditioner;
  its CLIP ViT-L embedder (sgm FrozenCLIPEmbedder) is wrapped in sd_hijack_clip's
  `FrozenCLIPEmbedderForSDXLWithCustomWords`, its OpenCLIP ViT-bigG one (FrozenOpenCLIPEmbedder2) in
  sd_hijack_open_clip's `FrozenOpenCLIPEmbedder2WithCustomWords`; each token embedding in `EmbeddingsWithFixes`
  (textual inversion: the file's `clip_l` vectors for the first, `textual_inversion_key='clip_g'` for the second).
- modules/sd_hijack_clip.py `TextConditionalModel` (both wrappers): `tokenize_line` cuts the prompt into chunks
  exactly as for SD 1.x (prompts.py: attention brackets, 75 tokens, the comma back-track, BREAK, embeddings'
  places), each wrapper with its own tokenizer (CLIP's; open_clip's SimpleTokenizer: the same byte-pair vocabulary,
  so the same ids and chunks); `forward` encodes chunk by chunk (`process_tokens`) and `torch.hstack`s them, and
  with `return_pooled` (OpenCLIP-G: always_return_pooled) returns `zs[0].pooled`: the pooled vector of the FIRST
  chunk only. `process_tokens` re-pads every place after the first end token with `id_pad` when it is not the end
  token, keeps `z.pooled` aside while sd_emphasis weights z and puts it back: the pooled vector is never weighted
  (textual inversion vectors do reach it: they replace token embeddings before the encoder). Emphasis runs on
  each encoder's z apart ("Original": each encoder's own mean).
- CLIP-L (`FrozenCLIPEmbedderForSDXLWithCustomWords.encode_with_transformers`): start = bos, end = eos, padding =
  the end token (id_pad = id_end); `layer` "hidden" with `layer_idx` 11: `hidden_states[11]`, the output of the
  11th of CLIP-L's 12 layers (the penultimate, i.e. hidden_states[-2]), without the final layer norm. Only with
  the setting `sdxl_clip_l_skip` ("Clip skip SDXL", off by default in modules/shared_options.py) does it read
  `hidden_states[-CLIP_stop_at_last_layers]` instead. So by default Clip skip changes nothing on SDXL, although
  processing.create_infotext still writes "Clip skip: N" for N > 1: here clip_skip is accepted and not applied.
- OpenCLIP-G (`FrozenOpenCLIPEmbedder2WithCustomWords`): start `<start_of_text>` 49406, end `<end_of_text>` 49407,
  `id_pad` 0 ("!"); sgm's `FrozenOpenCLIPEmbedder2.encode_with_transformer` (layer "penultimate", legacy False)
  returns the input of the last residual block (no ln_final) and `pool`: ln_final(last layer) at the position of
  the highest token id (the end token) @ text_projection.
- sgm `GeneralConditioner.forward`: each embedder in turn; a 3-dim output is "crossattn", concatenated on dim 2,
  a 2-dim one "vector", on dim 1. crossattn = [CLIP-L 768 | OpenCLIP-G 1280] per token (1, chunks*77, 2048);
  vector = [G's pooled 1280 | original size | crop | target size], each number a 256-wide sinusoid
  (ConcatTimestepEmbedderND: timestep_embedding, cos then sin). With `force_zero_embeddings` ['txt'] both text
  embedders give zeros_like of all their outputs (hidden states and pooled); the size embedders are kept.
- modules/sd_models_xl.py `get_learned_conditioning`: original_size_as_tuple and target_size_as_tuple are
  [height, width] of the image (processing.setup_conds passes p.width, p.height), crop_coords_top_left is
  [opts.sdxl_crop_top, opts.sdxl_crop_left] (0, 0); `force_zero_negative_prompt`: the negative prompt
  (is_negative_prompt) whose texts are all '' is zeros, hidden states and pooled (an empty prompt is encoded).
- modules/sd_samplers_cfg_denoiser.py: a prompt and a negative prompt of different chunk counts run in two UNet
  calls by default; with the setting "Pad conds" (pad_cond_uncond) the shorter crossattn is padded with the empty
  prompt's (get_empty_cond: get_learned_conditioning([""])["crossattn"], encoded, not zeros).

diffusers' StableDiffusionXLPipeline agrees on the layers (encode_prompt: both encoders' hidden_states[-2], the
pooled text_embeds of text_encoder_2, concatenated L then G), the padding of stabilityai's tokenizers (tokenizer:
<|endoftext|>, tokenizer_2: "!", id 0) and the time ids (`_get_add_time_ids`: original size (height, width), crop
(0, 0), target size (height, width), the image's size by default; the UNet's add_time_proj is sgm's sinusoid),
so its call given these embeddings conditions as A1111 does. Its `force_zeros_for_empty_prompt` zeros the same
two tensors for an empty negative prompt when the checkpoint's config says so (SDXL base: yes); A1111 zeros them
whatever the config says, and so does this module. Diffusers needs one length for both prompts: the shorter is
padded with the empty prompt's chunks (A1111's "Pad conds"), or with zeros when it is the zeroed negative prompt
(cross-attention over zero keys and values is zero for any length: what A1111's separate call gives).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext

import torch

from ..recipe import FieldError
from . import a1111 as prompts

ENCODERS = (("tokenizer", "text_encoder", "CLIPTextModel"),
            ("tokenizer_2", "text_encoder_2", "CLIPTextModelWithProjection"))
OPENCLIP_PAD = 0  # FrozenOpenCLIPEmbedder2WithCustomWords.id_pad


def is_sdxl(pipe) -> bool:
    """SDXL's text-to-image pipeline: its prompts are read by this module rather than by prompts.py."""
    return type(pipe).__name__ == "StableDiffusionXLPipeline"


def check_encoders(pipe) -> None:
    """SDXL's CLIP-L (CLIPTextModel) and OpenCLIP-G (CLIPTextModelWithProjection), each with its tokenizer."""
    for tokenizer, encoder, kind in ENCODERS:
        if getattr(pipe, tokenizer, None) is None or type(getattr(pipe, encoder, None)).__name__ != kind:
            raise FieldError("prompt_syntax", f"a1111 on SDXL needs {encoder} ({kind}) and {tokenizer}; this "
                                              f"{type(pipe).__name__} lacks them: use plain")


def _hidden(tokenizer, text_encoder, chunk: prompts.Chunk, vectors: Mapping[str, torch.Tensor], device,
            pad: int | None = None):
    """One chunk through one encoder: (penultimate hidden states, the projected pooled output or None)."""
    tokens = list(chunk.tokens)
    if pad is not None:  # process_tokens: every place after the first end token becomes id_pad
        first = tokens.index(tokenizer.eos_token_id)
        tokens[first + 1:] = [pad] * (len(tokens) - first - 1)
    with prompts.fixed(text_encoder, chunk.fixes, vectors) if chunk.fixes else nullcontext():
        output = text_encoder(input_ids=torch.asarray([tokens]).to(device), output_hidden_states=True)
    return output.hidden_states[-2], getattr(output, "text_embeds", None)


def encode(pipe, text: str, *, emphasis: str = "Original", device: torch.device | None = None,
           embeddings: Mapping[str, Mapping[str, torch.Tensor]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A1111's SDXL conditioning of one prompt: (hidden states (1, chunks x (L + 2), L's + G's width), G's pooled
    (1, projection) of the first chunk). `embeddings`: name -> {"clip_l": [n, 768], "clip_g": [n, 1280]}."""
    device = device or pipe.text_encoder.device
    embeddings = embeddings or {}
    found = {key: {name: pair[key] for name, pair in embeddings.items()} for key in ("clip_l", "clip_g")}
    first = prompts.chunks_of(pipe.tokenizer, text, emphasis, found["clip_l"])
    second = prompts.chunks_of(pipe.tokenizer_2, text, emphasis, found["clip_g"])
    if len(first) != len(second):  # A1111's concatenation would fail; the shared vocabulary makes it unreachable
        raise FieldError("prompt", f"is cut into {len(first)} chunks by tokenizer and {len(second)} by tokenizer_2: "
                                   "A1111's SDXL conditioning needs the same chunks for both")
    outputs, pooled = [], None
    for chunk_l, chunk_g in zip(first, second, strict=True):
        z_l, _ = _hidden(pipe.tokenizer, pipe.text_encoder, chunk_l, found["clip_l"], device)
        z_g, chunk_pooled = _hidden(pipe.tokenizer_2, pipe.text_encoder_2, chunk_g, found["clip_g"], device,
                                    OPENCLIP_PAD)
        pooled = chunk_pooled if pooled is None else pooled  # zs[0].pooled
        outputs.append(torch.cat([prompts.emphasize(z_l, chunk_l.weights, emphasis),
                                  prompts.emphasize(z_g, chunk_g.weights, emphasis)], dim=2))
    return torch.hstack(outputs), pooled


def conditioning(pipe, prompt: str, negative_prompt: str, *, guided: bool, emphasis: str = "Original",
                 device: torch.device | None = None, embeddings=None, same_length: bool = True) -> dict:
    """StableDiffusionXLPipeline's call arguments for A1111's conditioning of the prompt and, when `guided`, the
    negative prompt (zeros when it is empty); of different lengths and `same_length`, the shorter padded."""
    dtype = pipe.unet.dtype
    with torch.no_grad():
        cond, pooled = (tensor.to(dtype) for tensor in encode(pipe, prompt, emphasis=emphasis, device=device,
                                                              embeddings=embeddings))
        encoded = {"prompt_embeds": cond, "pooled_prompt_embeds": pooled}
        if not guided:
            return encoded
        if negative_prompt == "":  # force_zero_negative_prompt
            length = cond.shape[1] if same_length else int(pipe.tokenizer.model_max_length)  # one chunk's zeros
            uncond = torch.zeros((1, length, cond.shape[2]), dtype=dtype, device=cond.device)
            uncond_pooled = torch.zeros_like(pooled)
        else:
            uncond, uncond_pooled = (tensor.to(dtype) for tensor in encode(
                pipe, negative_prompt, emphasis=emphasis, device=device, embeddings=embeddings))
            if same_length and cond.shape[1] != uncond.shape[1]:  # A1111's Pad conds: the empty prompt's chunks
                empty = encode(pipe, "", emphasis=emphasis, device=device)[0].to(dtype)
                longest = max(cond.shape[1], uncond.shape[1])
                cond, uncond = (torch.cat([z, *[empty] * ((longest - z.shape[1]) // empty.shape[1])], dim=1)
                                for z in (cond, uncond))
    return {"prompt_embeds": cond, "negative_prompt_embeds": uncond, "pooled_prompt_embeds": pooled,
            "negative_pooled_prompt_embeds": uncond_pooled}

