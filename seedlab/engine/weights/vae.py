"""A separate VAE from the models folder decodes the image, as A1111's VAE setting and ComfyUI's VAELoader do.

vae_names.py says which file a recipe names; here it is read and put in a copy of the model. The file is a
`.safetensors` (size-bounded, its header checked before safetensors reads it) in LDM's layout, as A1111 and
ComfyUI load it (`decoder.up.N.block.M`, `decoder.mid.block_1`, `post_quant_conv`, also prefixed
`first_stage_model.`), or in diffusers' (`decoder.up_blocks.N.resnets.M`, old attention names too). LDM's keys
become diffusers' with diffusers' own single-file conversion (`convert_ldm_vae_checkpoint`, given the model's own
VAE config: nothing is fetched). A text-to-image pass only decodes, so only the decoder (`decoder.*`,
`post_quant_conv.*`) is taken; its names and shapes must be the model's VAE's, else the file is refused, naming
the field. The weights take the model VAE's dtype and device, as A1111's load_state_dict into its VAE and
ComfyUI's VAE at the model's dtype do.

The model with the VAE is a copy that shares every other weight (the UNet, its traces, the text encoder), made once
per VAE file and kept (a couple per model); a recipe with LoRAs gets the VAE on the LoRAs' merged copy.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections import OrderedDict
from pathlib import Path

import torch
from diffusers import AutoencoderKL
from diffusers.loaders.single_file_utils import convert_ldm_vae_checkpoint

from ..tracing import TracedUNet
from . import library, safetensor_files, vae_names

MAX_FILE_BYTES = 1 << 30  # an SD / SDXL VAE is 160 to 335 MB; its EMA copy doubles it
MAX_TENSORS = 5_000  # an SD VAE has about 250 tensors
KEPT = 2  # VAE copies kept per model
PARTS = ("decoder.", "post_quant_conv.")  # what decoding uses
PREFIXES = ("first_stage_model.", "vae.", "")  # LDM's checkpoint prefix, diffusers' component prefix, none
_DEPRECATED = ((".query.", ".to_q."), (".key.", ".to_k."), (".value.", ".to_v."), (".proj_attn.", ".to_out.0."))
_LOCK = threading.Lock()


def read_decoder(path: Path) -> dict[str, torch.Tensor]:
    """The decoder's tensors of a VAE file, by their names without a prefix; refused with a message naming the
    field when it is not a safetensors file of a VAE."""
    with safetensor_files.checked(path, "vae", MAX_FILE_BYTES, MAX_TENSORS) as (tensors, keys):
        prefix = next((p for p in PREFIXES if any(key.startswith(p + "decoder.") for key in keys)), None)
        if prefix is None:
            raise ValueError(f"vae {path.name} holds no VAE decoder weights (decoder.* in LDM's or diffusers' "
                             f"layout): its first keys are {', '.join(keys[:2])[:160] or 'none'}")
        return {key[len(prefix):]: tensors.get_tensor(key) for key in keys
                if key.startswith(prefix) and key[len(prefix):].startswith(PARTS)}


def to_diffusers(weights: dict[str, torch.Tensor], config) -> dict[str, torch.Tensor]:
    """The decoder's weights under diffusers' names: LDM's converted by diffusers, diffusers' old attention renamed."""
    if any(key.startswith(("decoder.up.", "decoder.mid.")) for key in weights):
        return convert_ldm_vae_checkpoint(weights, dict(config))
    renamed = {}
    for key, tensor in weights.items():
        for old, new in _DEPRECATED:
            if ".attentions." in key:
                key = key.replace(old, new)
        renamed[key] = tensor
    return renamed


def fitted(vae, weights: dict[str, torch.Tensor], name: str) -> dict[str, torch.Tensor]:
    """The file's decoder weights checked against the model's VAE (every name, every shape), in its dtype and device."""
    own = {key: tensor for key, tensor in vae.state_dict().items() if key.startswith(PARTS)}
    for key, tensor in own.items():
        if key in weights and weights[key].shape != tensor.shape:
            raise ValueError(f"vae {name} does not fit this model's VAE: {key} is {tuple(tensor.shape)} here, "
                             f"{tuple(weights[key].shape)} in the file")
    missing, extra = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    if missing or extra:
        which = f"lacks {missing[0]}" if missing else f"has {extra[0]}, which this model's VAE has not"
        raise ValueError(f"vae {name} does not fit this model's VAE: it {which} ({len(missing)} of its {len(own)} "
                         f"decoder weights missing, {len(extra)} others)")
    return {key: weights[key].to(tensor.device, tensor.dtype) for key, tensor in own.items()}


def variant(model, found: library.Found):
    """`model` decoding with the VAE file `found`: a Model sharing every other weight, kept per file."""
    key = (str(found.path), found.hash)
    with _LOCK:
        variants: OrderedDict = model.__dict__.setdefault("_vae_variants", OrderedDict())
        if key in variants:
            variants.move_to_end(key)
            return variants[key]
        original = getattr(model.pipeline, "vae", None)
        if not isinstance(original, AutoencoderKL):
            raise ValueError(f"vae: {model.name} has no VAE of Stable Diffusion's kind (AutoencoderKL) to replace; "
                             "leave vae empty")
        weights = fitted(original, to_diffusers(read_decoder(found.path), original.config), found.path.name)
        with torch.no_grad():
            shared = {id(tensor): tensor for tensor in (*original.parameters(), *original.buffers())}
            replaced = copy.deepcopy(original, shared)  # the modules copied, their tensors shared
            replaced.load_state_dict(weights, strict=False, assign=True)  # the decoder's own tensors put in
        pipeline = copy.copy(model.pipeline)
        object.__setattr__(pipeline, "vae", replaced)
        if model.traced and model._traced_unet is None:  # one UNet, so one set of traces for the model and its copy
            model._traced_unet = TracedUNet(model.pipeline.unet)
        made = dataclasses.replace(model, pipeline=pipeline, _lane_copies=[], _traced_unet=model._traced_unet)
        made.lanes = model.lanes
        variants[key] = made
        while len(variants) > KEPT:
            variants.popitem(last=False)
        return made


def with_vae(model, recipe, memo: dict | None = None) -> tuple:
    """The model decoding with the recipe's VAE, and the recipe naming its file as A1111 does (NAME.safetensors) with
    its hash; `memo` keeps the folder's answer over a request. No VAE: the model and recipe as they are."""
    if not (recipe.vae or recipe.vae_hash):
        return model, recipe
    memo = {} if memo is None else memo
    key = ("vae", id(model), recipe.vae, recipe.vae_hash)
    if key not in memo:
        try:
            found = vae_names.find(recipe.vae, recipe.vae_hash)
        except library.NotFound as error:
            raise ValueError(f"{error}; put it in the models folder's VAE folder, or empty vae to decode with the "
                             "checkpoint's own") from None
        memo[key] = (variant(model, found), found)
    made, found = memo[key]
    return made, recipe.replace(vae=found.path.name, vae_hash=found.hash)
