"""Image metadata: the recipe in a PNG (written twice), and the recipes other tools leave in PNG, JPEG and WebP.

SeedLab's PNGs carry an A1111 `parameters` text chunk (see infotext.py) and a `seedlab` chunk with
the canonical recipe as JSON. Reading accepts what other tools write: A1111/Forge/SD.Next/Civitai
text (PNG chunk or EXIF UserComment), ComfyUI graphs (API or UI), InvokeAI, Fooocus, SwarmUI and
NovelAI JSON, imaginAIry's EXIF, and stealth PNG info hidden in a PNG's pixels (stealth.py) when it has no text chunks.

Files are untrusted: reading decodes no pixels except a PNG's without text chunks, for stealth info,
and then only up to MAX_PIXELS (PNG chunks are walked by hand, JPEG and WebP give their EXIF without
decoding); every text is size-capped before parsing, and every failure is a one-line ValueError
naming what was found.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from PIL import Image
from PIL.PngImagePlugin import PngInfo

from ..engine.environment import Environment
from ..engine.image import Result
from ..engine.recipe import SPECS, Recipe
from ..engine.spec import FieldError, RecipeError
from ..engine.version import __version__
from ..engine.weights import lora_names
from . import drawthings, formats, imaginairy, invokeai_legacy, json_recipes, keyvalue, mochi
from .chunks import (
    UnreadableImage,  # noqa: F401  (what reading raises: part of this module's API)
    exif_chunks,
    image_kind,
    pixel_size,
    png_chunks,
    read_bytes,
    stealth_chunks,
    stealth_name,
)
from .comfyui.reader import read_comfyui, read_comfyui_workflow
from .infotext import parameters_text, read_infotext
from .links import check_fingerprint
from .stealth import embed, read_stealth

CHUNK_VERSION = 1
MAX_PIXELS = 4096 * 4096  # decoded only up to SeedLab's largest image (Pillow's own limit is 179 million)
SAMPLERS = formats.SAMPLERS


@dataclass(frozen=True)
class Reading:
    """What an image's metadata says: recipe fields as read (not yet validated) and notes."""

    format: str  # "SeedLab", "A1111", "ComfyUI", "InvokeAI", "Fooocus", "SwarmUI", "NovelAI", ...
    fields: dict[str, Any]  # recipe field names -> values as the file has them
    notes: tuple[str, ...] = ()
    fingerprint: str | None = None
    environment: Environment | None = None
    lossy: bool = False  # JPEG or WebP: the pixels are not what was generated
    image_format: str = "PNG"
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


def save_png(result: Result, path: str | Path, stealth: bool = False) -> Path:
    """Write `result` as a PNG that carries its recipe (both chunks); returns the path.

    `stealth` also hides the A1111 text in the alpha channel (stealth_pnginfo, or gzipped as
    stealth_pngcomp where the image is too small for the plain text), for sites that strip text
    chunks: the PNG becomes RGBA, its RGB pixels (and so its fingerprint) unchanged.
    """
    path = Path(path)
    image = stealth_image(result) if stealth else result.image
    image.save(path, format="PNG", pnginfo=png_info(result))
    return path


def stealth_image(result: Result) -> Image.Image:
    """The result's image with its A1111 text hidden in the alpha channel; ValueError if it does not fit."""

    text = parameters_text(result.recipe, result.fingerprint, __version__)
    text = text.encode("utf-8", "replace").decode("utf-8")
    try:
        return embed(result.image, text, "stealth_pnginfo")
    except ValueError:
        return embed(result.image, text, "stealth_pngcomp")  # the message says how many bits it needs


def png_info(result: Result) -> PngInfo:
    """The two text chunks for `result`: `parameters` (A1111 style) and `seedlab` (JSON)."""

    info = PngInfo()
    text = parameters_text(result.recipe, result.fingerprint, __version__)
    info.add_text("parameters", text.encode("utf-8", "replace").decode("utf-8"))  # no lone surrogates in UTF-8
    chunk = {
        "version": CHUNK_VERSION,
        "recipe": result.recipe.to_json(),
        "fingerprint": result.fingerprint,
        "environment": result.environment.to_dict(),
    }
    info.add_text("seedlab", json.dumps(chunk, ensure_ascii=True, sort_keys=True))  # ASCII: a plain tEXt chunk
    return info


