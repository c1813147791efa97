"""How other tools name their samplers, as recipe fields: A1111's labels, k-diffusion's and ComfyUI's lower-case
names, diffusers' classes.

A sampler SeedLab runs as its tool runs it stays that sampler: ComfyUI's names and schedulers from a tool built on
ComfyUI (SwarmUI, Stability Matrix, Fooocus and its forks, ComfyUI's own savers) run as ComfyUI runs them
(engine/samplers/comfyui.py); k-diffusion's names from a tool that calls k-diffusion (NovelAI) run as A1111's samplers
of the same functions (engine/samplers/a1111.py). Any other name becomes the nearest diffusers scheduler class, with a
note when a schedule cannot follow it.
"""

from __future__ import annotations

from typing import Any

from ..engine.samplers.names import COMFY_SCHEDULES, is_comfy_sampler, sampler_label, schedule_label

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
# What SeedLab writes for a diffusers class: A1111's sampler name and, explicitly, the schedule. A1111's
# "Uniform" is the model's own discrete sigmas, as diffusers' schedulers use by default; without a
# Schedule type A1111 1.10 picks Karras sigmas for DPM++ 2M.
A1111_NAMES = {scheduler: (name, "Uniform") for name, scheduler in SAMPLERS.items()}
# Noise schedules A1111 appends to a sampler name ("DPM++ 2M Karras") or writes as "Schedule type".
SCHEDULE_TYPES = ("Karras", "Exponential", "SGM Uniform", "Polyexponential", "Align Your Steps", "Simple",
                  "Normal", "DDIM", "Beta", "KL Optimal", "Uniform", "Automatic")
_PLAIN_SCHEDULES = {"automatic", "uniform", "normal", "simple", "sgm_uniform", "sgm uniform", "default", ""}
# ComfyUI, SwarmUI, InvokeAI, Fooocus and NovelAI spell samplers in lower case (k-diffusion's names).
LOWER_SAMPLERS = {
    "euler": "EulerDiscreteScheduler", "euler_a": "EulerAncestralDiscreteScheduler",
    "euler_ancestral": "EulerAncestralDiscreteScheduler", "heun": "HeunDiscreteScheduler",
    "dpm_2": "KDPM2DiscreteScheduler", "dpm_2_a": "KDPM2AncestralDiscreteScheduler",
    "dpm_2_ancestral": "KDPM2AncestralDiscreteScheduler", "lms": "LMSDiscreteScheduler",
    "dpmpp_2m": "DPMSolverMultistepScheduler", "ddim": "DDIMScheduler", "plms": "PNDMScheduler",
    "pndm": "PNDMScheduler", "uni_pc": "UniPCMultistepScheduler", "uni_pc_bh2": "UniPCMultistepScheduler",
    "unipc": "UniPCMultistepScheduler",
    "lcm": "LCMScheduler", "ddpm": "DDPMScheduler", "deis": "DEISMultistepScheduler",
}
_LOWER_SCHEDULES = ("karras", "exponential", "sgm_uniform", "simple", "normal", "beta", "k")


def sampler_scheduler(name: Any, schedule: Any, notes: list[str]) -> str:
    """A sampler name (A1111's or k-diffusion's lower-case one) as a diffusers class; "default" with a note."""
    name = str(name).strip()
    schedule = "" if schedule is None else str(schedule).strip()
    base = name
    if name in SAMPLERS:
        base = name
    else:
        for suffix in SCHEDULE_TYPES:  # the old A1111 style: the schedule is part of the name
            if name.endswith(" " + suffix) and name.removesuffix(" " + suffix) in SAMPLERS:
                base, schedule = name.removesuffix(" " + suffix), suffix
    scheduler = SAMPLERS.get(base)
    if scheduler is None:
        lower = name.lower().replace(" ", "_").removeprefix("sample_").removeprefix("k_")
        for suffix in _LOWER_SCHEDULES:  # "euler_ancestral_karras", "dpmpp_2m_k", "euler_simple"
            if lower.endswith("_" + suffix) and lower.removesuffix("_" + suffix) in LOWER_SAMPLERS:
                lower, schedule = lower.removesuffix("_" + suffix), "karras" if suffix == "k" else suffix
        scheduler = LOWER_SAMPLERS.get(lower)
    if scheduler is None:
        notes.append(f"Sampler {name[:60]} has no clear diffusers equivalent: the model's default scheduler is used")
        return "default"
    if schedule.lower() not in _PLAIN_SCHEDULES:
        notes.append(f"Schedule type {schedule[:40]} is not applied: {scheduler} runs with its default sigmas")
    return scheduler

# NovelAI's noise_schedule values: "native" is the model's own sigmas (A1111's Uniform).
_NOVELAI_SCHEDULES = {"native": "Uniform", "karras": "Karras", "exponential": "Exponential",
                      "polyexponential": "Polyexponential"}


def tool_sampling(name: Any, schedule: Any, notes: list[str], runs: str) -> dict[str, Any]:
    """The sampler fields of a tool whose samplers are ComfyUI's (`runs` "comfyui") or k-diffusion's
    ("k-diffusion"): run as they run them where SeedLab can, else sampler_scheduler's diffusers class."""
    text, written = str(name).strip(), "" if schedule is None else str(schedule).strip()
    if runs == "comfyui" and is_comfy_sampler(text) and written.lower() in ("", *COMFY_SCHEDULES):
        return {"scheduler": text, "schedule": written.lower() or "normal"}
    spelled = {"k_dpmpp_2s_ancestral": "k_dpmpp_2s_a", "k_dpm_2_ancestral": "k_dpm_2_a"}.get(text, text)
    found = sampler_label(spelled) if runs == "k-diffusion" else None
    if found is not None:
        label = _NOVELAI_SCHEDULES.get(written.lower()) or schedule_label(written) or found[1]
        notes.append("NovelAI's own noise conventions are not published: its sampler runs as A1111 runs "
                     f"k-diffusion's ({found[0]}, {label})")
        return {"scheduler": found[0], "schedule": label}
    scheduler = sampler_scheduler(name, schedule, notes)
    if runs == "comfyui" and scheduler != "default":  # never silent: ComfyUI ran its own code for this name
        notes.append(f"ComfyUI's sampler {text[:60]} is not one SeedLab runs as ComfyUI does: diffusers' {scheduler} "
                     "runs instead, so the image differs (tens of levels or more)")
    return {"scheduler": scheduler}
