"""Other tools' metadata as recipe fields: InvokeAI, SwarmUI, NovelAI, diffusers-style JSON; samplers; the
bounded JSON parser and the tolerant number readers the other readers share (drawthings.py, fooocus.py,
invokeai_legacy.py, keyvalue.py; json_recipes.py picks the reader of a JSON object).

Each reader takes the text chunks of one file and returns (format name, recipe fields as read, notes).
Fields are named like the recipe's; values are what the file says, not yet validated (a size that is
not a multiple of 8 stays as it is: building the Recipe is a separate step). Every key that does not
map is named in a note. JSON is parsed with bounds (size, nesting depth, digits) so that hostile
text is refused with one line instead of costing minutes, memory or a RecursionError.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .tool_samplers import (  # noqa: F401  (the sampler names: part of this module's API)
    A1111_NAMES,
    SAMPLERS,
    sampler_scheduler,
    tool_sampling,
)

MAX_TEXT = 64_000  # characters of A1111 text: real ones are a few thousand
MAX_JSON = 4_000_000  # characters of a JSON chunk: large ComfyUI workflows are a few hundred thousand
MAX_DEPTH = 64  # JSON nesting: real metadata nests fewer than 10 levels
MAX_DIGITS = 40  # a JSON integer; seeds have at most 20 digits
# A note's words for a file whose image no server but its tool's own can make (NovelAI's): nothing to compare with.
NOT_MADE_HERE = "the image cannot be made here"

def check_text(what: str, text: Any, limit: int = MAX_TEXT) -> None:
    """Refuse text that is not a string or is longer than `limit`, before any parsing."""
    if not isinstance(text, str):
        raise ValueError(f"{what} must be text, got {type(text).__name__}")
    if len(text) > limit:
        raise ValueError(f"{what} is {len(text)} characters long; at most {limit} are read")


def loads(text: str, what: str, limit: int = MAX_JSON, constants: bool = False) -> Any:
    """json.loads with bounds: size, nesting depth, integer digits; NaN and Infinity refused, or with `constants`
    read as None (ComfyUI's graphs, written by Python's json, hold NaN where a widget had no number)."""
    check_text(what, text, limit)
    depth = deepest = 0
    in_string = escaped = False
    for char in text:  # one pass: the C parser recurses per level, so depth is checked before it runs
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                raise ValueError(f"{what} nests JSON more than {MAX_DEPTH} levels deep")
        elif char in "]}":
            depth -= 1
    try:
        return json.loads(text, parse_int=_bounded_int, parse_constant=(lambda _: None) if constants else _no_constant)
    except (ValueError, RecursionError) as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
        raise ValueError(f"{what} is not valid JSON ({reason[:80]})") from None


def number(key: str, value: str, kind: type) -> int | float:
    """A whole or decimal number of bounded length (no 5,000-digit integers); ValueError naming the key."""
    text = value.strip()
    pattern = r"[0-9]+" if kind is int else r"-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]{1,3})?"
    if len(text) > 40 or not re.fullmatch(pattern, text):  # the length check first: no long input reaches re
        expected = "a whole number" if kind is int else "a number"
        raise ValueError(f"parameters: {key} must be {expected}, got {_clip(value)!r}")
    return int(text) if kind is int else float(text)


def size(key: str, value: str) -> tuple[int, int]:
    """`512x768` as (512, 768)."""
    width, _, height = value.strip().partition("x")
    if not (width.isascii() and width.isdigit() and height.isascii() and height.isdigit()
            and len(width) <= 5 and len(height) <= 5):
        raise ValueError(f"parameters: {key} must be WIDTHxHEIGHT such as 512x512, got {_clip(value)!r}")
    return int(width), int(height)


def as_number(key: str, value: Any, kind: type) -> int | float:
    """A JSON number or a number written as text, as `kind`; ValueError naming the key and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{key} must be a number, got {_clip(value)!r}")
    if isinstance(value, str):
        return number(key, value, kind)
    if kind is float:
        return float(value)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{key} must be a whole number, got {value!r}")
    return int(value)


def put_number(fields: dict[str, Any], notes: list[str], source: str, key: str, value: Any, field: str,
               kind: type) -> None:
    """fields[field] = value as a number; a value that is not one is named in a note and the field left out."""
    try:
        fields[field] = as_number(key, value, kind)
    except ValueError as error:
        odd(notes, source, key, value, str(error))


