"""Which reader a JSON object goes to: the `parameters` chunk (or an EXIF UserComment) and the `Comment` chunk
hold the JSON of many tools, told apart by their keys.
"""

from __future__ import annotations

from typing import Any

from . import drawthings, fooocus, formats, keyvalue


def read_parameters_json(text: str, chunks: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    """JSON in a `parameters` chunk or an EXIF UserComment: SwarmUI, the Fooocus family, Draw Things, a
    diffusers-style Space, or any object with recognisable keys (keyvalue.py); else refused."""
    data = formats.json_object(text, "parameters")
    if isinstance(data.get("sui_image_params"), dict):
        return formats.read_swarmui(data)
    if drawthings.is_drawthings(data):
        return drawthings.read_drawthings(data)
    if fooocus.is_fooocus(data, chunks):
        return fooocus.read_fooocus(data, chunks)
    if "prompt" in data and ("num_inference_steps" in data or "guidance_scale" in data):
        return formats.read_diffusers_json(data)
    if keyvalue.recognised(data):
        return keyvalue.read_object(data, "parameters")
    keys = ", ".join(str(key)[:30] for key in list(data)[:8])
    raise ValueError(f"parameters holds JSON in a format SeedLab does not read (keys: {keys}); it is not a prompt")


def read_comment_json(chunks: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    """JSON in a `Comment` chunk: NovelAI's, Draw Things', FooocusPlus' and Fooocus-MRE's, or any object with
    recognisable keys (keyvalue.py)."""
    data = formats.json_object(chunks["Comment"], "Comment")
    if drawthings.is_drawthings(data):
        return drawthings.read_drawthings(data)
    novelai = "uc" in data or "NovelAI" in f"{chunks.get('Software', '')} {chunks.get('Source', '')}"
    if not novelai and fooocus.is_fooocus(data, chunks):
        return fooocus.read_fooocus(data, chunks)
    if not novelai and keyvalue.recognised(data):
        return keyvalue.read_object(data, "Comment")
    return formats.read_novelai(chunks["Comment"], chunks)
