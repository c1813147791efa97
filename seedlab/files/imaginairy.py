"""imaginAIry (brycedrennan/imaginAIry): the recipe it leaves in an image's EXIF, as recipe fields.

Its ImagineResult._exif writes IFD0 tags, as plain ASCII (the UserComment without a charset header), into a JPEG
or a PNG (the eXIf chunk):

    UserComment (0x9286)       {"prompt": <the prompt's fields>} as JSON
    ImageDescription (0x010E)  the prompt's summary (ImaginePrompt.prompt_description)
    Software (0x0131)          "Imaginairy / Stable Diffusion <model>"

The JSON has two layouts. 2022 to mid 2023 (ImaginePrompt.as_dict):
    {"software": "imaginairy", "model": "SD-1.5", "prompts": [[1, "a fox"]], "negative_prompt": [[1, ""]],
     "prompt_strength": 7.5, "seed": 42, "steps": 40, "height": 512, "width": 512, "sampler_type": "k_dpmpp_2m", ...}
(from January 2023 to May 2023 without the seed, which only the summary then states). Late 2023 on, the pydantic
model's dump:
    {"prompt": [{"text": "a fox", "weight": 1}], "negative_prompt": [{"text": ..., "weight": 1}],
     "prompt_strength": 7.5, "solver_type": "ddim", "seed": 42, "steps": 50, "size": [1024, 576],
     "model_weights": {"name": "Stable Diffusion 1.5", ...}, ...}
The summary fills, key by key, what the JSON leaves out; it reads, over the years,
    ?  : "a fox" 512x512px seed:42 prompt-strength:7.5 steps:40 sampler-type:PLMS
    "a fox" 512x512px negative-prompt:"" seed:42 prompt-strength:9.0 steps:30 sampler-type:k_dpmpp_2m model:...
    "<ESC>[32ma fox<ESC>[0m"\n    negative-prompt:DEFAULT-NEGATIVE-PROMPT\n    size:1024x576px-(16:9) seed:42 ...
"""

from __future__ import annotations

import re
from typing import Any

from ..engine.samplers.names import sampler_label
from .formats import _leftover, check_text, json_object, odd, put_number, put_size, sampler_scheduler

CHUNK = "imaginairy"  # the UserComment's "prompt" object, once told apart from a ComfyUI graph
DESCRIPTION = "ImageDescription"
NAME = "imaginAIry"
_MARKS = ("prompts", "prompt_strength", "sampler_type", "solver_type")  # keys no ComfyUI graph has
_ANSI = re.compile(r"\x1b\[[0-9;]{0,20}[A-Za-z]")  # termcolor's colours in the late summaries
_SETTING = re.compile(r"(?<![\w-])(seed|steps|prompt-strength|sampler-type|solver-type):(\S{1,60})")
_SIZE = re.compile(r"(?<![\w-])(?:size:)?([0-9]{1,6})x([0-9]{1,6})px")
_PROMPT_END = re.compile(r"\"(?:\s+(?:size:)?[0-9]{1,6}x[0-9]{1,6}px|\s*\n|\s+negative-prompt:)")
# k-diffusion's samplers as imaginAIry names them (samplers/base.py SamplerName); A1111 spells DPM adaptive k_dpm_ad.
_K_SPELLINGS = {"k_dpm_adaptive": "k_dpm_ad"}
_DPM_SOLVER = ("dpmpp", "dpm++", "dpmsolver")  # config.SOLVER_CONFIGS' aliases of DPM-Solver++ (late 2023 on)
_QUIET = {"software", "model", "model_weights", "model_architecture", "model_config_path", "prompts", "prompt",
          "negative_prompt", "prompt_strength", "seed", "steps", "size", "width", "height", "sampler_type",
          "solver_type", "init_image", "init_image_strength", "mask_mode", "mask_modify_original",
          "allow_compose_phase", "fix_faces_fidelity", "composition_strength", "image_prompt_strength",
          "inpaint_method", "is_intermediate", "collect_progress_latents", "caption_text", "mask_image"}


def is_software(software: str) -> bool:
    """EXIF Software as imaginAIry writes it: "Imaginairy / Stable Diffusion <model>"."""
    return software.lower().startswith("imaginairy")


def is_imaginairy(value: Any, software: str = "") -> bool:
    """Whether a UserComment's "prompt" object is imaginAIry's recipe (by its keys or the file's Software)."""
    if not isinstance(value, dict) or any(isinstance(node, dict) and "class_type" in node for node in value.values()):
        return False
    return (str(value.get("software", "")).lower() == "imaginairy" or any(key in value for key in _MARKS)
            or is_software(software))


