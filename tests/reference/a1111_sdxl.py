"""A reference re-creation of how AUTOMATIC1111 stable-diffusion-webui 1.10 conditions SDXL: the UNet's "crossattn"
and "vector" for a prompt, written from A1111's sources and Stability-AI/generative-models' sgm at 45c443b (the
commit A1111 1.10 pins in modules/launch_utils.py), step by step, independently of seedlab/engine/prompts/sdxl.py.

- modules/sd_models_xl.py `get_learned_conditioning`: the `sdxl_conds` batch (txt; original_size_as_tuple and
  target_size_as_tuple [height, width]; crop_coords_top_left [opts.sdxl_crop_top, opts.sdxl_crop_left] = [0, 0];
  the refiner's aesthetic_score is not among the base model's embedders) and `force_zero_negative_prompt`.
- sgm/modules/encoders/modules.py `GeneralConditioner.forward` (OUTPUT_DIM2KEYS, KEY2CATDIM, force_zero_embeddings),
  `ConcatTimestepEmbedderND.forward`, sgm/modules/diffusionmodules/util.py `timestep_embedding`,
  `FrozenOpenCLIPEmbedder2.encode_with_transformer` / `text_transformer_forward` / `pool` (layer "penultimate",
  legacy False, always_return_pooled True: configs/inference/sd_xl_base.yaml), `FrozenCLIPEmbedder` (layer
  "hidden", layer_idx 11).
- modules/sd_hijack.py `StableDiffusionModelHijack.hijack` (which wrapper and which textual_inversion_key for which
  embedder), modules/sd_hijack_clip.py `TextConditionalModel.forward` / `process_tokens` (the pooled vector of the
  first chunk, kept out of the emphasis; SD 2's id_pad re-padding) and
  `FrozenCLIPEmbedderForSDXLWithCustomWords.encode_with_transformers` (opts.sdxl_clip_l_skip, False by default),
  modules/sd_hijack_open_clip.py `FrozenOpenCLIPEmbedder2WithCustomWords` (id_pad 0, encode_with_transformers).
- tokenize_line, sd_emphasis, EmbeddingsWithFixes and the EmbeddingDatabase are tests/reference/a1111_prompt.py's.

The models are diffusers' CLIPTextModel and CLIPTextModelWithProjection holding what A1111's sgm embedders hold:
open_clip's `ln_final` is the model's final_layer_norm, `text_projection` (a [width, projection] parameter used as
`x @ P`) is the transpose of the projection layer's weight, and OpenCLIP-G's "penultimate" (the input of the last
residual block) is `hidden_states[layers - 1]`. sgm's layer_idx 11 is for CLIP-L's 12 layers; a test model with
fewer layers is read at its own `layers - 1`, the same place. open_clip's tokenizer is the pipeline's tokenizer_2
(the same vocabulary), with open_clip's start and end ids (<start_of_text>, <end_of_text>: CLIP's bos and eos).
Prompt editing, alternation, AND and hypernetworks: as in tests/reference/a1111_prompt.py, not re-created.
"""

from __future__ import annotations

import math

import torch

from tests.reference.a1111_prompt import (
    EmbeddingDatabase,
    _after_transformers,
    _check_emphasis,
    _embeddings_with_fixes,
    _Hijack,
    a1111_chunks,
    a1111_subprompts,
)

OUTPUT_DIM2KEYS = {2: "vector", 3: "crossattn", 4: "concat"}  # GeneralConditioner's
KEY2CATDIM = {"vector": 1, "crossattn": 2, "concat": 1}
SDXL_CROP = (0, 0)  # opts.sdxl_crop_top, opts.sdxl_crop_left (shared_options.py defaults)


