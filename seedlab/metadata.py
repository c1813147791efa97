"""PNG metadata: the recipe twice, for other tools (A1111 `parameters`) and for SeedLab (`seedlab` JSON).

The `parameters` chunk is the de-facto format that image sites and metadata readers parse:

    a red circle
    Negative prompt: blurry
    Steps: 20, Sampler: Euler, CFG scale: 7.5, Seed: 42, Size: 64x64, Model: embedded, ...

Values that contain `,`, `:` or a line break are written as JSON strings, as A1111 does. The
`seedlab` chunk holds the canonical recipe, the pixel fingerprint and the environment as JSON.
Reading prefers `seedlab`; a PNG from another tool is read from `parameters`, with a note for
everything that has no SeedLab equivalent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import IO, Any

from PIL import Image
from PIL.PngImagePlugin import PngInfo

from .determinism import Environment
from .generation import Result
from .links import check_fingerprint
from .recipe import RNG_SOURCES, Recipe

CHUNK_VERSION = 1

# A1111 sampler names with a clear diffusers equivalent (diffusers' scheduler overview lists them).
SAMPLERS = {
    "Euler a": "EulerAncestralDiscreteScheduler",
    "Euler": "EulerDiscreteScheduler",
    "DPM++ 2M": "DPMSolverMultistepScheduler",
    "DDIM": "DDIMScheduler",
    "PLMS": "PNDMScheduler",
    "Heun": "HeunDiscreteScheduler",
    "DPM2": "KDPM2DiscreteScheduler",
    "DPM2 a": "KDPM2AncestralDiscreteScheduler",
    "UniPC": "UniPCMultistepScheduler",
    "LMS": "LMSDiscreteScheduler",
    "LCM": "LCMScheduler",
}
SAMPLER_NAMES = {scheduler: name for name, scheduler in SAMPLERS.items()}
# Noise schedules A1111 appends to a sampler name ("DPM++ 2M Karras") or writes as "Schedule type".
SCHEDULE_TYPES = ("Karras", "Exponential", "SGM Uniform", "Polyexponential", "Align Your Steps", "Simple",
                  "Normal", "DDIM", "Beta", "KL Optimal", "Uniform")
# A1111's extra networks, written inline in the prompt: <lora:NAME:WEIGHT>, <hypernet:NAME:WEIGHT>, and
# <lyco:...> from the LyCORIS extension. A1111 removes them from the text it encodes and applies the networks.
_EXTRA_NETWORK = re.compile(r"<(?:lora|hypernet|lyco):[^<>]+>")
_SIZE = re.compile(r"^([0-9]{1,5})x([0-9]{1,5})$")
_KEY = re.compile(r"\s*([A-Za-z0-9_][\w \-/.+()]*?)\s*:\s*")


class UnreadablePNG(ValueError):
    """The file cannot be read as a PNG at all (missing, not an image, another format, truncated).

    Other ValueErrors from reading mean the file was read but its recipe is missing or refused.
    """


def save_png(result: Result, path: str | Path) -> Path:
    """Write `result` as a PNG that carries its recipe (both chunks); returns the path."""
    path = Path(path)
    result.image.save(path, format="PNG", pnginfo=png_info(result))
    return path


def png_info(result: Result) -> PngInfo:
    """The two text chunks for `result`: `parameters` (A1111 style) and `seedlab` (JSON)."""
    info = PngInfo()
    text = parameters_text(result.recipe, result.fingerprint)
    info.add_text("parameters", text.encode("utf-8", "replace").decode("utf-8"))  # no lone surrogates in UTF-8
    chunk = {
        "version": CHUNK_VERSION,
        "recipe": result.recipe.to_dict(),
        "fingerprint": result.fingerprint,
        "environment": result.environment.to_dict(),
    }
    info.add_text("seedlab", json.dumps(chunk, ensure_ascii=True, sort_keys=True))  # ASCII: a plain tEXt chunk
    return info


def parameters_text(recipe: Recipe, fingerprint: str | None = None) -> str:
    """The A1111 `parameters` text for a recipe, with SeedLab's extra fields in the same `key: value` form."""
    from . import __version__

    fields = {
        "Steps": recipe.num_inference_steps,
        "Sampler": SAMPLER_NAMES.get(recipe.scheduler, recipe.scheduler),
        "CFG scale": repr(recipe.guidance_scale),
        "Seed": recipe.seed,
        "Size": f"{recipe.width}x{recipe.height}",
        "Model": recipe.model,
        "Scheduler": recipe.scheduler,
        "RNG": recipe.rng,
        "Dtype": recipe.dtype,
        "Full determinism": "on" if recipe.deterministic else "off",
    }
    if fingerprint:
        fields["Fingerprint"] = fingerprint
    fields["SeedLab"] = __version__
    lines = [recipe.prompt]
    if recipe.negative_prompt:
        lines.append(f"Negative prompt: {recipe.negative_prompt}")
    lines.append(", ".join(f"{key}: {quote(str(value))}" for key, value in fields.items()))
    return "\n".join(lines)


