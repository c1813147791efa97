"""InvokeAI before 3.0 (lstein's stable-diffusion "dream", InvokeAI 1.x and 2.x): the `Dream` command line
and the `sd-metadata` JSON, as recipe fields.

Its `dream_prompt_str` wrote the command that remakes an image, in every era one of

    "a red fox [blurry]" -s 50 -S 42 -W 512 -H 768 -C 7.5 -A k_lms      (the prompt quoted)
    a red fox [blurry] -s 50 -S 42 -W 512 -H 768 -C 7.5 -A k_lms        (later: not quoted)
    "a red fox" -s50 -S42 -W512 -H768 -C7.5 -Ak_lms                      (switches glued to their values)

and its command line also takes the long forms (--steps 50, --seed=42, --cfg_scale, --sampler). As InvokeAI's
own parser does, the prompt is what comes before the first switch; a `[negative]` part is the negative prompt.
A line may carry its init image inline (`-I data:image/png;base64,...`, hundreds of KB): such arguments are dropped
before the length cap. A line that starts with `!` is one of its CLI's commands: `!fix PATH switches` (a
postprocessed copy: the switches are the source's, the path stands where the prompt goes), `!mask PATH -tm ...`
(a mask: no recipe); `!dream` is a plain generation.
`sd-metadata` holds {"model_weights", "image": {...}} (2.x), {"images": [{...}]} (the first RFC 266 writer)
or the web server's flat request ({"prompt", "steps", "cfg_scale", "sampler_name", ...}, numbers as text); its
prompt is text or a list of {"prompt", "weight"}.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from .formats import _leftover, _split_brackets, check_text, json_object, odd, put_number, sampler_scheduler

MAX_DREAM = 2_000_000  # characters of a Dream chunk read at all; inline init images are dropped, then MAX_TEXT holds

# Switch -> (recipe field, kind); both spellings of each, as InvokeAI's argparse declares them.
SWITCHES = {
    "-s": ("num_inference_steps", int), "--steps": ("num_inference_steps", int),
    "-S": ("seed", int), "--seed": ("seed", int),
    "-W": ("width", int), "--width": ("width", int),
    "-H": ("height", int), "--height": ("height", int),
    "-C": ("guidance_scale", float), "--cfg_scale": ("guidance_scale", float),
    "-A": ("scheduler", str), "--sampler": ("scheduler", str), "--sampler_name": ("scheduler", str),
    "--new_prompt": ("new_prompt", str),  # !fix: the prompt its postprocessing ran with
}
_DATA_URL = re.compile(r"data:[\w.+-]{1,40}/[\w.+-]{1,60}(?:;[\w.+=-]{1,40}){0,4},")
_ARGUMENT = re.compile(r"[^\s\"']*")
_IMAGE_KEYS = {"seed": ("seed", int), "steps": ("num_inference_steps", int), "cfg_scale": ("guidance_scale", float),
               "width": ("width", int), "height": ("height", int)}
_QUIET = {"prompt", "sampler", "sampler_name", "type", "variations", "seamless", "hires_fix", "threshold", "perlin",
          "postprocessing", "iterations", "step_number", "extra"}


def read_dream(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """The `Dream` chunk: the prompt, then dream switches; an odd value is named in a note, the rest still read."""
    notes: list[str] = []
    command, prompt, switches = dream_parts(text, notes)
    if not prompt and not switches:
        raise ValueError("Dream: the chunk is empty")
    fields: dict[str, Any] = {}
    if command != "!fix":
        fields["prompt"], fields["negative_prompt"] = _split_brackets(prompt)
    read_switches(switches, fields, notes)
    new_prompt = fields.pop("new_prompt", None)
    if command == "!fix":
        notes.append(f"InvokeAI: the image is {prompt[:80]} postprocessed (!fix): the settings are that image's, "
                     "and the line states no prompt" + (" but the one postprocessing ran with" if new_prompt else ""))
        if new_prompt:
            fields["prompt"], fields["negative_prompt"] = _split_brackets(new_prompt)
    return "InvokeAI (dream)", fields, notes


def dream_parts(text: str, notes: list[str]) -> tuple[str, str, str]:
    """(command, prompt, switches) of a Dream line: command "" for a generation, "!fix" for a postprocessed image;
    ValueError for a line that states no recipe (another command; no switch and no quoted prompt)."""
    check_text("Dream", text, MAX_DREAM)
    text = _without_data_urls(text, notes).strip()
    check_text("Dream", text)
    command = ""
    if text.startswith("!"):
        command = text.split(maxsplit=1)[0]
        text = text[len(command):].strip()
        if command not in ("!fix", "!dream"):
            what = "saved a mask of another image" if command == "!mask" else "is not a generation"
            raise ValueError(f"Dream holds InvokeAI's {command[:20]} command, which {what}: it states no recipe")
    prompt, switches = split_command(text)
    if text and not text.startswith('"') and not switches.strip():
        raise ValueError(f"Dream {text[:40]!r} has no switches (-s, -S, -W, ...) and no quoted prompt: it is not a "
                         "command InvokeAI wrote for an image")
    return ("" if command == "!dream" else command), prompt, switches


def _without_data_urls(text: str, notes: list[str]) -> str:
    """The line without its inline images (-I data:image/png;base64,...): one scan, each one named in a note."""
    pieces, position, dropped = [], 0, 0
    while (start := text.find("data:", position)) >= 0:
        starts_argument = start == 0 or text[start - 1] in " \t\n\"'=" or text[start - 2:start] == "-I"
        if not starts_argument or _DATA_URL.match(text, start) is None:
            pieces.append(text[position:start + 5])
            position = start + 5
            continue
        end = _ARGUMENT.match(text, start).end()
        pieces.append(text[position:start])
        dropped, position = dropped + 1, end
    if not dropped:
        return text
    notes.append(f"InvokeAI: the line carries {dropped} image(s) inline (data: URLs), which are not read; the image "
                 "was made from another image")
    return "".join(pieces) + text[position:]


def split_command(text: str) -> tuple[str, str]:
    """(prompt, switches): a quoted prompt up to its closing quote, else everything before the first
    whitespace followed by '-' and a letter (or '--' and a letter), as InvokeAI's parse_cmd splits it."""
    if text.startswith('"'):
        position = 1
        while position < len(text) and text[position] != '"':
            position += 2 if text[position] == "\\" else 1
        if position < len(text):
            return text[1:position].replace('\\"', '"'), text[position + 1:]
    position = 0
    while (dash := text.find("-", position)) >= 0:
        following = text[dash + 1:dash + 3]
        if (dash == 0 or text[dash - 1].isspace()) and (following[:1].isalpha()
                                                        or (following[:1] == "-" and following[1:].isalpha())):
            return text[:dash].strip(), text[dash:]
        position = dash + 1
    return text, ""