class Embedder:
    """One of SDXL's hijacked text embedders: its tokenizer, encoder, pad id, textual inversion key and layer."""

    def __init__(self, tokenizer, text_encoder, *, clip_g: bool, clip_skip: int = 1, sdxl_clip_l_skip: bool = False):
        self.tokenizer, self.text_encoder, self.clip_g = tokenizer, text_encoder, clip_g
        self.id_end = tokenizer.eos_token_id
        self.id_pad = 0 if clip_g else self.id_end  # FrozenOpenCLIPEmbedder2WithCustomWords: 0; CLIP: id_end
        self.textual_inversion_key = "clip_g" if clip_g else "clip_l"
        self.layer_idx = text_encoder.config.num_hidden_layers - 1  # sgm's 11 for CLIP-L; OpenCLIP's penultimate
        self.clip_skip, self.sdxl_clip_l_skip = clip_skip, sdxl_clip_l_skip

    def encode_with_transformers(self, tokens: torch.Tensor):
        """(z, pooled or None): FrozenCLIPEmbedderForSDXLWithCustomWords's or FrozenOpenCLIPEmbedder2's."""
        outputs = self.text_encoder(input_ids=tokens, output_hidden_states=True)
        if self.clip_g:
            z = outputs.hidden_states[self.layer_idx]  # d["penultimate"]
            last = outputs.last_hidden_state  # ln_final(x["last"])
            projection = self.text_encoder.text_projection.weight.t()
            pooled = last[torch.arange(last.shape[0]), tokens.argmax(dim=-1)] @ projection  # pool()
            return z, pooled
        if self.sdxl_clip_l_skip is True:
            return outputs.hidden_states[-self.clip_skip], None
        return outputs.hidden_states[self.layer_idx], None

    def process_tokens(self, batch_tokens, batch_multipliers, emphasis: str):
        tokens = torch.asarray(batch_tokens).to(self.text_encoder.device)
        if self.id_end != self.id_pad:
            for batch_pos in range(len(batch_tokens)):
                index = batch_tokens[batch_pos].index(self.id_end)
                tokens[batch_pos, index + 1:tokens.shape[1]] = self.id_pad
        z, pooled = self.encode_with_transformers(tokens)
        multipliers = torch.asarray(batch_multipliers).to(self.text_encoder.device)
        return _after_transformers(emphasis, z, multipliers), pooled

    def forward(self, texts: list[str], emphasis: str, embedding_db: EmbeddingDatabase):
        """TextConditionalModel.forward for a batch of one text: hstack(zs), and zs[0].pooled for OpenCLIP-G."""
        batch_chunks = [a1111_chunks(self.tokenizer, text, emphasis=emphasis, embedding_db=embedding_db)[0]
                        for text in texts]
        hijack = _Hijack()
        zs, pooled = [], []
        with _embeddings_with_fixes(self.text_encoder, hijack, self.textual_inversion_key):
            for index in range(max(len(chunks) for chunks in batch_chunks)):
                batch_chunk = [chunks[index] for chunks in batch_chunks]  # one text: never an empty_chunk
                hijack.fixes = [chunk.fixes for chunk in batch_chunk]
                z, chunk_pooled = self.process_tokens([c.tokens for c in batch_chunk],
                                                      [c.multipliers for c in batch_chunk], emphasis)
                zs.append(z)
                pooled.append(chunk_pooled)
        return (torch.hstack(zs), pooled[0]) if self.clip_g else torch.hstack(zs)


def timestep_embedding(timesteps: torch.Tensor, dim: int, max_period: int = 10000) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half).to(
        device=timesteps.device)
    args = timesteps[:, None].float() * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


def concat_timestep_embedder(x: torch.Tensor, outdim: int) -> torch.Tensor:
    """ConcatTimestepEmbedderND.forward: each number of the (b, d) input embedded, (b, d * outdim)."""
    if x.ndim == 1:
        x = x[:, None]
    b, dims = x.shape[0], x.shape[1]
    emb = timestep_embedding(x.reshape(b * dims), outdim)
    return emb.reshape(b, dims * outdim)


def sdxl_database(pipe, folder=None) -> EmbeddingDatabase:
    """The EmbeddingDatabase A1111 builds on SDXL: names by CLIP-L's tokenizer (GeneralConditioner.tokenize), the
    expected shape clip_l's + clip_g's width (encode_embedding_init_text concatenates both encoders'), `folder`
    loaded as load_from_dir loads it."""
    width = sum(encoder.get_input_embeddings().embedding_dim for encoder in (pipe.text_encoder, pipe.text_encoder_2))
    db = EmbeddingDatabase(pipe.tokenizer, expected_shape=width)
    if folder is not None:
        db.load_from_dir(str(folder))
    return db