def quote(value: str) -> str:
    """A1111's quoting: a value with `,`, `:` or a line break (or a leading quote) becomes a JSON string."""
    if any(mark in value for mark in ",:\n") or value.startswith('"'):
        return json.dumps(value, ensure_ascii=False)
    return value


def read_png(path_or_file: str | Path | IO[bytes]) -> tuple[Recipe, str | None, Environment | None, list[str]]:
    """The recipe in a PNG: from the `seedlab` chunk, else from A1111 `parameters`.

    Returns (recipe, fingerprint or None, environment or None, notes on what could not be mapped).
    """
    try:
        with Image.open(path_or_file) as image:
            if image.format != "PNG":
                raise UnreadablePNG(f"file must be a PNG, got {image.format or 'an unknown format'}")
            text = dict(getattr(image, "text", {}) or {})
    except (OSError, SyntaxError, Image.DecompressionBombError) as error:  # not an image at all, or a bomb
        raise UnreadablePNG(f"file is not a readable PNG ({error})") from None
    if "seedlab" in text:
        return read_seedlab_chunk(text["seedlab"])
    if "parameters" in text:
        recipe, fingerprint, notes = read_parameters(text["parameters"])
        return recipe, fingerprint, None, notes
    raise ValueError("file has no recipe: neither a seedlab nor an A1111 parameters text chunk")