def put_size(fields: dict[str, Any], notes: list[str], source: str, key: str, value: Any) -> None:
    """width and height from "1024x768", "(1024, 768)", "1024 × 768" or [1024, 768]; else a note."""
    found = _size_text(value) if isinstance(value, (str, list, tuple)) else None
    if found is None:
        odd(notes, source, key, value, "not WIDTHxHEIGHT")
    else:
        fields["width"], fields["height"] = found


def odd(notes: list[str], source: str, key: str, value: Any, reason: str) -> None:
    """The note for one value that cannot be read: the rest of the file still is."""
    reason = reason.removeprefix("parameters: ")
    notes.append(f"{source}: {_clip(key)}: {_clip(value)} could not be read ({reason[:120]}): it is left at its "
                 "default")


def _clip(value: Any, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _bounded_int(text: str) -> int:
    if len(text) > MAX_DIGITS and len(text.lstrip("-")) > MAX_DIGITS:  # called for every integer of a file
        raise ValueError(f"a number has {len(text)} digits, more than {MAX_DIGITS}")
    return int(text)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _leftover(source: str, data: dict[str, Any], used: set[str], notes: list[str]) -> None:
    """One note naming every key of `data` that was not mapped and holds something."""
    rest = [key for key, value in data.items() if key not in used and value not in (None, "", [], {}, False)]
    if rest:
        shown = (", ".join(str(key)[:40] for key in rest[:12])
                 + (f" and {len(rest) - 12} more" if len(rest) > 12 else ""))
        notes.append(f"{source}: {shown} have no SeedLab equivalent and are ignored")


def _size_text(text: Any) -> tuple[int, int] | None:
    """"(768, 1280)", "1024 x 1024", "1024x1024", "1024×1024", "1024*1024" or [1024, 1024] as (width, height)."""
    if isinstance(text, (list, tuple)):
        text = " ".join(str(part) for part in text[:3])
    text = str(text)[:40]
    for mark in ",x×*":
        text = text.replace(mark, " ")
    parts = [part for part in text.strip("()[] ").split() if part]
    if len(parts) == 2 and all(part.isascii() and part.isdigit() and len(part) <= 5 for part in parts):
        return int(parts[0]), int(parts[1])
    return None


def _put(fields: dict[str, Any], data: dict[str, Any], used: set[str], mapping: dict[str, str]) -> None:
    """Copy data[key] into fields[field] for each (key -> field) that is present."""
    for key, field in mapping.items():
        if key in data and data[key] is not None:
            fields[field] = data[key]
            used.add(key)


def read_invokeai(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """InvokeAI 3 and later: the `invokeai_metadata` chunk."""
    data = json_object(text, "invokeai_metadata")
    fields: dict[str, Any] = {}
    notes: list[str] = []
    used = {"generation_mode", "app_version", "positive_style_prompt", "negative_style_prompt"}
    _put(fields, data, used, {"positive_prompt": "prompt", "negative_prompt": "negative_prompt", "seed": "seed",
                              "steps": "num_inference_steps", "cfg_scale": "guidance_scale", "width": "width",
                              "height": "height"})
    model = data.get("model")
    if isinstance(model, dict) and (model.get("name") or model.get("model_name")):
        fields["model"] = model.get("name") or model.get("model_name")
        used.add("model")
    if "scheduler" in data:
        fields["scheduler"] = sampler_scheduler(data["scheduler"], None, notes)
        used.add("scheduler")
    if data.get("rand_device") in ("cpu", "cuda"):  # InvokeAI draws torch.randn on that device
        fields["rng"] = "cpu" if data["rand_device"] == "cpu" else "cuda-philox"
        used.add("rand_device")
    notes += compel_notes(fields)
    _leftover("InvokeAI", data, used, notes)
    return "InvokeAI", fields, notes


# Compel's prompt syntax, which InvokeAI reads: `word+`, `(words)---`, `(words)1.3`, `("a", "b").blend(0.7, 0.3)`,
# `.and()`, `.swap()`. A run of + or - must end the word (a hyphen inside "lo-fi" is text); bounded classes only.
_COMPEL = re.compile(r"[\w)][+-]{1,8}(?=[\s,.)]|$)|\)[0-9]{1,3}(?:\.[0-9]{1,4})?(?=[\s,.)]|$)|\)\.(?:blend|and|swap)\(")


def compel_notes(fields: dict[str, Any]) -> list[str]:
    """A note when a prompt weights words with compel's syntax, which SeedLab reads as plain text: the weights are
    not applied (the words stay, with their + and - marks)."""
    for name, label in (("prompt", "prompt"), ("negative_prompt", "negative prompt")):
        text = fields.get(name)
        found = _COMPEL.search(text[:MAX_TEXT]) if isinstance(text, str) else None
        if found:
            start = max(0, found.start() - 30)
            return [f"the {label} weights words with compel's syntax, which InvokeAI reads ({text[start:found.end()]!r}"
                    ": +, -, (words)1.2, .blend, .and): SeedLab reads it as plain text, so the weights are not applied "
                    "and the image differs"]
    return []


def read_swarmui(data: dict[str, Any]) -> tuple[str, dict[str, Any], list[str]]:
    params = data["sui_image_params"]
    fields: dict[str, Any] = {"to_8bit": "truncate"}  # ComfyUI's decode; SwarmSaveImageWS: (x * 255.0).astype(uint8)
    notes: list[str] = []
    used = {"swarm_version", "aspectratio", "automaticvae", "sampler", "scheduler"}
    _put(fields, params, used, {"prompt": "prompt", "negativeprompt": "negative_prompt", "seed": "seed",
                                "steps": "num_inference_steps", "cfgscale": "guidance_scale", "width": "width",
                                "height": "height", "model": "model", "variationseed": "variation_seed",
                                "variationseedstrength": "variation_strength"})
    if "sampler" in params:
        fields.update(tool_sampling(params["sampler"], params.get("scheduler"), notes, "comfyui"))
    _leftover("SwarmUI", params, used, notes)
    return "SwarmUI", fields, notes


def read_diffusers_json(data: dict[str, Any]) -> tuple[str, dict[str, Any], list[str]]:
    fields: dict[str, Any] = {}
    notes: list[str] = []
    used = {"resolution", "sampler"}
    _put(fields, data, used, {"prompt": "prompt", "negative_prompt": "negative_prompt", "seed": "seed",
                              "num_inference_steps": "num_inference_steps", "guidance_scale": "guidance_scale",
                              "width": "width", "height": "height", "Model": "model", "model": "model"})
    if _size_text(data.get("resolution")):
        fields["width"], fields["height"] = _size_text(data["resolution"])
    if "sampler" in data:
        fields["scheduler"] = sampler_scheduler(data["sampler"], None, notes)
    _leftover("diffusers-style JSON", data, used, notes)
    return "diffusers-style JSON", fields, notes


def read_novelai(comment: str, chunks: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    """NovelAI: the `Comment` JSON (settings and `uc`, the negative prompt), the prompt also in `Description`."""
    from .novelai import source_fields  # the model and its prompt syntax (this module is at its length limit)
    data = json_object(comment, "Comment")
    fields: dict[str, Any] = {}
    notes: list[str] = []
    used = {"prompt", "uc", "sampler", "noise_schedule", "n_samples", "request_type", "signed_hash", "version",
            "v4_prompt", "v4_negative_prompt", "stream"}
    prompt = data.get("prompt", chunks.get("Description"))
    if prompt is not None:
        fields["prompt"] = prompt
    _put(fields, data, used, {"uc": "negative_prompt", "seed": "seed", "steps": "num_inference_steps",
                              "scale": "guidance_scale", "width": "width", "height": "height"})
    if "sampler" in data:
        fields.update(tool_sampling(data["sampler"], data.get("noise_schedule"), notes, "k-diffusion"))
    fields.update(source_fields(chunks.get("Source")))  # the model; NovelAI's syntax for its SD 1.x-based ones
    notes.append(f"NovelAI's models run only on NovelAI's servers: the recipe is shown, {NOT_MADE_HERE}")
    _leftover("NovelAI", data, used, notes)
    return "NovelAI", fields, notes


def json_object(text: str, what: str) -> dict[str, Any]:
    data = loads(text, what)
    if not isinstance(data, dict):
        raise ValueError(f"{what} must hold a JSON object, got {type(data).__name__}")
    return data


def _split_brackets(prompt: str) -> tuple[str, str]:
    """InvokeAI's `positive [negative]` prompt syntax as (positive, negative)."""
    start, end = prompt.find("["), prompt.rfind("]")
    if 0 <= start < end:
        return (prompt[:start] + prompt[end + 1:]).strip(), prompt[start + 1:end].strip()
    return prompt, ""


def json_end(text: str, start: int) -> int | None:
    """Where the JSON string, object or array starting at `start` ends; None if it does not."""
    depth, in_string, position = 0, False, start
    while position < len(text):
        char = text[position]
        if in_string:
            if char == "\\":
                position += 1
            elif char == '"':
                in_string = False
                if depth == 0:
                    return position + 1
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return position + 1
        position += 1
    return None