def a1111_sdxl_conditioning(pipe, prompt: str, *, width: int, height: int, is_negative_prompt: bool = False,
                            emphasis: str = "Original", clip_skip: int = 1, sdxl_clip_l_skip: bool = False,
                            embedding_db: EmbeddingDatabase | None = None) -> dict[str, torch.Tensor]:
    """{"crossattn": (1, chunks * 77, 768 + 1280), "vector": (1, 1280 + 3 * 2 * 256)} as A1111 1.10 conditions SDXL
    (the widths are the pipeline's). `is_negative_prompt`: the text as the negative prompt (no AND split)."""
    _check_emphasis(emphasis)
    text = prompt
    if not is_negative_prompt:
        subprompts = a1111_subprompts(prompt)
        if len(subprompts) != 1 or subprompts[0][1] != 1.0:
            raise ValueError(f"{prompt!r} gives A1111 several conds or a weight: not one conditioning")
        text = subprompts[0][0]
    embedding_db = embedding_db or sdxl_database(pipe)
    batch = [text]
    sdxl_conds = {  # get_learned_conditioning (dtype_inference: float32 here; the sizes are whole numbers)
        "txt": batch,
        "original_size_as_tuple": torch.tensor([height, width], dtype=torch.float32).repeat(len(batch), 1),
        "crop_coords_top_left": torch.tensor(list(SDXL_CROP), dtype=torch.float32).repeat(len(batch), 1),
        "target_size_as_tuple": torch.tensor([height, width], dtype=torch.float32).repeat(len(batch), 1),
    }
    force_zero_embeddings = ["txt"] if is_negative_prompt and all(x == "" for x in batch) else []
    outdim = pipe.unet.config.addition_time_embed_dim  # sd_xl_base.yaml: 256
    clip_l = Embedder(pipe.tokenizer, pipe.text_encoder, clip_g=False, clip_skip=clip_skip,
                      sdxl_clip_l_skip=sdxl_clip_l_skip)
    clip_g = Embedder(pipe.tokenizer_2, pipe.text_encoder_2, clip_g=True)
    embedders = [  # (input_key, forward), in sd_xl_base.yaml's order
        ("txt", lambda texts: clip_l.forward(texts, emphasis, embedding_db)),
        ("txt", lambda texts: clip_g.forward(texts, emphasis, embedding_db)),
        ("original_size_as_tuple", lambda x: concat_timestep_embedder(x, outdim)),
        ("crop_coords_top_left", lambda x: concat_timestep_embedder(x, outdim)),
        ("target_size_as_tuple", lambda x: concat_timestep_embedder(x, outdim)),
    ]
    output: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for input_key, embedder in embedders:  # GeneralConditioner.forward
            emb_out = embedder(sdxl_conds[input_key])
            if not isinstance(emb_out, (list, tuple)):
                emb_out = [emb_out]
            for emb in emb_out:
                out_key = OUTPUT_DIM2KEYS[emb.dim()]
                if input_key in force_zero_embeddings:
                    emb = torch.zeros_like(emb)
                if out_key in output:
                    output[out_key] = torch.cat((output[out_key], emb), KEY2CATDIM[out_key])
                else:
                    output[out_key] = emb
    return output


def diffusers_vector(pipe, pooled: torch.Tensor, *, width: int, height: int) -> torch.Tensor:
    """What diffusers' SDXL UNet makes of the pooled embedding and its call's add_time_ids (the image's size, crop
    (0, 0)) before its add_embedding: UNet2DConditionModel.get_aug_embed's "text_time" concatenation."""
    ids = pipe._get_add_time_ids((height, width), (0, 0), (height, width), dtype=pooled.dtype,
                                 text_encoder_projection_dim=pipe.text_encoder_2.config.projection_dim)
    time_embeds = pipe.unet.add_time_proj(ids.flatten()).reshape(pooled.shape[0], -1).to(pooled.dtype)
    return torch.concat([pooled, time_embeds], dim=-1)