def read_switches(text: str, fields: dict[str, Any], notes: list[str]) -> None:
    """-s 50, -s50, --steps 50 and --steps=50 into fields; what SeedLab does not read named in one note."""
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote in an init image's path: words as written
        words = text.split()
    rest, index = [], 0
    while index < len(words):
        word, index = words[index], index + 1
        switch, _, glued = word.partition("=") if word.startswith("--") else (word[:2], "", word[2:])
        if switch not in SWITCHES:
            rest.append(word)
            continue
        value = glued
        if not value and index < len(words):
            value, index = words[index], index + 1
        field, kind = SWITCHES[switch]
        if field == "new_prompt":
            fields[field] = value
        elif kind is str:
            fields[field] = sampler_scheduler(value, None, notes)
        else:
            put_number(fields, notes, "InvokeAI", switch, value, field, kind)
    if rest:
        notes.append(f"InvokeAI: {' '.join(rest)[:80]} have no SeedLab equivalent and are ignored")


def read_invokeai_legacy(text: str, dream: str | None = None) -> tuple[str, dict[str, Any], list[str]]:
    """The `sd-metadata` chunk of InvokeAI 2 and of its first web server; the prompt from the `Dream` line beside it
    where that says it better (_prompt_from_dream)."""
    data = json_object(text, "sd-metadata")
    images = data.get("images")
    if isinstance(data.get("image"), dict):
        image = data["image"]
    elif isinstance(images, list) and images and isinstance(images[0], dict):
        image = images[0]
    else:
        image = data  # the web server's request, flat
    fields: dict[str, Any] = {}
    notes: list[str] = []
    prompt = _prompt(image.get("prompt"), notes)
    if dream is not None:
        prompt = _prompt_from_dream(dream, prompt, image.get("prompt"), notes)
    if prompt is not None:
        fields["prompt"], fields["negative_prompt"] = _split_brackets(prompt)
    for key, (field, kind) in _IMAGE_KEYS.items():
        if image.get(key) not in (None, ""):
            put_number(fields, notes, "InvokeAI", key, image[key], field, kind)
    sampler = image.get("sampler", image.get("sampler_name"))
    if isinstance(sampler, str) and sampler:
        fields["scheduler"] = sampler_scheduler(sampler, None, notes)
    model = data.get("model_weights") or (data.get("model_id") if image is not data else None)
    if isinstance(model, str) and model:
        fields["model"] = model
    if image.get("type") == "img2img" or image.get("init_img"):
        notes.append("InvokeAI made the image from another image (img2img): only the settings are restored")
    _leftover("InvokeAI", image, set(_IMAGE_KEYS) | _QUIET | {"model_weights", "model_id", "model", "model_hash",
                                                               "app_id", "app_version", "images", "image"}, notes)
    return "InvokeAI 2", fields, notes


