"""InvokeAI before 3.0 (lstein's stable-diffusion "dream", InvokeAI 1.x and 2.x): the `Dream` command line
and the `sd-metadata` JSON, as recipe fields.

Its `dream_prompt_str` wrote the command that remakes an image, in every era one of

    "a red fox [blurry]" -s 50 -S 42 -W 512 -H 768 -C 7.5 -A k_lms      (the prompt quoted)
    a red fox [blurry] -s 50 -S 42 -W 512 -H 768 -C 7.5 -A k_lms        (later: not quoted)
    "a red fox" -s50 -S42 -W512 -H768 -C7.5 -Ak_lms                      (switches glued to their values)

and its command line also takes the long forms (--steps 50, --seed=42, --cfg_scale, --sampler). As InvokeAI's
own parser does, the prompt is what comes before the first switch; a `[negative]` part is the negative prompt.
`sd-metadata` holds {"model_weights", "image": {...}} (2.x), {"images": [{...}]} (the first RFC 266 writer)
or the web server's flat request ({"prompt", "steps", "cfg_scale", "sampler_name", ...}, numbers as text); its
prompt is text or a list of {"prompt", "weight"}.
"""

from __future__ import annotations

import shlex
from typing import Any

from .formats import _leftover, _split_brackets, check_text, json_object, odd, put_number, sampler_scheduler

# Switch -> (recipe field, kind); both spellings of each, as InvokeAI's argparse declares them.
SWITCHES = {
    "-s": ("num_inference_steps", int), "--steps": ("num_inference_steps", int),
    "-S": ("seed", int), "--seed": ("seed", int),
    "-W": ("width", int), "--width": ("width", int),
    "-H": ("height", int), "--height": ("height", int),
    "-C": ("guidance_scale", float), "--cfg_scale": ("guidance_scale", float),
    "-A": ("scheduler", str), "--sampler": ("scheduler", str), "--sampler_name": ("scheduler", str),
}
_IMAGE_KEYS = {"seed": ("seed", int), "steps": ("num_inference_steps", int), "cfg_scale": ("guidance_scale", float),
               "width": ("width", int), "height": ("height", int)}
_QUIET = {"prompt", "sampler", "sampler_name", "type", "variations", "seamless", "hires_fix", "threshold", "perlin",
          "postprocessing", "iterations", "step_number", "extra"}


def read_dream(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """The `Dream` chunk: the prompt, then dream switches; an odd value is named in a note, the rest still read."""
    check_text("Dream", text)
    prompt, switches = split_command(text.strip())
    if not prompt and not switches:
        raise ValueError("Dream: the chunk is empty")
    fields: dict[str, Any] = {}
    notes: list[str] = []
    fields["prompt"], fields["negative_prompt"] = _split_brackets(prompt)
    read_switches(switches, fields, notes)
    return "InvokeAI (dream)", fields, notes


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
        if kind is str:
            fields[field] = sampler_scheduler(value, None, notes)
        else:
            put_number(fields, notes, "InvokeAI", switch, value, field, kind)
    if rest:
        notes.append(f"InvokeAI: {' '.join(rest)[:80]} have no SeedLab equivalent and are ignored")


def read_invokeai_legacy(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """The `sd-metadata` chunk of InvokeAI 2 and of its first web server."""
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
