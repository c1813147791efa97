"""`Key: value` recipes that are not A1111's: the texts and JSON objects of web UIs built on diffusers
(Hunyuan-DiT, Stable Cascade and SD3 front ends, ppdiffusers' web UI) and of small apps.

    Prompt: a red fox                       prompt: a red fox, seed: 42, steps: 30, cfg: 7
    Negative prompt: blurry                 {"Prompt": "a red fox", "Guidance scale": 7.5, "Size": "1024x1024"}
    Seed: 42
    Guidance scale: 7.5
    Size: 1024x1024

Keys come in any order and any capitalisation, one per line or separated by commas (or `key=value`); every
spelling is matched without case, spaces, underscores or hyphens against one table (KEYS). A value that
cannot be read is named in a note and the other fields are still read. A1111's own text ("prompt",
"Negative prompt: ...", "Steps: N, Sampler: ...") stays infotext.py's: is_key_value says which is which.
"""

from __future__ import annotations

import re
from typing import Any

from .fooocus import squeeze
from .formats import check_text, odd, put_number, put_size, sampler_scheduler

# Recipe field -> the squeezed keys that front ends write it under.
KEYS = {
    "prompt": ("prompt", "positiveprompt", "positive", "textprompt"),
    "negative_prompt": ("negativeprompt", "negative", "negprompt", "negativeprompts"),
    "seed": ("seed", "randomseed", "manualseed"),
    "num_inference_steps": ("steps", "numinferencesteps", "inferencesteps", "samplingsteps", "numsteps", "step",
                            "infersteps", "stepcount"),
    "guidance_scale": ("cfg", "cfgscale", "guidancescale", "guidance", "scale", "textguidancescale"),
    "size": ("size", "resolution", "imagesize", "dimensions"),
    "width": ("width", "imagewidth", "imgw"),
    "height": ("height", "imageheight", "imgh"),
    "scheduler": ("sampler", "samplername", "scheduler", "schedulername", "samplingmethod", "samplingmode"),
    "model": ("model", "modelname", "modelid", "checkpoint", "basemodel", "pretrainedmodelnameorpath"),
}
FIELD_OF = {key: field for field, keys in KEYS.items() for key in keys}
_SETTINGS = {"seed", "num_inference_steps", "guidance_scale", "size", "width", "height"}
_LONGEST_KEY = 32  # characters before the ':' of a key: "pretrained model name or path" and a little room


def _segments(text: str) -> list[tuple[str, str]]:
    """(squeezed key, value) for each key at the start of a line or after a comma, semicolon or '|', and ("", text)
    for what comes before the first known one. A key SeedLab does not know ("?name") ends the value before it,
    except inside a prompt ("a fox, style: ink"). One pass: each character is looked at a bounded number of times."""
    starts: list[tuple[int, int, str]] = []  # (where the key starts, where its value starts, squeezed key)
    for begin in [0, *(index + 1 for index, char in enumerate(text) if char in "\n,;|")]:
        while begin < len(text) and text[begin] in " \t":
            begin += 1
        found = _key_at(text, begin)
        if found is None or (starts and begin < starts[-1][1]):
            continue
        in_prompt = not starts or FIELD_OF.get(starts[-1][2]) in ("prompt", "negative_prompt")
        if found[1] in FIELD_OF or not in_prompt:
            starts.append((begin, *found))
    pieces = [("", text[:starts[0][0]] if starts else text)]
    for index, (_begin, value_start, key) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(text)
        pieces.append((key, text[value_start:end].strip().rstrip(",;|").strip()))
    return pieces


def _key_at(text: str, begin: int) -> tuple[int, str] | None:
    """(where the value starts, the squeezed key; "?Name" for one not in KEYS) where `Name:` or `Name=` starts at
    `begin`: a name of letters, spaces, '_' and '-', at most _LONGEST_KEY characters."""
    window = text[begin:begin + _LONGEST_KEY + 1]
    colon = min((at for at in (window.find(":"), window.find("=")) if at > 0), default=-1)
    if colon < 0:
        return None
    name = window[:colon]
    if not all(char.isalpha() or char in " _-" for char in name) or not name[:1].isalpha():
        return None
    key = squeeze(name)
    return begin + colon + 1, key if key in FIELD_OF else "?" + name.strip()


