"""A1111's sampler, schedule and hires-fix keys read as recipe fields, as A1111 1.10 reads them.

    Steps: 20, Sampler: DPM++ 2M, Schedule type: Karras, ..., Denoising strength: 0.7,
    Hires upscale: 2, Hires steps: 10, Hires upscaler: Latent (bicubic antialiased)

- The sampler: in text that A1111, Forge or Civitai wrote (not SD.Next, which runs diffusers' schedulers,
  nor a ComfyUI saver), one of A1111's k-diffusion samplers becomes the recipe's `scheduler` as A1111 names it,
  run as A1111 runs it (engine/samplers/a1111.py); a name with the schedule inside ("DPM++ 2M Karras",
  before 1.9) is split as 1.10 splits it, the name's schedule winning over "Schedule type". A1111's own
  samplers (DDIM, DDIM CFG++, PLMS, UniPC, LCM) become "DDIM (A1111)" and so on, run as A1111 runs them
  (engine/samplers/timesteps.py); its timestep samplers ignore Schedule type, as A1111 does; with them hires fix
  is not run (a note says so).
- Hires fix: the latent upscalers run; "Hires resize" becomes a scale when it keeps the aspect ratio;
  an upscaler with its own network (ESRGAN, ...) is named in a note and the nearest runnable one,
  "Latent", is used. "Denoising strength" without any hires key is img2img, which SeedLab does not run.
"""

from __future__ import annotations

from typing import Any

from ..engine.recipe import LATENT_UPSCALERS, MAX_HIRES_SCALE
from ..engine.samplers.names import (
    A1111_OWN_SAMPLERS,
    A1111_SAMPLERS,
    COMFY_SCHEDULES,
    a1111_spelling,
    is_comfy_sampler,
    is_own,
    is_sdcpp,
    sampler_label,
    schedule_label,
)
from .sdcpp import is_sdcpp_text
from .sdcpp import read_sampler as read_sdcpp_sampler
from .tool_samplers import SAMPLERS

HIRES_KEYS = ("Hires upscale", "Hires resize", "Hires steps", "Hires upscaler", "Hires sampler", "Hires schedule type",
              "Hires prompt", "Hires negative prompt", "Hires CFG Scale", "Hires checkpoint", "Hires Module 1")
# Keys read here (the caller skips them); values are read by their recipe fields' kinds elsewhere.
READ_HERE = {"Sampler", "Schedule type", "Denoising strength", *HIRES_KEYS, "Discard penultimate sigma",
             "SGM noise multiplier", "Beta schedule alpha", "Beta schedule beta"}


def read_sampling(by_key: dict[str, Any], fields: dict[str, Any], notes: list[str]) -> bool:
    """Fill the sampler, schedule and hires fields from A1111 pairs. False when the sampler is not an A1111 one."""
    name = str(by_key.get("Sampler", "")).strip()
    written = str(by_key.get("Schedule type", "")).strip()
    if is_sdcpp_text(by_key):  # stable-diffusion.cpp's "euler_a karras" (files/sdcpp.py)
        return read_sdcpp_sampler(name, fields, notes)
    if (is_comfy_sampler(name) and any(key in by_key for key in ("SeedLab", "Dtype", "Full determinism"))) \
            or is_sdcpp(name):  # SeedLab's own text, naming one of ComfyUI's or sd.cpp's samplers it runs
        fields["scheduler"] = name
        fields["schedule"] = written or "Automatic"
        return True
    sd_next = str(by_key.get("App", "")).startswith("SD.Next")  # SD.Next runs diffusers' schedulers
    comfy = None if sd_next or name in SAMPLERS else _comfy_named(name, written)  # "DDIM": A1111's, a diffusers class
    if comfy is not None:  # ComfyUI's names, as its savers and the tools built on it (Stability Matrix) write them
        fields["scheduler"], fields["schedule"] = comfy
        _hires(by_key, fields, notes)
        return True
    found = sampler_label(name)
    if found is None or sd_next or str(by_key.get("Version", "")).startswith("ComfyUI"):
        return False  # SD.Next runs diffusers' schedulers; ComfyUI's savers name ComfyUI's samplers A1111's way
    fields["scheduler"], named_schedule = found
    written = by_key.get("Schedule type")
    if a1111_spelling(fields["scheduler"]) != name or written is None:  # "DPM++ 2M Karras": the name's
        fields["schedule"] = named_schedule
    else:
        fields["schedule"] = _schedule(str(written), "Schedule type", notes) or "Automatic"
    if A1111_OWN_SAMPLERS.get(fields["scheduler"], A1111_SAMPLERS.get(fields["scheduler"])).timesteps:
        fields["schedule"] = "Automatic"  # A1111's timestep samplers walk their own timesteps, whatever is written
    _options(by_key, fields["scheduler"], notes)
    if not _own_hires(by_key, notes):
        _hires(by_key, fields, notes)
    return True


def _own_hires(by_key: dict[str, Any], notes: list[str]) -> bool:
    """Hires fix with one of A1111's own samplers in either pass, which SeedLab does not run: named in a note."""
    names = [str(by_key.get(key, "")).strip() for key in ("Sampler", "Hires sampler")]
    own = [name for name in names if sampler_label(name) and is_own(sampler_label(name)[0])]
    if not own or not any(key in by_key for key in HIRES_KEYS):
        return False
    notes.append(f"hires fix with A1111's {_short(own[0])} is not run here: only the first pass is made, so the image "
                 "differs")
    return True