def read_metadata(path_or_file: str | Path | IO[bytes] | bytes) -> Reading:
    """The recipe fields and notes in a PNG, JPEG or WebP; its pixels are not decoded."""
    data = path_or_file if isinstance(path_or_file, bytes) else read_bytes(path_or_file)
    kind = image_kind(data)
    chunks = png_chunks(data) if kind == "PNG" else exif_chunks(data)
    hidden = read_stealth(data, MAX_PIXELS) if kind == "PNG" and not chunks else None
    if hidden is not None:
        chunks = stealth_chunks(*hidden)
    reading = read_chunks(chunks, pixel_size(data, kind))
    name = reading.format if hidden is None else stealth_name(reading.format, hidden[0])
    lossy = kind != "PNG"
    return Reading(name, reading.fields, reading.notes, reading.fingerprint, reading.environment, lossy, kind)


def read_chunks(chunks: dict[str, str], size: tuple[int, int] | None = None) -> Reading:
    """Dispatch on the chunks present: SeedLab first, then A1111 text, then the other tools' formats. `size`, the
    image's own width and height, picks the output a graph that saves several images saved in this file."""
    if "seedlab" in chunks:
        return read_seedlab_chunk(chunks["seedlab"])
    if mochi.CHUNK in chunks:  # its caption wins over the JSON a branch of it also left in the UserComment
        name, fields, notes = mochi.read_mochi(chunks[mochi.CHUNK])
        return Reading(name, fields, tuple(_extra_networks(fields) + notes))
    parameters = chunks.get("parameters")
    if parameters is not None and not _is_json_object(parameters) and keyvalue.is_webui_text(parameters):
        name, fields, notes = keyvalue.read_webui_text(parameters)  # DenOfEquity's diffusers webUI extensions
        return Reading(name, fields, tuple(notes))
    if parameters is not None and "Steps: " not in parameters and _keyed_chunks(chunks):
        parameters = None  # Hunyuan-DiT's app: "Power by HunYun" here, the recipe in chunks of their own
    if parameters is not None and not _is_json_object(parameters) and keyvalue.is_key_value(parameters):
        name, fields, notes = keyvalue.read_text(parameters)  # "Prompt: ...\nSeed: 42": a front end's, not A1111's
        return Reading(name, fields, tuple(notes))
    if parameters is not None and not _is_json_object(parameters):  # "{red|blue} car" is a prompt, not JSON
        fields, notes, fingerprint = read_infotext(parameters)
        if fingerprint is not None:
            fingerprint = check_fingerprint("parameters: Fingerprint", fingerprint)
        return Reading(_a1111_flavour(parameters), fields, tuple(_extra_networks(fields) + _scheduled(fields) + notes),
                       fingerprint)
    if parameters is not None:
        name, fields, notes = json_recipes.read_parameters_json(parameters, chunks)
    elif "invokeai_metadata" in chunks:
        name, fields, notes = formats.read_invokeai(chunks["invokeai_metadata"])
    elif "sd-metadata" in chunks:
        name, fields, notes = invokeai_legacy.read_invokeai_legacy(chunks["sd-metadata"], chunks.get("Dream"))
    elif "Dream" in chunks:
        name, fields, notes = invokeai_legacy.read_dream(chunks["Dream"])
    elif "Comment" in chunks and chunks["Comment"].lstrip().startswith("{"):
        name, fields, notes = json_recipes.read_comment_json(chunks)
    elif imaginairy.CHUNK in chunks or imaginairy.is_software(chunks.get("Software", "")):
        name, fields, notes = imaginairy.read_imaginairy(chunks)  # EXIF: UserComment JSON and ImageDescription
    elif _keyed_chunks(chunks):
        name, fields, notes = keyvalue.read_object(chunks, "text chunks")  # tEXt prompt, seed, steps, ... each
    elif "prompt" in chunks:
        name, fields, notes = read_comfyui(chunks["prompt"], size)
    elif "workflow" in chunks:
        name, fields, notes = read_comfyui_workflow(chunks["workflow"], size)
    elif drawthings.XMP_CHUNK in chunks:
        name, fields, notes = drawthings.read_xmp(chunks[drawthings.XMP_CHUNK])
    elif (text := next((chunks[key] for key in _TEXTS if key in chunks and keyvalue.is_key_value(chunks[key])),
                       None)) is not None:
        name, fields, notes = keyvalue.read_text(text)
    else:
        found = ", ".join(sorted(chunks)[:8]) or "none"
        raise ValueError(f"file has no recipe: no SeedLab, A1111, ComfyUI, InvokeAI, Fooocus, SwarmUI, NovelAI, Draw "
                         f"Things, Mochi Diffusion, imaginAIry or Key: value metadata (text chunks: {found[:120]})")
    return Reading(name, fields, tuple(_extra_networks(fields) + _scheduled(fields) + notes))


