"""A1111 infotext: the `parameters` text that AUTOMATIC1111, Forge, SD.Next and Civitai write, read and written.

    a red circle
    Negative prompt: blurry
    Steps: 20, Sampler: Euler, Schedule type: Uniform, CFG scale: 7.5, Seed: 42, Size: 64x64, ...
    Template: a {red|blue} circle                     <- extra lines after the parameter line

Reading follows A1111's `parse_generation_parameters`: values are plain (up to the next comma), quoted JSON strings,
or JSON objects and arrays (`Hashes: {...}`, `Civitai resources: [...]`); a key can stand alone. Every key that has
no recipe field becomes a note. The scanner is a single pass over a text capped at MAX_TEXT, so it costs linear time.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..engine.philox import CUDA_CARDS, cards_matching
from ..engine.recipe import SPECS
from ..engine.samplers.names import a1111_spelling, is_comfy_sampler, is_ksampler
from .a1111_sampling import READ_HERE, read_sampling
from .formats import A1111_NAMES, MAX_TEXT, SAMPLERS, check_text, json_end, loads, number, sampler_scheduler, size
from .sdcpp import SDCPP_RNG, read_rng

# Recipe field -> its A1111 key, from its Spec (recipe.py); Sampler, Size, RNG, Full determinism are A1111's below.
A1111_KEYS = {name: spec.a1111 for name, spec in SPECS.items() if spec.a1111}
A1111_ORDER = ("Steps", "Sampler", "CFG scale", "Seed", "Size", "Model")  # where A1111 puts them: first, in this order
SEEDLAB_SCHEDULER_KEY = "Scheduler"  # the exact diffusers class, more precise than A1111's Sampler
NO_RNG = "(no RNG field)"  # in the note on a text without "RNG:" (serving/conventions.py looks for it)
SEEDLAB_RNG_KEY = "SeedLab RNG"  # the exact noise source where A1111's word is not exact (device, numpy-pcg64)
# A1111's RNG setting: GPU (its default, not written) is torch's noise on the card, NV the same computed on
# the CPU, CPU torch's CPU generator. SeedLab's device source is GPU only on a CUDA GPU: written with SeedLab RNG.
A1111_RNG = {"cpu": "CPU", "device": "GPU", "cuda-philox": "NV"}
RNG_OF_A1111 = {"CPU": "cpu", "GPU": "cuda-philox", "NV": "cuda-philox", "cpu": "cpu", "device": "device"}
# Keys that only say which program wrote the file, or that are read together with another key.
_SILENT = {"Schedule type", "SeedLab", "Version", "App", "Fingerprint"}
_KNOWN = {"Steps", "Sampler", "CFG scale", "Seed", "Size", "Model", "Schedule type"}
_SPELLINGS = {"cfg scale": "CFG scale", "cfg": "CFG scale", "sampler": "Sampler", "seed": "Seed", "steps": "Steps",
              "size": "Size", "model": "Model", "schedule type": "Schedule type", "scheduler": "Scheduler"}


def parameters_text(recipe: Any, fingerprint: str | None = None, version: str | None = None) -> str:
    """The A1111 text for a recipe, written so A1111 reads back the same settings (see A1111_KEYS)."""
    fields: dict[str, Any] = {}
    for name, key in sorted(A1111_KEYS.items(), key=lambda item: _position(item[1])):
        when = SPECS[name].a1111_when
        if key in fields or (when and getattr(recipe, when) == getattr(type(recipe), when)):
            continue  # Size is written once; A1111 writes its variation and resize keys only when used
        fields.update(_a1111_values(name, key, recipe))
    if fingerprint:
        fields["Fingerprint"] = fingerprint
    if version:
        fields["SeedLab"] = version
    lines = [recipe.prompt]
    if recipe.negative_prompt:
        lines.append(f"Negative prompt: {recipe.negative_prompt}")
    lines.append(", ".join(f"{key}: {quote(str(value))}" for key, value in fields.items()))
    return "\n".join(lines)


def _a1111_values(name: str, key: str, recipe: Any) -> dict[str, Any]:
    """One field's `key: value` pairs as A1111 spells them."""
    value = getattr(recipe, name)
    if name == "scheduler" and is_ksampler(value):  # one of A1111's samplers, run as A1111 runs it: its name
        return {key: a1111_spelling(value)}
    if name == "scheduler":  # A1111's sampler name and schedule, then the exact diffusers class
        sampler, schedule_type = A1111_NAMES.get(value, (value, None))
        return {key: sampler, **({"Schedule type": schedule_type} if schedule_type else {}),
                SEEDLAB_SCHEDULER_KEY: value}
    if key == "Size":
        return {key: f"{recipe.width}x{recipe.height}"}
    if name == "rng":  # A1111's word where it has one; SeedLab's own where that word means something else too
        words = {key: A1111_RNG[value]} if value in A1111_RNG else {}
        return words if value in ("cpu", "cuda-philox") else {**words, SEEDLAB_RNG_KEY: value}
    if name == "deterministic":
        return {key: "on" if value else "off"}
    if SPECS[name].kind == "float":
        return {key: repr(value)}
    return {key: SPECS[name].to_text(value)}