def read_imaginairy(chunks: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    """The UserComment's JSON, and the summary for what it leaves out; an odd value is named in a note."""
    data = json_object(chunks[CHUNK], "UserComment") if CHUNK in chunks else {}
    summary = read_summary(chunks.get(DESCRIPTION, ""))
    if not data and not summary:
        raise ValueError("imaginAIry: the file names imaginAIry as its software but holds no recipe")
    fields: dict[str, Any] = {}
    notes: list[str] = []
    prompt = _prompts(data.get("prompts", data.get("prompt")), "prompt", notes)
    fields["prompt"] = prompt if prompt is not None else summary.get("prompt", "")
    negative = _prompts(data.get("negative_prompt"), "negative prompt", notes)
    if negative is not None:
        fields["negative_prompt"] = negative
    _settings(data, summary, fields, notes)
    model = data.get("model_weights", data.get("model"))
    model = model.get("name") if isinstance(model, dict) else model
    if isinstance(model, str) and model:
        fields["model"] = model
    init = data.get("init_image")
    if init not in (None, "", "None"):
        notes.append(f"{NAME} made the image from another image ({str(init)[:60]}, strength "
                     f"{str(data.get('init_image_strength'))[:10]}): only the settings are restored")
    rest = {key: value for key, value in data.items() if value != "None"}
    _leftover(NAME, rest, _QUIET, notes)
    return NAME, fields, notes


def _settings(data: dict[str, Any], summary: dict[str, str], fields: dict[str, Any], notes: list[str]) -> None:
    """Seed, steps, CFG (prompt_strength), size and sampler: the JSON's where it states them, else the summary's."""
    for key, name, field, kind in (("seed", "seed", "seed", int), ("steps", "steps", "num_inference_steps", int),
                                   ("prompt_strength", "prompt-strength", "guidance_scale", float)):
        value = data.get(key)
        if value is None and summary.get(name, "None") != "None":
            value = summary[name]
        if value is not None:
            put_number(fields, notes, NAME, key, value, field, kind)
    if data.get("size") is not None:
        put_size(fields, notes, NAME, "size", data["size"])
    elif data.get("width") is not None and data.get("height") is not None:
        put_number(fields, notes, NAME, "width", data["width"], "width", int)
        put_number(fields, notes, NAME, "height", data["height"], "height", int)
    elif "size" in summary:
        fields["width"], fields["height"] = summary["size"]
    sampler = data.get("solver_type", data.get("sampler_type")) or summary.get("solver-type",
                                                                                summary.get("sampler-type"))
    if isinstance(sampler, str) and sampler:
        fields.update(sampler_fields(sampler, notes))


def sampler_fields(name: str, notes: list[str]) -> dict[str, Any]:
    """imaginAIry's sampler (sampler_type) or solver (solver_type) as recipe fields; an unknown one noted."""
    lower = name.strip().lower()
    if lower in _DPM_SOLVER:
        return {"scheduler": "DPMSolverMultistepScheduler"}
    found = sampler_label(_K_SPELLINGS.get(lower, lower)) if lower.startswith("k_") else None
    if found is None:
        return {"scheduler": sampler_scheduler(lower, None, notes)}  # ddim, plms: diffusers' classes
    # Its k-diffusion samplers step through the model's own sigmas (CompVisDenoiser.get_sigmas): A1111's Uniform.
    dropped = lower in ("k_dpmpp_2m", "k_dpm_2", "k_dpm_2_a")  # samplers/kdiff.py from 2023-02-26 on
    notes.append(f"{NAME}'s sampler {lower[:40]} runs as A1111 runs k-diffusion's {found[0]} with the model's own "
                 "sigmas (Uniform), as imaginAIry drives it" + ("; imaginAIry from late February 2023 on drops the "
                                                                "penultimate sigma of DPM++ 2M and DPM2, so the image "
                                                                "may differ" if dropped else ""))
    return {"scheduler": found[0], "schedule": "Uniform"}


def _prompts(value: Any, what: str, notes: list[str]) -> str | None:
    """[[weight, text], ...] (2022), [{"text", "weight"}, ...] (late 2023) or text: one part's text; several parts
    as imaginAIry's summary writes them, weight*(text) joined by "|", with a note."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        odd(notes, NAME, what, value, "not a list of weighted prompts")
        return None
    parts = []
    for item in value[:100]:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            parts.append((item.get("weight", 1), item["text"]))
        elif isinstance(item, list) and len(item) == 2 and isinstance(item[1], str):
            parts.append((item[0], item[1]))
    if len(parts) != len(value):
        odd(notes, NAME, what, value, "not a list of weighted prompts")
        return None
    if not parts:
        return ""
    if len(parts) == 1:
        return parts[0][1]
    notes.append(f"{NAME}: the {what} has {len(parts)} weighted parts, which imaginAIry blends by weight; they are "
                 "written as its summary shows them (weight*(text)|...) and SeedLab reads them as plain text")
    return "|".join(f"{weight}*({text})" for weight, text in parts)


def read_summary(text: str) -> dict[str, Any]:
    """ImageDescription's settings (the last of each key: the prompts come first) and the prompt, quoted first."""
    if not text:
        return {}
    check_text(DESCRIPTION, text)
    text = _ANSI.sub("", text)
    found: dict[str, Any] = {key: value for key, value in _SETTING.findall(text)}
    sizes = _SIZE.findall(text)
    if sizes:
        found["size"] = (int(sizes[-1][0]), int(sizes[-1][1]))
    start = text.find('"')
    end = _PROMPT_END.search(text, start + 1) if start >= 0 else None
    if end is not None:
        found["prompt"] = text[start + 1:end.start()]
    return found