def _keyed_chunks(chunks: dict[str, str]) -> bool:
    """A chunk each for the prompt and the settings (prompt, seed, steps, ...), not a ComfyUI graph."""
    return keyvalue.recognised(chunks) and not chunks.get("prompt", "").lstrip().startswith("{")


_TEXTS = ("Description", "Comment", "description", "comment", "UserComment", "Generation data")  # front ends' texts


@functools.lru_cache(maxsize=4)  # asked up to four times of one file's text: a 1.6 MB JSON was parsed each time
def _is_json_object(text: str) -> bool:
    if not text.lstrip().startswith("{"):
        return False
    try:
        return isinstance(formats.loads(text, "parameters"), dict)
    except ValueError:
        return False


def read_seedlab_chunk(text: str) -> Reading:
    """The canonical JSON chunk: validated like any untrusted recipe."""
    data = formats.loads(text, "seedlab chunk")
    if not isinstance(data, dict) or not isinstance(data.get("recipe"), dict):
        raise ValueError("seedlab chunk must be a JSON object with a recipe")
    if data.get("version") != CHUNK_VERSION:
        raise ValueError(f"seedlab chunk version {str(data.get('version'))[:20]!r} is not one this SeedLab reads "
                         f"({CHUNK_VERSION})")
    fingerprint = data.get("fingerprint")
    if fingerprint is not None:
        check_fingerprint("seedlab chunk fingerprint", fingerprint)
    environment = None
    if data.get("environment") is not None:
        try:
            environment = Environment.from_dict(data["environment"])
        except (TypeError, ValueError) as error:
            raise ValueError(f"seedlab chunk: environment: {str(error)[:120]}") from None
    return Reading("SeedLab", dict(data["recipe"]), (), fingerprint, environment)


def recipe_from_reading(reading: Reading) -> Recipe:
    """The validated Recipe for what a file says; ValueError naming the field and the format."""
    fields = dict(reading.fields)
    known = set(SPECS)
    if reading.format == "SeedLab":
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"seedlab chunk: unknown recipe field(s): {', '.join(unknown)[:120]}")
    fields = {name: value for name, value in fields.items() if name in known}  # a field this version lacks
    fields.setdefault("prompt", "")
    try:
        return Recipe(**{name: SPECS[name].coerce(value) for name, value in fields.items()})
    except (TypeError, ValueError) as error:
        raise ValueError(f"{_label(reading)}: {str(error)[:200]}") from None


def partial_recipe(reading: Reading) -> tuple[Recipe, list[str]]:
    """Another tool's recipe as far as this SeedLab can run it: a field whose value it cannot use is named in a note
    with what the file says and left at its default, every other field kept. SeedLab's own chunk stays whole or
    refused (recipe_from_reading), and so does a file whose prompt cannot be used."""
    if reading.format == "SeedLab":
        return recipe_from_reading(reading), []
    fields = {name: value for name, value in reading.fields.items() if name in SPECS and not _unchosen(name, value)}
    fields.setdefault("prompt", "")
    notes: list[str] = []
    for name in ("prompt", "loras") if fields.get("prompt_syntax") == "a1111" else ("loras",):
        if isinstance(fields.get(name), str) and "<" in fields[name]:  # one odd LoRA tag costs that tag
            fields[name], unread = lora_names.salvage(fields[name], name)
            notes += unread

    def drop(name: str, problem: str) -> None:
        if name == "prompt" or name not in fields:
            raise ValueError(f"{_label(reading)}: {name} {problem[:200]}")
        notes.append(f"{SPECS[name].label} {_shown(fields.pop(name))} from the file cannot be used here "
                     f"({problem[:160]}): it is left at its default, so the image differs")

    for _ in range(len(SPECS)):
        values = {}
        for name, value in list(fields.items()):
            try:
                values[name] = SPECS[name].coerce(value)
            except (TypeError, ValueError) as error:
                drop(name, error.problem if isinstance(error, FieldError) else str(error))
        try:
            return Recipe(**values), notes
        except RecipeError as error:
            for problem in error.errors:
                drop(problem.field, problem.problem)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{_label(reading)}: {str(error)[:200]}") from None
    raise ValueError(f"{_label(reading)}: no usable recipe")


# Fields a tool's widget leaves at "None" (or empty) when nothing is chosen: no LoRA, the checkpoint's own VAE.
_NAMES = ("model", "scheduler", "vae", "loras", "hires_upscaler", "hires_sampler", "model_hash", "vae_hash")


# The VAE a tool names when it decodes with the checkpoint's own: Fooocus', Efficiency Nodes' loader's, A1111's.
_OWN_VAE = ("default (model)", "baked vae", "automatic")


