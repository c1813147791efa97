"""A request's prompt, encoded once with the pipeline's own `encode_prompt` and handed to every image that uses it.

The tensors are the ones the pipeline's call would make itself (same encoder, same arguments), so the pixels
are the same; only the text encoder runs once per request instead of once per image.
"""

from __future__ import annotations

import inspect
import math
import re
from typing import TYPE_CHECKING

import torch

from ..recipe import Recipe
from ..weights import lora_names
from . import a1111 as prompts
from . import comfyui as prompts_comfyui
from . import sdxl as prompts_sdxl
from . import text_inversion

if TYPE_CHECKING:  # a type only: the pipeline (models) sits above the rooms
    from ..models import Model


class Embeddings:
    """A request's prompt embeddings, encoded once per (prompt, negative prompt, guidance on/off).

    With the pipeline's own `encode_prompt`, called as its `__call__` calls it: SD 1.x/2.x return
    (prompt_embeds, negative_prompt_embeds); SDXL and SD3 also return the pooled pair, and take further
    prompts (prompt_2, prompt_3: None means "the prompt", as in their call); PixArt returns attention
    masks beside the embeddings; Flux encodes the prompt alone (no classifier-free guidance) and returns
    position ids its call rebuilds. Encoder options the call also has (max_sequence_length,
    clean_caption, clip_skip) get the call's own defaults, which is what the call passes. A pipeline whose
    encoder needs anything else, or whose call does not take the embeddings back, encodes inside the call.
    """

    PARAMETERS = {"prompt", "device", "num_images_per_prompt"}
    GUIDED = {"do_classifier_free_guidance", "negative_prompt"}  # encoders that encode the negative prompt too
    NAMES = ("prompt_embeds", "negative_prompt_embeds", "pooled_prompt_embeds", "negative_pooled_prompt_embeds")
    MASKED = ("prompt_embeds", "prompt_attention_mask", "negative_prompt_embeds", "negative_prompt_attention_mask")
    UNGUIDED = ("prompt_embeds", "pooled_prompt_embeds", None)  # None: Flux's text ids, rebuilt by its call

    def __init__(self, model: Model):
        pipe = model.pipeline
        encode = getattr(pipe, "encode_prompt", None)
        parameters = inspect.signature(encode).parameters if encode is not None else {}
        call = inspect.signature(pipe.__call__).parameters
        required = {name for name, parameter in parameters.items() if parameter.default is parameter.empty
                    and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)}
        # The further prompts of multi-encoder pipelines (SD3's prompt_2, prompt_3): None, as their call passes.
        self.further = {name: None for name in parameters if _FURTHER_PROMPT.fullmatch(name)}
        self.guided = set(parameters) >= self.GUIDED
        ours = self.PARAMETERS | (self.GUIDED if self.guided else set()) | set(self.further)
        self.options = {name: call[name].default for name in _OPTIONS & set(parameters) & set(call)
                        if call[name].default is not call[name].empty and name not in ours}
        # An empty negative prompt is what the call passes by default: None for SD, "" for PixArt.
        self.no_negative = call["negative_prompt"].default if "negative_prompt" in call else None
        self.usable = (
            encode is not None
            and set(parameters) >= self.PARAMETERS
            and required <= ours
            and "prompt_embeds" in model.call_parameters
        )
        self.model = model
        self._cache: dict[tuple, dict] = {}

    def arguments(self, recipe: Recipe, guided: bool | None = None, same_length: bool = True) -> dict:
        """Call arguments for `recipe`'s prompt: the embeddings, or the texts when they cannot be reused.

        `guided`: whether the negative prompt is encoded too; by default as the pipeline's call decides
        (guidance above 1), True for samplers that always guide (A1111's). `same_length`: A1111-syntax
        embeddings of different chunk counts padded to one length (diffusers' pipelines need it).
        """
        if recipe.prompt_syntax in ("a1111", "novelai"):
            return self._a1111(recipe, guided if guided is not None else recipe.guidance_scale > 1, same_length)
        if recipe.prompt_syntax == "comfyui":
            return self._comfyui(recipe, guided if guided is not None else recipe.guidance_scale > 1, same_length)
        texts = {"prompt": recipe.prompt, "negative_prompt": recipe.negative_prompt or self.no_negative}
        if not self.usable or (recipe.negative_prompt and not self.guided):
            return texts
        if guided is None:
            guided = recipe.guidance_scale > 1  # what the pipeline's do_classifier_free_guidance checks first
        key = (recipe.prompt, recipe.negative_prompt, guided)
        if key not in self._cache:
            negative = {"do_classifier_free_guidance": guided, "negative_prompt": texts["negative_prompt"]}
            with torch.no_grad():  # the pipeline's __call__ runs the text encoder under no_grad too
                encoded = self.model.computing().encode_prompt(
                    prompt=recipe.prompt, device=self.model.device, num_images_per_prompt=1,
                    **(negative if self.guided else {}), **self.further, **self.options)
            names = self._names(encoded)
            if not names or not {name for name in names if name} <= self.model.call_parameters:
                self.usable = False
                return texts
            self._cache[key] = {name: value for name, value in zip(names, encoded) if name}
            if "negative_prompt" in self.model.call_parameters:  # PixArt's call defaults it to "": not with embeddings
                self._cache[key]["negative_prompt"] = None
        return self._cache[key]

    def _a1111(self, recipe: Recipe, guided: bool, same_length: bool) -> dict:
        """A1111's conditioning of the prompt and the negative prompt (prompts.py), encoded once per request; with
        NovelAI's syntax its brackets, and neither LoRA tags nor textual inversion (NovelAI has none)."""
        pipe, syntax = self.model.computing(), recipe.prompt_syntax
        if syntax == "a1111" and prompts_sdxl.is_sdxl(pipe):
            return self._a1111_sdxl(recipe, guided, same_length)
        prompts.check_encoder(self.model.pipeline, syntax)  # the loaded modules' kinds (pipe's may be stand-ins)
        key = (syntax, recipe.prompt, recipe.negative_prompt, guided, same_length, recipe.emphasis, recipe.clip_skip)
        if key not in self._cache:
            prompt, found = recipe.prompt, {}
            if syntax == "a1111":
                prompt = lora_names.extract(recipe.prompt)[0]  # the <lora:...> tags out, as A1111 does
                # the textual inversion embeddings of the models folder that the prompts name (A1111: both prompts)
                found = text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {
                    "prompt": prompt, "negative_prompt": recipe.negative_prompt if guided else ""}, recipe.emphasis)

            def encode(text: str) -> torch.Tensor:
                return prompts.encode(pipe.tokenizer, pipe.text_encoder, text, emphasis=recipe.emphasis,
                                      clip_skip=recipe.clip_skip, device=self.model.device,
                                      embeddings=found, syntax=syntax).to(pipe.unet.dtype)

            with torch.no_grad():
                cond = encode(prompt)
                encoded = {"prompt_embeds": cond}
                if guided:
                    uncond = encode(recipe.negative_prompt)
                    if same_length and cond.shape[1] != uncond.shape[1]:  # A1111's pad_cond_uncond: empty chunks
                        empty = encode("")
                        cond, uncond = (torch.cat([z, *[empty] * ((max(cond.shape[1], uncond.shape[1]) - z.shape[1])
                                                                  // empty.shape[1])], dim=1) for z in (cond, uncond))
                    encoded = {"prompt_embeds": cond, "negative_prompt_embeds": uncond}
            self._cache[key] = encoded
        return self._cache[key]

    def _a1111_sdxl(self, recipe: Recipe, guided: bool, same_length: bool) -> dict:
        """A1111's SDXL conditioning (engine/prompts/sdxl.py): both encoders' hidden states and G's pooled output, for
        the prompt and the negative prompt (zeros when empty), encoded once per request; clip skip is not applied
        (A1111 1.10 applies it on SDXL only with its setting sdxl_clip_l_skip, off by default)."""
        pipe = self.model.computing()
        prompts_sdxl.check_encoders(self.model.pipeline)
        key = ("a1111-sdxl", recipe.prompt, recipe.negative_prompt, guided, same_length, recipe.emphasis)
        if key not in self._cache:
            prompt = lora_names.extract(recipe.prompt)[0]
            found = text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {
                "prompt": prompt, "negative_prompt": recipe.negative_prompt if guided else ""}, recipe.emphasis,
                text_encoder_2=pipe.text_encoder_2)
            self._cache[key] = prompts_sdxl.conditioning(
                pipe, prompt, recipe.negative_prompt, guided=guided, emphasis=recipe.emphasis, device=self.model.device,
                embeddings=found, same_length=same_length)
        return self._cache[key]

    def _comfyui(self, recipe: Recipe, guided: bool, same_length: bool) -> dict:
        """ComfyUI's conditioning of the prompt and the negative prompt (engine/prompts/comfyui.py), encoded once per
        request; of different lengths, both repeated to their least common multiple for one batch, as ComfyUI's
        CONDCrossAttn.concat does (attention over repeated tokens is the same)."""
        pipe = self.model.computing()
        prompts.check_encoder(self.model.pipeline, "comfyui")
        key = ("comfyui", recipe.prompt, recipe.negative_prompt, guided, same_length, recipe.clip_skip)
        if key not in self._cache:
            find = prompts_comfyui.EmbeddingFinder(prompts.token_embedding(pipe.text_encoder).embedding_dim)

            def encode(text: str, field: str) -> torch.Tensor:
                return prompts_comfyui.encode(pipe.tokenizer, pipe.text_encoder, text, clip_skip=recipe.clip_skip,
                                              device=self.model.device, find=find, field=field).to(pipe.unet.dtype)

            with torch.no_grad():
                encoded = {"prompt_embeds": encode(recipe.prompt, "prompt")}
                if guided:
                    cond, uncond = encoded["prompt_embeds"], encode(recipe.negative_prompt, "negative_prompt")
                    if same_length and cond.shape[1] != uncond.shape[1]:
                        length = math.lcm(cond.shape[1], uncond.shape[1])
                        cond, uncond = (z.repeat(1, length // z.shape[1], 1) for z in (cond, uncond))
                    encoded = {"prompt_embeds": cond, "negative_prompt_embeds": uncond}
            self._cache[key] = encoded
        return self._cache[key]

    def _names(self, encoded) -> tuple:
        """What each tensor `encode_prompt` returned is called in the pipeline's call; () when unknown."""
        if not isinstance(encoded, tuple):
            return ()
        if not self.guided:
            return self.UNGUIDED if len(encoded) == 3 else ()
        if len(encoded) == 4 and "prompt_attention_mask" in self.model.call_parameters:
            return self.MASKED
        return self.NAMES[:len(encoded)] if len(encoded) in (2, 4) else ()


_OPTIONS = {"max_sequence_length", "clean_caption", "clip_skip"}  # encoder options the call passes on as given


_FURTHER_PROMPT = re.compile(r"(negative_)?prompt_[2-9]")