def _position(key: str) -> int:
    return A1111_ORDER.index(key) if key in A1111_ORDER else len(A1111_ORDER)


def quote(value: str) -> str:
    """A1111's quoting: a value with `,`, `:` or a line break (or a leading quote) becomes a JSON string."""
    if any(mark in value for mark in ",:\n") or value.startswith('"'):
        return json.dumps(value, ensure_ascii=False)
    return value


def read_infotext(text: str) -> tuple[dict[str, Any], list[str], str | None]:
    """An A1111 text as (recipe fields as read, notes, SeedLab fingerprint or None).

    Raises ValueError (one line, naming the key) when the text is too long or a value is malformed.
    """
    check_text("parameters", text)
    lines = text.strip().replace("\r\n", "\n").split("\n")
    index, pairs = _find_parameter_line(lines)
    pairs = _fooocus_pairs(pairs) if pairs is not None else None
    extra = lines[index + 1:] if index is not None else []
    lines = lines[:index] if index is not None else lines
    prompt_lines: list[str] = []
    negative_lines: list[str] | None = None
    for line in lines:
        if negative_lines is None and line.startswith("Negative prompt:"):
            negative_lines = [line.removeprefix("Negative prompt:").removeprefix(" ")]
        elif negative_lines is None:
            prompt_lines.append(line)
        else:
            negative_lines.append(line)
    fields: dict[str, Any] = {"prompt": "\n".join(prompt_lines), "negative_prompt": "\n".join(negative_lines or [])}
    notes: list[str] = []
    fingerprint = _map_pairs(pairs or [], fields, notes)
    for line in extra:  # Template: ..., Negative Template: ..., Used embeddings: ... (extensions' lines)
        if line.strip():
            notes.append(f"{_short(line.strip())} (a line after the parameters) has no SeedLab equivalent "
                         "and is ignored")
    if pairs is not None:
        _default_rng(dict(pairs), fields, notes)
    return fields, notes, fingerprint


def parse_pairs(line: str) -> list[tuple[str, Any]] | None:
    """`Steps: 20, Sampler: Euler a, Hashes: {"vae": "c6"}` as (key, value) pairs; None if not such a line.

    A value is text up to the next comma, a JSON string, or a JSON object or array. One left-to-right
    pass: every character is looked at a bounded number of times.
    """
    pairs: list[tuple[str, Any]] = []
    position, end = 0, len(line)
    while position < end:
        while position < end and line[position] in " ,":
            position += 1
        if position >= end:
            break
        colon, comma = line.find(":", position), line.find(",", position)
        comma = end if comma < 0 else comma
        if colon < 0 or colon > comma:  # a key alone: A1111 writes flags such as "Tiled Diffusion"
            flag = line[position:comma].strip()
            if '"' in flag or not flag:
                return None
            pairs.append((flag, flag))
            position = comma + 1
            continue
        key = line[position:colon].strip()
        if not key or '"' in key or "{" in key or len(key) > 64:
            return None
        position = colon + 1
        while position < end and line[position] == " ":
            position += 1
        if position < end and line[position] in '"{[':
            closing = json_end(line, position)
            if closing is None:
                return None
            value = loads(line[position:closing], f"parameters: {key}")
            position = closing
        else:
            comma = line.find(",", position)
            comma = end if comma < 0 else comma
            value, position = line[position:comma].strip(), comma
        pairs.append((key, value))
        while position < end and line[position] == " ":
            position += 1
        if position < end and line[position] != ",":
            return None
    return pairs