def is_key_value(text: str) -> bool:
    """Whether a text is a front end's `Key: value` recipe rather than A1111's: it opens with a prompt key, or at
    least two lines open with a setting's key and no line holds A1111's comma-separated settings."""
    check_text("parameters", text)
    if (found := _key_at(text.lstrip(), 0)) is not None and FIELD_OF.get(found[1]) == "prompt":
        return True
    lines = text.replace("\r\n", "\n").split("\n")
    keyed = [FIELD_OF.get(found[1]) for line in lines if (found := _key_at(line.strip(), 0)) is not None]
    crowded = any(sum(FIELD_OF.get(key) in _SETTINGS for key, _ in _segments(line)[1:]) >= 2 for line in lines)
    return sum(field in _SETTINGS for field in keyed) >= 2 and not crowded


def read_text(text: str, source: str = "diffusers-style text") -> tuple[str, dict[str, Any], list[str]]:
    """A `Key: value` text; text before the first key is the prompt where no Prompt key says it."""
    check_text(source, text)
    pieces = _segments(text.replace("\r\n", "\n"))
    fields, notes = read_pieces(pieces, source)
    if "prompt" not in fields and pieces[0][1].strip():
        fields["prompt"] = pieces[0][1].strip()
    return source, fields, notes


def read_pairs(line: str, source: str) -> tuple[dict[str, Any], list[str]]:
    """One line of `Key: value, Key: value` (Draw Things' settings line)."""
    return read_pieces(_segments(line), source)


def read_pieces(pieces: list[tuple[str, str]], source: str) -> tuple[dict[str, Any], list[str]]:
    """The known keys into fields; the unknown ones named in one note."""
    fields, notes = _map([(key, value) for key, value in pieces[1:] if key in FIELD_OF], source)
    rest = [key[1:] for key, value in pieces[1:] if key not in FIELD_OF and value]
    if rest:
        more = f" and {len(rest) - 12} more" if len(rest) > 12 else ""
        notes.append(f"{source}: {', '.join(key[:40] for key in rest[:12])}{more} have no SeedLab equivalent and are "
                     "ignored")
    return fields, notes


def recognised(data: dict[str, Any]) -> bool:
    """Whether a JSON object states a prompt and at least one setting under keys of KEYS."""
    fields = {FIELD_OF.get(squeeze(key)) for key in data}
    prompt = any(FIELD_OF.get(squeeze(key)) == "prompt" and isinstance(value, str) for key, value in data.items())
    return prompt and bool(fields & _SETTINGS)


def read_object(data: dict[str, Any], source: str = "parameters") -> tuple[str, dict[str, Any], list[str]]:
    """A JSON object (or a file's text chunks) with such keys; other keys named in a note."""
    name = "diffusers-style JSON"
    pairs = [(squeeze(key), value) for key, value in data.items() if squeeze(key) in FIELD_OF]
    fields, notes = _map(pairs, name)
    rest = [str(key)[:40] for key, value in data.items()
            if squeeze(key) not in FIELD_OF and value not in (None, "", [], {}, False)]
    if rest:
        notes.append(f"{source}: {', '.join(rest[:12])}{f' and {len(rest) - 12} more' if len(rest) > 12 else ''} "
                     "have no SeedLab equivalent and are ignored")
    return name, fields, notes


