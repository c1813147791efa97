"""LoRA, applied as A1111 1.10 applies it: named in the prompt, merged into the weights.

A1111's `<lora:NAME:W>` tags (modules/extra_networks.py) are taken out of the prompt before it is
read; `<lora:NAME:TE:UNET>` or `te=` / `unet=` give the text encoder and the UNet their own weights
(extensions-builtin/Lora/extra_networks_lora.py). A recipe's `loras` field holds the same tags for any
prompt syntax (ComfyUI's LoraLoader: clip and model strengths).

Each LoRA file is read from the models folder (library.py) and merged as A1111's network_lora.py
merges it: per layer `up @ down` (reshaped for convolutions), times alpha / rank, times the weight,
added to the layer's weight; several LoRAs one after another in prompt order. Two layouts of keys:
kohya's (`lora_unet_down_blocks_0_..._to_q.lora_down.weight`, `lora_te_text_model_...`, `.alpha`) and
diffusers' / peft's (`unet.down_blocks.0....to_q.lora_A.weight`, `text_encoder....lora_B.weight`;
the older `...processor.to_q_lora.down.weight`). A layer is found by comparing names with the model's
own modules, so the kohya names need no table.

The merged model is a copy that shares every weight no LoRA touches, made once per set of LoRAs and
kept (`merged`), so a grid with a LoRA costs what one without it costs after its first image.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch

from . import library, safetensor_files
from .lora_names import LoraUse, format_hashes, parse_hashes, uses_of

MAX_FILE_BYTES = 2 << 30  # a LoRA for SD is tens to hundreds of MB; an SDXL one up to ~1.7 GB
MAX_TENSORS = 20_000
KEPT_SETS = 2  # merged copies kept per model


@dataclass(frozen=True)
class Resolved:
    """A LoRA found in the models folder, with the weights to merge it at."""

    use: LoraUse
    found: library.Found


def resolve(uses: list[LoraUse], hashes: dict[str, str] | None = None) -> list[Resolved]:
    """Each LoRA's file in the models folder, by its hash when the recipe gives one, else by name."""
    hashes = hashes or {}
    resolved = []
    for use in uses:
        try:
            found = library.find("lora", use.name, hashes.get(use.name, ""))
        except library.NotFound as error:
            raise ValueError(f"{error}; put it there, or take it out of the prompt (or loras) to make the image "
                             "without it") from None
        except ValueError as error:  # a file the hash cannot read
            raise ValueError(f"LoRA {error}") from None
        resolved.append(Resolved(use, found))
    return resolved


# --- reading a LoRA file ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Layer:
    """One layer's LoRA matrices (up: out x rank, down: rank x in[...]) and its scale (alpha / rank)."""

    up: torch.Tensor
    down: torch.Tensor
    scale: float


_SUFFIXES = (  # (up, down) key endings of each layout
    (".lora_up.weight", ".lora_down.weight"),
    (".lora_B.weight", ".lora_A.weight"),
    (".lora.up.weight", ".lora.down.weight"),
    (".lora_linear_layer.up.weight", ".lora_linear_layer.down.weight"),
)
_PROCESSOR = re.compile(r"\.processor\.(to_q|to_k|to_v|to_out)_lora$")  # old diffusers attention processors


def read(path: Path) -> dict[str, Layer]:
    """A LoRA file's layers by their module key (still in the file's naming); refused with a message
    when it is not a safetensors LoRA."""
    with safetensor_files.checked(path, "LoRA", MAX_FILE_BYTES, MAX_TENSORS) as (tensors, keys):
        layers = _layers(tensors, keys)
    if not layers:
        raise ValueError(f"LoRA {path.name} holds no LoRA layers (lora_up/lora_down or lora_A/lora_B weights)")
    return layers


def _layers(tensors, keys: list[str]) -> dict[str, Layer]:
    present = set(keys)
    layers = {}
    for key in keys:
        for up_suffix, down_suffix in _SUFFIXES:
            if not key.endswith(up_suffix) or key[:-len(up_suffix)] + down_suffix not in present:
                continue
            base = key[:-len(up_suffix)]
            up, down = tensors.get_tensor(key), tensors.get_tensor(base + down_suffix)
            if up.dim() not in (2, 4) or down.dim() != up.dim() or up.shape[1] != down.shape[0] or not down.shape[0]:
                raise ValueError(f"LoRA layer {base[:80]} has mismatched shapes {tuple(up.shape)}, {tuple(down.shape)}")
            rank = down.shape[0]
            alpha = tensors.get_tensor(base + ".alpha").item() if base + ".alpha" in present else None
            scale = alpha / rank if alpha is not None else 1.0
            if not (math.isfinite(scale) and torch.isfinite(up).all() and torch.isfinite(down).all()):
                raise ValueError(f"LoRA layer {base[:80]} holds NaN or infinite weights: the image would be noise")
            layers[base] = Layer(up, down, scale)
    return layers


# --- merging --------------------------------------------------------------------------------------------

def _kohya(name: str) -> str:
    return name.replace(".", "_")


def _targets(pipeline) -> dict[str, tuple[str, str]]:
    """Every name a LoRA file may give a layer, mapped to (component, module path)."""
    targets: dict[str, tuple[str, str]] = {}
    for component, kohya_prefixes, diffusers_prefix in (("unet", ("lora_unet_",), "unet."),
                                                         ("text_encoder", ("lora_te_", "lora_te1_"), "text_encoder.")):
        module = getattr(pipeline, component, None)
        if module is None:
            continue
        for name, sub in module.named_modules():
            if not isinstance(getattr(sub, "weight", None), torch.Tensor) or sub.weight.dim() not in (2, 4):
                continue
            spellings = [name]
            if component == "text_encoder" and not name.startswith("text_model."):
                spellings.append("text_model." + name)  # transformers 5: CLIPTextModel has no text_model level
            for spelling in spellings:
                for prefix in kohya_prefixes:
                    targets[prefix + _kohya(spelling)] = (component, name)
                targets[diffusers_prefix + spelling] = (component, name)
                if spelling.endswith(".to_out.0"):  # old attention processors name it to_out
                    targets[diffusers_prefix + spelling[:-2]] = (component, name)
    return targets