# Fooocus's "a1111" scheme (modules/meta_parser.py, flags.py KSAMPLER): its ComfyUI samplers under A1111's labels, the
# schedule in its own `Scheduler` key (SeedLab's own key for a diffusers class), read back as the last name of a label.
FOOOCUS_SAMPLERS = {"Euler": "euler", "Euler a": "euler_ancestral", "Heun": "heun", "DPM2": "dpm_2",
                    "DPM2 a": "dpm_2_ancestral", "LMS": "lms", "DPM fast": "dpm_fast", "DPM adaptive": "dpm_adaptive",
                    "DPM++ 2S a": "dpmpp_2s_ancestral", "DPM++ SDE": "dpmpp_sde_gpu", "DPM++ 2M": "dpmpp_2m",
                    "DPM++ 2M SDE": "dpmpp_2m_sde_gpu", "LCM": "lcm", "TCD": "tcd", "Restart": "restart",
                    "DDIM": "ddim", "UniPC": "uni_pc"}


def _fooocus_pairs(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Fooocus's A1111 text in the words the rest of this module reads: its sampler by ComfyUI's name with its
    `Scheduler` as the schedule type (not SeedLab's Scheduler key). Any other text is returned as it is."""
    by_key = dict(pairs)
    if not str(by_key.get("Version", "")).startswith("Fooocus"):
        return pairs
    schedule = str(by_key.get("Scheduler", "")).strip()
    read: list[tuple[str, Any]] = []
    for key, value in pairs:
        label = str(value).removesuffix(f" {schedule.capitalize()}") if schedule in ("karras", "exponential") \
            else str(value)  # "DPM++ 2M SDE Karras": the label with its schedule's name after it
        if key == "Sampler" and label in FOOOCUS_SAMPLERS:
            read += [("Sampler", FOOOCUS_SAMPLERS[label]), ("Schedule type", schedule or "normal")]
        elif key != "Scheduler":
            read.append((key, value))
    return read


def _find_parameter_line(lines: list[str]) -> tuple[int | None, list[tuple[str, Any]] | None]:
    """The last line that reads as parameters: all `key: value` pairs, with A1111's keys among them."""
    for index in range(len(lines) - 1, max(-1, len(lines) - 8), -1):  # extensions add a few lines after it
        line = lines[index]
        if line.startswith("Negative prompt:"):
            break
        pairs = parse_pairs(line) if ":" in line else None
        if pairs is None:
            continue
        known = sum(_SPELLINGS.get(key.lower(), key) in _KNOWN for key, _ in pairs)
        if known >= 2 or (known >= 1 and len(pairs) >= 3):
            return index, pairs
    return None, None


def _map_pairs(pairs: list[tuple[str, Any]], fields: dict[str, Any], notes: list[str]) -> str | None:
    """Fill recipe fields from A1111 pairs; note what has no SeedLab equivalent. Returns a SeedLab fingerprint."""
    by_key = {_SPELLINGS.get(key.lower(), key): value for key, value in pairs}
    fingerprint = None
    a1111_sampler = SEEDLAB_SCHEDULER_KEY not in by_key and read_sampling(by_key, fields, notes)
    hires = [f"{key}: {_short(value)}" for key, value in pairs
             if key.startswith("Hires") or key == "Denoising strength"]
    if hires and not a1111_sampler:
        notes.append(f"hires fix ({', '.join(hires)}) needs one of A1111's samplers; "
                     f"{_short(by_key.get('Sampler'))} is not one: only the first pass is regenerated")
    for raw_key, value in pairs:
        try:
            fingerprint = _map_pair(raw_key, value, by_key, fields, notes, a1111_sampler) or fingerprint
        except ValueError as error:  # one odd value ("CFG scale: 5 (0.66) [1]") loses that field, not the file
            reason = str(error).removeprefix("parameters: ")
            notes.append(f"{_short(raw_key)}: {_short(value)} could not be read ({reason[:120]}): it is left at "
                         "its default")
    if "Prompt syntax" not in by_key:
        fields["prompt_syntax"] = _syntax_of(by_key)
    if A1111_KEYS["to_8bit"] not in by_key:  # A1111, Forge, SD.Next, ComfyUI's savers: astype(uint8) (pixels.py)
        fields["to_8bit"] = "round" if _is_seedlab(by_key) else "truncate"
    return fingerprint


def _map_pair(raw_key: str, value: Any, by_key: dict[str, Any], fields: dict[str, Any], notes: list[str],
              a1111_sampler: bool) -> str | None:
    """One A1111 pair into the fields (ValueError naming the key when its value cannot be read); returns the value
    of SeedLab's Fingerprint key."""
    key = _SPELLINGS.get(raw_key.lower(), raw_key)
    if key in READ_HERE and (a1111_sampler or key != "Sampler"):
        return None  # read by read_sampling (or, with another sampler, named in the hires note above)
    if not isinstance(value, str):  # a JSON object or array: Hashes, Civitai resources, ...
        notes.append(f"{raw_key}: {_short(json.dumps(value, ensure_ascii=False))} has no SeedLab equivalent "
                     "and is ignored")
    elif key == "Size":
        fields["width"], fields["height"] = size(key, value)
    elif key == SEEDLAB_SCHEDULER_KEY:
        fields["scheduler"] = value
    elif key == "Sampler":
        if SEEDLAB_SCHEDULER_KEY not in by_key:
            fields["scheduler"] = sampler_scheduler(value, by_key.get("Schedule type"), notes)
            if fields["scheduler"] != "default" and "SeedLab" not in by_key:  # A1111's own DDIM, PLMS, UniPC, LCM
                notes.append(f"Sampler {_short(value)} ran as A1111's own code there; diffusers' "
                             f"{fields['scheduler']} runs here instead, so the image differs")
    elif key in ("RNG", SEEDLAB_RNG_KEY):
        _rng(key, value, by_key, fields, notes)
    elif key == "Full determinism":
        fields["deterministic"] = value == "on"
    elif key in ("Model hash", "VAE hash"):  # the checkpoint's or VAE's file: found by it in the models folder
        if re.fullmatch(r"[0-9a-fA-F]{8,64}", value.strip()):
            fields[_FIELD_OF[key]] = value.strip().lower()
        else:
            notes.append(f"{key} {_short(value)} is not an A1111 hash (8 to 64 hex digits) and is ignored")
    elif key in _FIELD_OF:  # every other field with an A1111 key: read as its Spec's kind
        name = _FIELD_OF[key]
        fields[name] = _read_value(key, value, SPECS[name].kind)
    elif key == "Fingerprint":
        return value
    elif key in _SILENT or not value.strip():
        return None  # read with Sampler or RNG, or only says which program wrote the file; an empty value says nothing
    else:
        notes.append(f"{_short(raw_key)}: {_short(value)} has no SeedLab equivalent and is ignored")
    return None


_SEEDLAB_ONLY = ("SeedLab", "Fingerprint", "Full determinism", "Dtype", SEEDLAB_SCHEDULER_KEY, SEEDLAB_RNG_KEY)


def _syntax_of(by_key: dict[str, Any]) -> str:
    """How the program that wrote the text read its prompts: A1111's syntax, but for SeedLab's own (plain),
    SD.Next's (its own parsers, plain here) and ComfyUI's savers (ComfyUI's CLIPTextEncode)."""
    if _is_seedlab(by_key) or str(by_key.get("App", "")).startswith("SD.Next"):
        return "plain"
    return "comfyui" if str(by_key.get("Version", "")).startswith(("ComfyUI", "Fooocus")) else "a1111"  # Fooocus
    # encodes its prompts with ComfyUI's code (ldm_patched)


def _is_seedlab(by_key: dict[str, Any]) -> bool:
    """SeedLab's own text: it writes keys no other tool does (SeedLab, Dtype, Full determinism, ...)."""
    return any(key in by_key for key in _SEEDLAB_ONLY)


_FIELD_OF = {key: name for name, key in A1111_KEYS.items() if key not in ("Size", "Sampler", "RNG", *READ_HERE)}


def _read_value(key: str, value: str, kind: str) -> Any:
    """An A1111 value as a recipe field of `kind` (the range is checked by the Recipe)."""
    if kind in ("int", "seed"):
        return number(key, value, int)
    if kind == "float":
        return number(key, value, float)
    if kind == "size":
        return None if value.strip() in ("-1x-1", "0x0") else size(key, value)  # A1111 writes -1x-1 for "off"
    return value


def _rng(key: str, value: str, by_key: dict[str, Any], fields: dict[str, Any], notes: list[str]) -> None:
    if key == "RNG" and SEEDLAB_RNG_KEY in by_key:
        return  # SeedLab's exact source wins over the A1111 word
    if key == SEEDLAB_RNG_KEY:
        fields["rng"] = value
    elif value in RNG_OF_A1111:  # also old SeedLab texts: "cpu", "device"
        fields["rng"] = RNG_OF_A1111[value]
    elif value in SDCPP_RNG:  # stable-diffusion.cpp's cuda and std_default (files/sdcpp.py)
        fields["rng"] = read_rng(value, notes)
    else:
        notes.append(f"RNG {_short(value)} has no SeedLab equivalent: the noise is drawn on the CPU, so the image "
                     "differs")


def _default_rng(by_key: dict[str, Any], fields: dict[str, Any], notes: list[str]) -> None:
    """A1111's default GPU noise where no RNG is written, and notes on its GPU and NV noise (read after the size)."""
    word = by_key.get("RNG")
    if SEEDLAB_RNG_KEY in by_key or word not in (None, "GPU", "NV"):
        return
    if word is None:
        if str(by_key.get("Version", "")).startswith(("ComfyUI", "Fooocus")) or is_comfy_sampler(
                fields.get("scheduler", "")):
            # ComfyUI (its savers, the tools built on it) draws its noise with torch's CPU generator, the default
            return
        fields["rng"] = "cuda-philox"
        notes.append(f"the file does not say where its noise came from {NO_RNG}: A1111 draws it on the GPU by "
                     "default, so rng cuda-philox (that noise, computed on any machine) is used; choose rng cpu "
                     "if the file was made with A1111's RNG setting CPU or on a Mac")
    width, height = fields.get("width"), fields.get("height")
    if word != "NV" and isinstance(width, int) and isinstance(height, int):  # NV is computed the same everywhere
        count = 4 * (width // 8) * (height // 8)  # SD 1.x, 2.x and SDXL latents: 4 channels at 1/8 size
        if count > min(CUDA_CARDS.values()):
            matching = cards_matching(count)
            others = ", ".join(card for card in CUDA_CARDS if card not in matching)
            which = f"matches cards with enough threads ({', '.join(matching)}), not {others}" if matching \
                else f"matches none of {others}"
            notes.append(f"at {width}x{height} the GPU drew {count:,} starting noise values, more than some cards "
                         f"draw with one thread each, so the noise depended on the card: rng cuda-philox {which}")
    if "Ancestral" in str(fields.get("scheduler")):  # a diffusers class (A1111's own samplers draw NV's noise)
        notes.append(f"{fields['scheduler']} draws noise at every step, which SeedLab cannot draw from rng "
                     "cuda-philox: choose rng device on a CUDA GPU (torch's CUDA noise for every step) or a "
                     "scheduler that draws nothing while stepping")


def _short(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


__all__ = ["A1111_KEYS", "MAX_TEXT", "SAMPLERS", "number", "parameters_text", "parse_pairs", "quote",
           "read_infotext", "size"]