def _map(pairs: list[tuple[str, Any]], source: str) -> tuple[dict[str, Any], list[str]]:
    """Each (squeezed key, value) into its field; the first of a field wins; odd values noted, not fatal."""
    fields: dict[str, Any] = {}
    notes: list[str] = []
    seen: set[str] = set()
    for key, value in pairs:
        field = FIELD_OF[key]
        if field in seen or value in (None, ""):
            continue
        seen.add(field)
        if field in ("seed", "num_inference_steps", "width", "height"):
            put_number(fields, notes, source, key, value, field, int)
        elif field == "guidance_scale":
            put_number(fields, notes, source, key, value, field, float)
        elif field == "size":
            put_size(fields, notes, source, key, value)
        elif not isinstance(value, str):
            odd(notes, source, key, value, "not text")
        elif field == "scheduler":
            fields[field] = front_end_scheduler(value, notes)
        else:
            fields[field] = value
    return fields, notes


# Diffusers front ends' sampler names -> diffusers classes: DenOfEquity's webUI extensions (Hunyuan-DiT, Stable
# Cascade, SD3, PixArt, Kolors, Sana, Lumina2: scripts/*_diffusers.py), Tencent's hydit_app (ddpm, ddim, dpmms)
# and ppdiffusers' web UI (its scheduler labels: DPMSolver, EulerDiscrete, ...).
FRONT_END_SCHEDULERS = {
    "ddpm": "DDPMScheduler", "deis": "DEISMultistepScheduler", "dpm++2m": "DPMSolverMultistepScheduler",
    "dpm++2msde": "DPMSolverMultistepScheduler", "dpm": "DPMSolverSinglestepScheduler",
    "dpmsde": "DPMSolverSDEScheduler", "euler": "EulerDiscreteScheduler", "eulera": "EulerAncestralDiscreteScheduler",
    "sasolver": "SASolverScheduler", "unipc": "UniPCMultistepScheduler", "lcm": "LCMScheduler", "ddim": "DDIMScheduler",
    "dpmms": "DPMSolverMultistepScheduler",
    "dpmsolver": "DPMSolverMultistepScheduler", "eulerdiscrete": "EulerDiscreteScheduler", "pndm": "PNDMScheduler",
    "eulerancestraldiscrete": "EulerAncestralDiscreteScheduler", "lmsdiscrete": "LMSDiscreteScheduler",
    "default": "default",
}


def front_end_scheduler(value: str, notes: list[str]) -> str:
    """A front end's sampler label ("DPM++ 2M : Karras", "SA-solver", "DPMSolver", "dpmms", a diffusers class) as
    a diffusers class; the Karras sigmas a label asks for are named in a note."""
    name, _, schedule = value.partition(" : ")
    name = name.split("/")[0].strip()  # Stable Cascade: "prior/decoder"
    words = name.split()
    if words and words[-1] == "Karras" and squeeze(" ".join(words[:-1])) in FRONT_END_SCHEDULERS:
        name, schedule = " ".join(words[:-1]), "Karras"
    found = FRONT_END_SCHEDULERS.get(squeeze(name))
    if found is None and name.endswith("Scheduler") and name.isascii() and name.isalnum():
        found = name
    if found is None:
        return sampler_scheduler(name, schedule or None, notes)
    if schedule.strip():
        notes.append(f"Schedule {schedule.strip()[:40]} is not applied: {found} runs with its default sigmas")
    return found


_SETTING_KEY = re.compile(r"(?:^|, )([A-Za-z][A-Za-z0-9 ()./_-]{0,40}): ")
_FIRST_SETTING = re.compile(r"(?:Size|Seed|Steps|Model|Scheduler|Sampler|CFG)[^:,\n]{0,30}: ")
_SETTINGS_LINE = re.compile(r"(?:^|, |: )(?:Size: [0-9]|Seed: [0-9])")
_MODEL_TAIL = re.compile(r", Model \(([^()\n]{1,40})\): ")


def is_webui_text(text: str) -> bool:
    """DenOfEquity's diffusers webUI extensions' text: "Model: X\\nPrompt: ..." (their first releases), or A1111's
    layout ending ", Model (Hunyuan): ..." or with their own keys (CFG: 5 (0.66) [1], Steps(Prior/Decoder))."""
    head = text.lstrip()[:300]
    if head.startswith("Model: ") and "\nPrompt: " in head:
        return True
    last = text.rstrip().rsplit("\n", 1)[-1]
    return bool(_MODEL_TAIL.search(last)) or "Steps(Prior" in last or (", CFG: " in last or last.startswith("CFG: "))