def deltas(pipeline, resolved: list[Resolved], wide: bool = False) -> tuple[dict[tuple[str, str], torch.Tensor],
                                                                          list[str]]:
    """The merged weights of every layer the LoRAs change, and notes on keys that match no layer.

    `wide` (the universal CPU baseline) merges in float64 and rounds each weight to its dtype once: the float32
    `up @ down` is a GEMM whose low bits depend on the CPU's kernels.
    """
    targets = _targets(pipeline)
    dtypes: dict[tuple[str, str], torch.dtype] = {}
    merged: dict[tuple[str, str], torch.Tensor] = {}
    notes = []
    for item in resolved:
        layers = read(item.found.path)
        matched, missed = 0, []
        for key, layer in layers.items():
            target = targets.get(_PROCESSOR.sub(lambda m: "." + m.group(1), key))
            if target is None:
                missed.append(key)
                continue
            component, name = target
            multiplier = item.use.te if component == "text_encoder" else item.use.unet
            module = getattr(pipeline, component).get_submodule(name)
            dtypes[target] = module.weight.dtype
            weight = merged.get(target, module.weight.detach().to(torch.float64 if wide else module.weight.dtype))
            if layer.up.shape[0] != weight.shape[0] or math.prod(layer.down.shape[1:]) != math.prod(weight.shape[1:]):
                raise ValueError(f"LoRA {item.found.name} does not fit this model: layer {name} is "
                                 f"{tuple(weight.shape)}, the LoRA's is "
                                 f"{layer.up.shape[0]}x{tuple(layer.down.shape[1:])}")
            matched += 1
            if multiplier == 0:
                merged.setdefault(target, weight)
                continue
            merged[target] = weight + _updown(layer, weight) * layer.scale * multiplier
        if not matched:
            raise ValueError(f"LoRA {item.found.name} matches no layer of this model (it may be for another model "
                             f"family): its first keys are {', '.join(list(layers)[:2])[:160]}")
        if missed:
            notes.append(f"LoRA {item.found.name}: {len(missed)} of {len(layers)} layers match no layer of this model "
                         f"and are left out ({missed[0][:80]}, ...)")
    return {target: weight.to(dtypes[target]) for target, weight in merged.items()}, notes


def _updown(layer: Layer, weight: torch.Tensor) -> torch.Tensor:
    """A1111's rebuild_conventional: up @ down, reshaped to the weight, in the weight's dtype."""
    up = layer.up.to(weight.device, weight.dtype)
    down = layer.down.to(weight.device, weight.dtype)
    return (up.reshape(up.shape[0], -1) @ down.reshape(down.shape[0], -1)).reshape(weight.shape)


_LOCK = threading.Lock()
_LOG = logging.getLogger(__name__)


def merged(model, resolved: list[Resolved]):
    """`model` with the LoRAs merged: a Model sharing every weight they do not touch, kept per set."""
    if not resolved:
        return model
    wide = model.computes_wide  # merged in float64 under the universal baseline: another set of weights
    key = (wide, *((item.found.path, item.found.hash, item.use.te, item.use.unet) for item in resolved))
    with _LOCK:
        variants: OrderedDict = model.__dict__.setdefault("_lora_variants", OrderedDict())
        if key in variants:
            variants.move_to_end(key)
            return variants[key]
        pipeline = model.pipeline
        with torch.no_grad():
            weights, notes = deltas(pipeline, resolved, wide)
            copy_ = copy.copy(pipeline)
            for component in {component for component, _ in weights}:
                original = getattr(pipeline, component)
                shared = {id(tensor): tensor for tensor in (*original.parameters(), *original.buffers())}
                patched = copy.deepcopy(original, shared)  # the modules copied, their tensors shared
                for (owner, name), weight in weights.items():
                    if owner == component:
                        patched.get_submodule(name).weight = torch.nn.Parameter(weight, requires_grad=False)
                object.__setattr__(copy_, component, patched)
        # No traces for a merged copy: its weights are its own, and a trace is never freed (tracing.py).
        variant = dataclasses.replace(model, pipeline=copy_, _lane_copies=[], _traced_unet=None, traced=False)
        variant.lanes = model.lanes
        for note in notes:  # a LoRA partly for another model: said in the log, the rest applied
            _LOG.warning(note)
        variants[key] = variant
        while len(variants) > KEPT_SETS:
            variants.popitem(last=False)
        return variant


def with_loras(model, recipe, memo: dict | None = None) -> tuple:
    """The model with the recipe's LoRAs merged, and the recipe with the hashes of the files used (A1111's Lora
    hashes); `memo` keeps the folder's answer per set of LoRAs over a request."""
    uses = uses_of(recipe)
    if not uses:
        return model, recipe
    memo = {} if memo is None else memo
    key = (tuple(uses), recipe.lora_hashes)
    if key not in memo:
        resolved = resolve(uses, parse_hashes(recipe.lora_hashes))
        memo[key] = (merged(model, resolved), format_hashes({item.use.name: item.found.hash for item in resolved}))
    variant, hashes = memo[key]
    return variant, recipe.replace(lora_hashes=hashes)