def _comfy_named(name: str, written: str) -> tuple[str, str] | None:
    """(sampler, scheduler) of ComfyUI that a name (not one of A1111's labels) and Schedule type spell: "euler",
    "euler_ancestral" + "karras", "euler_ancestral_karras", "Euler Ancestral Karras"; None for any other name."""
    if sampler_label(name) is not None:  # "Euler", "Heun", "LMS": A1111's own, run as A1111 runs them
        return None
    lower, schedule = name.lower().replace(" ", "_"), written.lower().replace(" ", "_")
    for suffix in () if schedule else COMFY_SCHEDULES:
        if lower.endswith("_" + suffix) and is_comfy_sampler(lower.removesuffix("_" + suffix)):
            return lower.removesuffix("_" + suffix), suffix
    if is_comfy_sampler(lower) and schedule in ("", *COMFY_SCHEDULES):
        return lower, schedule or "normal"
    return None


def _schedule(text: str, key: str, notes: list[str]) -> str | None:
    label = schedule_label(text)
    if label is None:
        notes.append(f"{key} {_short(text)} is not one of A1111's schedule types: the sampler's own (Automatic) is "
                     "used, so the image differs")
    return label


def _options(by_key: dict[str, Any], sampler: str, notes: list[str]) -> None:
    """A1111 settings with no recipe field: noted where they change the image."""
    if str(by_key.get("Discard penultimate sigma", "")).lower() == "true" \
            and not A1111_OWN_SAMPLERS.get(sampler, A1111_SAMPLERS.get(sampler)).discard_penultimate:
        notes.append("Discard penultimate sigma (an A1111 setting) is not applied: the image differs")
    if str(by_key.get("SGM noise multiplier", "")).lower() == "true":
        notes.append("SGM noise multiplier (an A1111 setting) is not applied: the image differs")
    for key in ("Beta schedule alpha", "Beta schedule beta"):
        if key in by_key and str(by_key[key]).strip() not in ("0.6", "0.60"):
            notes.append(f"{key} {_short(by_key[key])} is not applied: SeedLab's Beta schedule uses 0.6")


def _hires(by_key: dict[str, Any], fields: dict[str, Any], notes: list[str]) -> None:
    hires = [key for key in HIRES_KEYS if key in by_key]
    if not hires:
        if "Denoising strength" in by_key:
            notes.append(f"Denoising strength {_short(by_key['Denoising strength'])} without hires fix is img2img, "
                         "which SeedLab does not run: the image is made from noise (txt2img)")
        return
    fields["hires_scale"] = _scale(by_key, fields, notes)
    if "Denoising strength" in by_key:
        fields["denoising_strength"] = _number(by_key["Denoising strength"])
    if "Hires steps" in by_key:
        fields["hires_steps"] = _number(by_key["Hires steps"], int)
    upscaler = str(by_key.get("Hires upscaler", "Latent")).strip()
    if upscaler not in LATENT_UPSCALERS:
        notes.append(f"Hires upscaler {_short(upscaler)} upscales with its own network or image resizing, which "
                     "SeedLab does not run: the nearest runnable, Latent, is used, so the image differs")
        upscaler = "Latent"
    fields["hires_upscaler"] = upscaler
    if "Hires sampler" in by_key:
        fields["hires_sampler"] = str(by_key["Hires sampler"]).strip()
    if "Hires schedule type" in by_key:
        fields["hires_schedule"] = _schedule(str(by_key["Hires schedule type"]), "Hires schedule type", notes) or ""
    prompt_keys = (("Hires prompt", "prompt"), ("Hires negative prompt", "negative_prompt"))
    for key, field in prompt_keys:
        if str(by_key.get(key, "")).strip() not in ("", str(fields.get(field, "")).strip()):
            notes.append(f"{key} {_short(by_key[key])} is not supported: "
                         f"the second pass uses the {field.replace('_', ' ')}")
    same = {"Hires CFG Scale": str(by_key.get("CFG scale", "")).strip(), "Hires checkpoint": "Use same checkpoint",
            "Hires Module 1": "Use same choices"}
    for key, value in same.items():
        if key in by_key and str(by_key[key]).strip() not in (value, _float_text(value)):
            notes.append(f"{key} {_short(by_key[key])} is not supported: the second pass uses the first pass's")


def _scale(by_key: dict[str, Any], fields: dict[str, Any], notes: list[str]) -> Any:
    """Hires upscale as written, or the scale a proportional Hires resize stands for."""
    if "Hires upscale" in by_key:
        return _number(by_key["Hires upscale"])
    if "Hires resize" not in by_key:
        return 0.0
    resize = str(by_key.get("Hires resize", "")).strip()
    width, height = fields.get("width"), fields.get("height")
    parts = resize.split("x")
    if len(parts) == 2 and all(part.isascii() and part.isdigit() and len(part) <= 5 for part in parts) \
            and isinstance(width, int) and isinstance(height, int) and width and height:
        to_width, to_height = int(parts[0]), int(parts[1])
        if to_width * height == to_height * width and 1 <= to_width / width <= MAX_HIRES_SCALE:
            return to_width / width
    notes.append(f"Hires resize {_short(resize)} changes the aspect ratio (A1111 crops), which SeedLab does not "
                 "run: hires fix is off, only the first pass is made")
    return 0.0


def _number(value: Any, kind: type = float) -> Any:
    """A number as written; text that is not one is kept for the recipe to refuse, naming the field."""
    text = str(value).strip()
    try:
        return kind(text) if len(text) <= 40 else text
    except ValueError:
        return text


def _float_text(text: str) -> str:
    """"6" as "6.0" and back: Forge writes Hires CFG Scale as a float where CFG scale is whole."""
    return text[:-2] if text.endswith(".0") else text + ".0" if text.isdigit() else text


def _short(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
