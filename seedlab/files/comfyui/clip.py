"""How a ComfyUI graph reads its prompt: ComfyUI's own syntax, and CLIPSetLastLayer on the positive encoder's clip.

CLIPTextEncode tokenizes and weighs its text as ComfyUI does (engine/prompts/comfyui.py), so a graph's recipe has
`prompt_syntax` "comfyui". CLIPSetLastLayer(stop_at_clip_layer=-N) on the clip the positive prompt's text encoder
takes (through LoRA loaders and other clip nodes, the one nearest the encoder winning, as each clone keeps the last
layer set) is the recipe's clip skip N. ComfyUI's widget allows -24 to -1; a layer beyond the recipe's range is
noted and not restored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...engine.recipe import SPECS

_HOPS = 64
_CONDITIONING = ("conditioning", "conditioning_1", "conditioning_to", "positive", "cond")
_TEXT = ("text", "text_g", "prompt", "positive", "Text", "string")
SETTER = "stop_at_clip_layer"  # CLIPSetLastLayer's widget (also on custom loaders and clip nodes)


def clip_fields(graph: dict[str, Any], positive: Any, link: Callable[[Any], str | None],
                number: Callable[[Any], Any], notes: list[str]) -> dict[str, Any]:
    """{"prompt_syntax": "comfyui"} and, when CLIPSetLastLayer is on the positive encoder's clip, its clip skip.
    `positive` is the sampler's positive conditioning input; `number` follows a widget's link to its value."""
    fields: dict[str, Any] = {"prompt_syntax": "comfyui"}
    encoder = _encoder(graph, positive, link)
    if encoder is None:
        return fields
    layer = _last_layer(graph, graph[encoder]["inputs"].get("clip"), link, number)
    if layer is None:
        return fields
    high = SPECS["clip_skip"].high
    if isinstance(layer, int) and not isinstance(layer, bool) and -high <= layer <= -1:
        if layer != -1:
            fields["clip_skip"] = -layer
    else:
        notes.append(f"CLIPSetLastLayer {str(layer)[:20]} is not restored: SeedLab's clip skip is 1 to {high} "
                     f"(stop_at_clip_layer -1 to -{high})")
    return fields


def _encoder(graph: dict[str, Any], value: Any, link: Callable[[Any], str | None]) -> str | None:
    """The text encoder node behind a conditioning link (through combine, area and control nodes), as the prompt's
    text is found."""
    for _ in range(_HOPS):
        key = link(value)
        node = graph.get(key or "")
        if node is None:
            return None
        inputs = node["inputs"]
        if any(name in inputs and (isinstance(inputs[name], str) or link(inputs[name]) is not None) for name in _TEXT):
            return key
        linked = [inputs[name] for name in _CONDITIONING if link(inputs.get(name)) is not None]
        value = linked[0] if linked else None
    return None


def _last_layer(graph: dict[str, Any], value: Any, link: Callable[[Any], str | None],
                number: Callable[[Any], Any]) -> Any:
    """stop_at_clip_layer of the clip node nearest the encoder that sets it; None when none does."""
    for _ in range(_HOPS):
        node = graph.get(link(value) or "")
        if node is None:
            return None
        inputs = node["inputs"]
        if SETTER in inputs:
            return number(inputs[SETTER])
        value = inputs.get("clip")
    return None