def _prompt(value: Any, notes: list[str]) -> str | None:
    """Text, or InvokeAI's weighted subprompts [{"prompt", "weight"}] written back as it reads them ("a:1,b:0.5")."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        if value is not None:
            odd(notes, "InvokeAI", "prompt", value, "not text")
        return None
    parts = [item for item in value if isinstance(item, dict) and isinstance(item.get("prompt"), str)]
    if len(parts) == 1:
        return parts[0]["prompt"]
    if not parts:
        odd(notes, "InvokeAI", "prompt", value, "no prompt in it")
        return None
    notes.append(f"InvokeAI: the prompt has {len(parts)} weighted parts, joined as InvokeAI writes them "
                 "(text:weight, ...); SeedLab reads them as plain text")
    return ",".join(f"{part['prompt']}:{part.get('weight', 1)}" for part in parts)


def _prompt_from_dream(dream: str, prompt: str | None, stored: Any, notes: list[str]) -> str | None:
    """The prompt as typed where the Dream line states one: its weighted parts (`a:0.25 b:0.75`) are stored normalised
    in sd-metadata, and a !fix line's sd-metadata holds the source image's path as its prompt."""
    try:
        command, typed, switches = dream_parts(dream, [])
    except ValueError:  # no recipe in the line, or too long: sd-metadata's prompt stands
        return prompt
    if command == "!fix":
        switched: dict[str, Any] = {}
        read_switches(switches, switched, [])
        if not switched.get("new_prompt"):
            notes.append(f"InvokeAI: the image is {typed[:80]} postprocessed (!fix): sd-metadata's prompt is that "
                         "path, not a prompt, and none is stated")
        return switched.get("new_prompt") or None
    several = isinstance(stored, list) and len(stored) > 1
    if typed and (dream.lstrip().startswith('"') or several):
        if several:
            notes[:] = [note for note in notes if "weighted parts" not in note]
            notes.append(f"InvokeAI: the prompt has {len(stored)} weighted parts, taken as the Dream line writes them "
                         "(sd-metadata holds the weights normalised); SeedLab reads them as plain text")
        return typed
    return prompt