def _unchosen(name: str, value: Any) -> bool:
    """A name field the file leaves empty or "None" (or the VAE as "the model's own"): absent, not a value to refuse
    or to note as missing."""
    if name not in _NAMES or not (value is None or isinstance(value, str)):
        return False
    word = (value or "").strip().lower()
    return word in ("", "none") or (name == "vae" and word in _OWN_VAE)


def _shown(value: Any) -> str:
    """A value a file holds, quoted for a note: a huge number by its size (1e308 read as an int has 309 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"(a {len(str(abs(value)))}-digit number)"
    return repr(str(value)[:60])


def _label(reading: Reading) -> str:
    return "seedlab chunk" if reading.format == "SeedLab" else "parameters" if "A1111" in reading.format \
        else f"{reading.format} metadata"


def read_png(path_or_file: str | Path | IO[bytes]) -> tuple[Recipe, str | None, Environment | None, list[str]]:
    """The recipe in an image (PNG, JPEG or WebP): (recipe, fingerprint or None, environment or None, notes)."""
    reading = read_metadata(path_or_file)
    recipe, unusable = partial_recipe(reading)  # another tool's odd value: named in a note, the rest restored
    return recipe, reading.fingerprint, reading.environment, list(reading.notes) + unusable


def _a1111_flavour(text: str) -> str:
    """Which A1111-style writer: the label the report and `info` show."""
    if "Civitai resources:" in text or "Civitai metadata:" in text:
        return "A1111 (Civitai)"
    if "App: SD.Next" in text:
        return "A1111 (SD.Next)"
    if "Version: ComfyUI" in text:
        return "A1111 (ComfyUI saver)"
    if "Version: Fooocus" in text:
        return "A1111 (Fooocus)"
    if "Version: f" in text or "Version: classic" in text or "Version: neo" in text:
        return "A1111 (Forge)"
    return "A1111"


# A1111's prompt editing ([from:to:when], [to:when], [from::when]), alternation ([a|b]) and composition (AND):
# classes without ':' / '|' keep each pattern linear in the prompt's length (prompts are untrusted).
_EDITING = re.compile(r"\[[^\[\]:|]*(?::[^\[\]:|]*){1,2}\]|\[[^\[\]|]*(?:\|[^\[\]|]*)+\]|\bAND\b")


def _scheduled(fields: dict[str, Any]) -> list[str]:
    """A note on A1111 prompt syntax that changes the prompt while sampling, which SeedLab does not run."""
    texts = [fields.get(name) for name in ("prompt", "negative_prompt")]
    if fields.get("prompt_syntax") != "a1111" or not any(isinstance(text, str) and _EDITING.search(text)
                                                          for text in texts):
        return []
    found = next(match.group(0) for text in texts if isinstance(text, str)
                 for match in [_EDITING.search(text)] if match)
    return [f"{found[:60]} in the prompt: A1111's prompt editing, alternation or AND (the prompt changing while it "
            "samples) is not run here; the text is read as written, so the image differs"]


def _extra_networks(fields: dict[str, Any]) -> list[str]:
    """Notes on A1111's inline <lora:NAME:WEIGHT>, <hypernet:...>, <lyco:...> tags: which are not applied."""
    prompt = fields.get("prompt")
    if not isinstance(prompt, str) or "<" not in prompt:
        return []
    tags: dict[str, None] = {}  # in prompt order, each once
    position, end = 0, -1
    while (start := prompt.find("<", position)) >= 0:  # a scan, not a regex: prompts are untrusted
        if end < start:
            end = prompt.find(">", start)
        if end < 0:
            break
        following = prompt.find("<", start + 1)
        if following < 0 or following > end:  # no "<" inside the tag: each character is looked at once or twice
            tag = prompt[start:end + 1]
            if tag.startswith(("<lora:", "<hypernet:", "<lyco:")) and "\n" not in tag and tag[-2] != ":":
                tags[tag] = None
        position = start + 1 if following < 0 or following < end else end + 1
    if fields.get("prompt_syntax") == "a1111":  # its LoRA tags are applied (lora.py); A1111 drops the others
        others = [tag for tag in tags if not tag.startswith(("<lora:", "<lyco:"))]
        return [f"{', '.join(others)[:200]} in the prompt: hypernetworks are not run here (the tags are taken out "
                "of the prompt, as A1111 does)"] if others else []
    if not tags:
        return []
    return [f"{', '.join(tags)[:200]} in the prompt: A1111 extra networks (LoRA, hypernetworks) are not loaded for "
            "this prompt syntax, and the tags stay in the prompt as written, where the text encoder reads them "
            "as words"]
