"""ComfyUI's LoRA loaders on a sampler's model chain, as the `loras` field (A1111 tags with two weights)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...engine.weights import lora_names

MAX_HOPS = 64  # as comfyui.py: a longer chain of links is not followed (and cycles end here)


def lora_loaders(graph: dict[str, Any], value: Any, link: Callable[[Any], str | None], notes: list[str]) -> str:
    """The LoRA loaders on the sampler's model chain (LoraLoader: model and clip strengths; LoraLoaderModelOnly)
    as A1111 tags <lora:NAME:CLIP:MODEL>, from the checkpoint outwards, as ComfyUI applies them."""
    uses = []
    for _ in range(MAX_HOPS):
        node = graph.get(link(value) or "")
        if node is None:
            break
        inputs = node["inputs"]
        name = inputs.get("lora_name")
        if isinstance(name, str) and name.strip().lower() in ("", "none"):
            pass  # a loader's "None": no LoRA chosen (Efficiency Nodes, Easy-Use, rgthree)
        elif "lora_name" in inputs:
            stem = (name.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".safetensors") if isinstance(name, str)
                    else "")
            weights = inputs.get("strength_clip", 1.0 if "clip" in inputs else 0.0), inputs.get("strength_model", 1.0)
            if not re.fullmatch(r"[^<>:\n]{1,200}", stem) or not all(
                    isinstance(weight, (int, float)) and not isinstance(weight, bool)
                    and abs(weight) <= lora_names.MAX_WEIGHT for weight in weights):
                notes.append(f"LoRA loader {_short_text(name)} with strengths {_short_text(weights)} cannot be "
                             f"restored (a name with <, > or :, or a strength beyond +-{lora_names.MAX_WEIGHT:g})")
            elif weights != (0, 0):
                uses.append(lora_names.LoraUse(stem, float(weights[0]), float(weights[1])))
        value = inputs.get("model")
    if len(uses) > lora_names.MAX_LORAS:
        notes.append(f"the graph loads {len(uses)} LoRAs: the first {lora_names.MAX_LORAS} are restored")
    return " ".join(use.tag() for use in reversed(uses[-lora_names.MAX_LORAS:]))


def _short_text(value: Any) -> str:
    return repr(value)[:80]