def read_webui_text(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """Their prompt, negative prompt and `Key: value, ...` settings line (see is_webui_text)."""
    check_text("parameters", text)
    text = text.replace("\r\n", "\n").strip()
    lines = text.split("\n")
    settings_at = max((index for index, line in enumerate(lines) if _SETTINGS_LINE.search(line)),
                      default=len(lines) - 1)
    body, settings = "\n".join(lines[:settings_at]), "\n".join(lines[settings_at:]).removeprefix("Parameters: ")
    if not _FIRST_SETTING.match(settings) and (glued := re.search(r"Size: [0-9]+x[0-9]+, ", settings)):
        body = f"{body}\n{settings[:glued.start()]}".lstrip("\n")  # Stable Cascade's "...blurrySize: 1024x1024"
        settings = settings[glued.start():]
    model = None
    if body.startswith("Model: ") and "\nPrompt: " in body:  # Model: X / Prompt: ... / Negative: ...
        model, _, body = body[len("Model: "):].partition("\nPrompt: ")
        prompt, _, negative = body.partition("\nNegative: ")
    else:
        prompt, _, negative = ("\n" + body).partition("\nNegative prompt: ")
    fields: dict[str, Any] = {"prompt": _one_prompt(prompt), "negative_prompt": _one_prompt(negative)}
    notes: list[str] = []
    settings_line, _, after = settings.partition("\n")
    keys = list(_SETTING_KEY.finditer(settings_line))
    rest = []
    for index, found in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(settings_line)
        key, value = found.group(1), settings_line[found.end():end].strip()
        if not _webui_setting(key, value, fields, notes):
            rest.append(key)
    if model and "model" not in fields:
        fields["model"] = model.strip()
    rest += [after.split(":")[0][:30]] if after.strip() else []  # SD3's "Initial noise: [...]" line
    if rest:
        notes.append(f"diffusers web UI: {', '.join(rest)[:300]} have no SeedLab equivalent and are ignored")
    return "diffusers web UI", fields, notes


def _one_prompt(text: str) -> str:
    """SD3's three prompts ("a | \\na | \\na") as one where they are the same; otherwise the text as written."""
    parts = [part.strip() for part in text.split(" | \n")]
    return parts[0] if len(parts) > 1 and len(set(parts)) == 1 else text.strip()


def _webui_setting(key: str, value: str, fields: dict[str, Any], notes: list[str]) -> bool:
    """One `Key: value` of their settings line into fields; False for a key SeedLab has no use for."""
    source = "diffusers web UI"
    if key == "Size":
        put_size(fields, notes, source, key, value)
    elif key == "Seed":
        put_number(fields, notes, source, key, value, "seed", int)
    elif key in ("Steps", "Steps(Prior/Decoder)", "Steps(Prior)", "DMDstep"):
        prior, _, decoder = value.partition("/")  # Stable Cascade: the prior's steps (stage C) make the image
        put_number(fields, notes, source, key, prior, "num_inference_steps", int)
        if decoder or key == "Steps(Prior)":
            notes.append("Stable Cascade: the prior's steps are restored; the decoder's are not a SeedLab setting")
    elif key in ("CFG", "CFG scale"):  # "5 (0.66) [1]": the scale, its rescale and its cutoff
        put_number(fields, notes, source, key, value.split(" ")[0], "guidance_scale", float)
        if value.split(" ")[1:]:
            notes.append(f"{key} {value[:40]}: only the guidance scale is restored (rescale and cutoff are not)")
    elif key in ("Scheduler", "Sampler", "Scheduler(Prior/Decoder)"):
        fields["scheduler"] = front_end_scheduler(value, notes)
    elif key == "Model" or key.startswith("Model ("):  # "Model (Hunyuan): the checkpoint"
        fields["model"] = value
    else:
        return False
    return True
