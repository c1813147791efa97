"""NovelAI's `Source` chunk as recipe fields: the model it names, and how that model reads its prompts."""

from __future__ import annotations

import re
from typing import Any

# NovelAI's Stable Diffusion 1.x-based models: "Stable Diffusion 1D44365E" (not "Stable Diffusion XL ...", its
# SDXL-based V3, nor "NovelAI Diffusion V4 ...", a model of its own).
_SD1 = re.compile(r"Stable Diffusion [0-9A-Fa-f]{8}")


def source_fields(source: str | None) -> dict[str, Any]:
    """{"model": source} and, for an SD 1.x-based model, NovelAI's prompt syntax with clip skip 2 (CLIP's
    penultimate layer, as A1111 reads NovelAI's images: engine/prompts/novelai.py)."""
    if not source:
        return {}
    fields: dict[str, Any] = {"model": source}
    if _SD1.fullmatch(source.strip()):
        fields.update(prompt_syntax="novelai", clip_skip=2)
    return fields