def read_seedlab_chunk(text: str) -> tuple[Recipe, str | None, Environment | None, list[str]]:
    """The canonical JSON chunk: validated like any untrusted recipe."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"seedlab chunk is not valid JSON ({error.msg} at character {error.pos})") from None
    if not isinstance(data, dict) or "recipe" not in data:
        raise ValueError("seedlab chunk must be a JSON object with a recipe")
    if data.get("version") != CHUNK_VERSION:
        raise ValueError(f"seedlab chunk version {data.get('version')!r} is not one this SeedLab reads "
                         f"({CHUNK_VERSION})")
    try:
        recipe = Recipe.from_dict(data["recipe"])
    except (ValueError, TypeError) as error:
        raise ValueError(f"seedlab chunk: {error}") from None
    fingerprint = data.get("fingerprint")
    if fingerprint is not None:
        check_fingerprint("seedlab chunk fingerprint", fingerprint)
    environment = None
    if data.get("environment") is not None:
        environment = Environment.from_dict(data["environment"])
    return recipe, fingerprint, environment, []


def read_parameters(text: str) -> tuple[Recipe, str | None, list[str]]:
    """An A1111 `parameters` text: prompt lines, an optional `Negative prompt:` line, a `key: value` line.

    Returns (recipe, fingerprint if SeedLab wrote it, notes).
    """
    if not isinstance(text, str):
        raise ValueError(f"parameters must be text, got {type(text).__name__}")
    lines = text.strip().replace("\r\n", "\n").split("\n")
    fields = parse_fields(lines[-1])
    if fields is not None:
        lines = lines[:-1]
    prompt_lines: list[str] = []
    negative_lines: list[str] | None = None
    for line in lines:
        if negative_lines is None and line.startswith("Negative prompt:"):
            negative_lines = [line.removeprefix("Negative prompt:").removeprefix(" ")]
        elif negative_lines is None:
            prompt_lines.append(line)
        else:
            negative_lines.append(line)
    recipe_fields: dict[str, Any] = {
        "prompt": "\n".join(prompt_lines),
        "negative_prompt": "\n".join(negative_lines or []),
    }
    notes: list[str] = []
    tags = list(dict.fromkeys(_EXTRA_NETWORK.findall(recipe_fields["prompt"])))  # each once, in prompt order
    if tags:
        notes.append(f"{', '.join(tags)} in the prompt: A1111 extra networks (LoRA, hypernetworks) are not loaded, "
                     "and the tags stay in the prompt as written, where the text encoder reads them as words")
    fingerprint = _map_fields(fields or [], recipe_fields, notes)
    try:
        return Recipe(**recipe_fields), fingerprint, notes
    except ValueError as error:
        raise ValueError(f"parameters: {error}") from None


def parse_fields(line: str) -> list[tuple[str, str]] | None:
    """`Steps: 20, Sampler: Euler a, Lora hashes: "a: 1, b: 2"` as (key, value) pairs, in order.

    None when the line is not a parameter line (fewer than three `key: value` pairs, or text that
    does not read as such pairs): then it belongs to the prompt.
    """
    pairs: list[tuple[str, str]] = []
    position = 0
    while position < len(line):
        match = _KEY.match(line, position)
        if not match:  # A1111 writes a key alone when its value is the key itself
            end = line.find(",", position)
            flag = line[position:end if end >= 0 else len(line)]
            if ":" in flag or '"' in flag or not flag.strip():
                return None
            pairs.append((flag.strip(), flag.strip()))
            position = len(line) if end < 0 else end + 1
            continue
        key, position = match[1], match.end()
        if line.startswith('"', position):
            try:
                value, position = json.JSONDecoder().raw_decode(line, position)
            except json.JSONDecodeError:
                return None
            if not isinstance(value, str):
                return None
        else:
            end = line.find(",", position)
            end = len(line) if end < 0 else end
            value, position = line[position:end].strip(), end
        pairs.append((key, value))
        rest = line[position:].lstrip(" ")
        if rest and not rest.startswith(","):
            return None
        position = len(line) - len(rest) + 1  # past the comma
    return pairs if sum(key != value for key, value in pairs) >= 3 else None


def _map_fields(pairs: list[tuple[str, str]], recipe: dict[str, Any], notes: list[str]) -> str | None:
    """Fill recipe fields from A1111 pairs; note what has no SeedLab equivalent. Returns a SeedLab fingerprint."""
    fields = dict(pairs)
    fingerprint = None
    hires = [f"{key}: {value}" for key, value in pairs if key.startswith("Hires") or key == "Denoising strength"]
    if hires:
        notes.append(f"hires fix ({', '.join(hires)}) is not supported: only the first pass is regenerated")
    for key, value in pairs:
        if key == "Steps":
            recipe["num_inference_steps"] = _number(key, value, int)
        elif key == "CFG scale":
            recipe["guidance_scale"] = _number(key, value, float)
        elif key == "Seed":
            recipe["seed"] = _number(key, value, int)
        elif key == "Size":
            match = _SIZE.match(value)
            if not match:
                raise ValueError(f"parameters: Size must be WIDTHxHEIGHT such as 512x512, got {value[:40]!r}")
            recipe["width"], recipe["height"] = int(match[1]), int(match[2])
        elif key == "Model":
            recipe["model"] = value
        elif key == "Scheduler":  # SeedLab's own: the diffusers class, more precise than Sampler
            recipe["scheduler"] = value
        elif key == "Sampler":
            if "Scheduler" not in fields:
                recipe["scheduler"] = _sampler(value, fields.get("Schedule type"), notes)
        elif key == "RNG":
            rng = {"CPU": "cpu", "GPU": "device"}.get(value, value)
            if rng in RNG_SOURCES:
                recipe["rng"] = rng
            else:
                notes.append(f"RNG {value} has no SeedLab equivalent: noise is drawn on the CPU")
        elif key == "Dtype":
            recipe["dtype"] = value
        elif key == "Full determinism":
            recipe["deterministic"] = value == "on"
        elif key == "Fingerprint":
            fingerprint = check_fingerprint("parameters: Fingerprint", value)
        elif key == "Model hash":
            notes.append(f"Model hash {value} is not checked: SeedLab names models, it does not hash them")
        elif key == "Clip skip":
            notes.append(f"Clip skip {value} is not supported: the text encoder's last layer is used")
        elif key in ("Schedule type", "SeedLab", "Version") or key.startswith("Hires") or key == "Denoising strength":
            continue  # handled with Sampler, with hires, or only says which program wrote the file
        else:
            notes.append(f"{key}: {value[:60]} has no SeedLab equivalent and is ignored")
    return fingerprint


def _sampler(name: str, schedule_type: str | None, notes: list[str]) -> str:
    """An A1111 sampler name as a diffusers scheduler class; "default" (with a note) when there is none."""
    base = name
    for schedule in SCHEDULE_TYPES:  # the old style: the schedule is part of the name
        if name.endswith(" " + schedule) and name.removesuffix(" " + schedule) in SAMPLERS:
            base, schedule_type = name.removesuffix(" " + schedule), schedule
    if base not in SAMPLERS:
        notes.append(f"Sampler {name} has no clear diffusers equivalent: the model's default scheduler is used")
        return "default"
    if schedule_type and schedule_type not in ("Automatic", "Normal"):
        notes.append(f"Schedule type {schedule_type} is not applied: {SAMPLERS[base]} runs with its default sigmas")
    return SAMPLERS[base]


def _number(key: str, value: str, kind: type) -> int | float:
    pattern = r"[0-9]{1,20}" if kind is int else r"-?[0-9]{1,20}(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?"
    if not re.fullmatch(pattern, value):
        expected = "a whole number" if kind is int else "a number"
        raise ValueError(f"parameters: {key} must be {expected}, got {value[:40]!r}")
    return kind(value)
