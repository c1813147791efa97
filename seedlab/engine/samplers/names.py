"""A1111's sampler names, torch-free: which names SeedLab runs as A1111 runs them, and their options.

The table is AUTOMATIC1111 1.10's `samplers_k_diffusion` (modules/sd_samplers_kdiffusion.py): each
sampler's k-diffusion function, the schedule "Automatic" stands for, and the options that change how
it is driven. engine/samplers/a1111.py runs them; the file readers (files/infotext.py) and the page read the names
from here without importing torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from ..recipe import COMFY_SCHEDULES  # noqa: F401  (ComfyUI's scheduler names, beside its sampler names)


@dataclass(frozen=True)
class KSampler:
    """One of A1111's k-diffusion samplers and its options (sd_samplers_kdiffusion.samplers_k_diffusion)."""

    label: str
    function: str  # the name in ksamplers.SAMPLER_FUNCTIONS (k-diffusion's sample_<name>)
    aliases: tuple[str, ...]
    schedule: str = "Uniform"  # what "Automatic" means for this sampler
    discard_penultimate: bool = False
    brownian: bool = False
    uses_ensd: bool = False
    solver_type: str = "midpoint"
    second_order: bool = False  # two model calls a step


A1111_SAMPLERS = {sampler.label: sampler for sampler in (
    KSampler("DPM++ 2M", "dpmpp_2m", ("k_dpmpp_2m",), "Karras"),
    KSampler("DPM++ SDE", "dpmpp_sde", ("k_dpmpp_sde",), "Karras", brownian=True, second_order=True),
    KSampler("DPM++ 2M SDE", "dpmpp_2m_sde", ("k_dpmpp_2m_sde",), "Exponential", brownian=True),
    KSampler("DPM++ 2M SDE Heun", "dpmpp_2m_sde", ("k_dpmpp_2m_sde_heun",), "Exponential", brownian=True,
             solver_type="heun"),
    KSampler("DPM++ 2S a", "dpmpp_2s_ancestral", ("k_dpmpp_2s_a",), "Karras", uses_ensd=True, second_order=True),
    KSampler("DPM++ 3M SDE", "dpmpp_3m_sde", ("k_dpmpp_3m_sde",), "Exponential", discard_penultimate=True,
             brownian=True),
    KSampler("Euler a", "euler_ancestral", ("k_euler_a", "k_euler_ancestral"), uses_ensd=True),
    KSampler("Euler", "euler", ("k_euler",)),
    KSampler("LMS", "lms", ("k_lms",)),
    KSampler("Heun", "heun", ("k_heun",), second_order=True),
    KSampler("DPM2", "dpm_2", ("k_dpm_2",), "Karras", discard_penultimate=True, second_order=True),
    KSampler("DPM2 a", "dpm_2_ancestral", ("k_dpm_2_a",), "Karras", discard_penultimate=True, uses_ensd=True,
             second_order=True),
    # From sigma_max to sigma_min in `steps` model calls / in as many as it needs (engine/samplers/kdiffusion_extra.py);
    # the schedule only sets the first noise's scale (sigmas[0]).
    KSampler("DPM fast", "dpm_fast", ("k_dpm_fast",), uses_ensd=True),
    KSampler("DPM adaptive", "dpm_adaptive", ("k_dpm_ad",), uses_ensd=True),
    KSampler("Restart", "restart", ("restart",), "Karras", second_order=True),  # modules/sd_samplers_extra.py
)}
# DPM adaptive chooses its own steps (A1111 ignores Steps for it); SeedLab bounds its model calls by the larger of
# Steps and ADAPTIVE_MIN_STEPS, three calls a try (a second- and a third-order step), so a request is priced by it.
ADAPTIVE_CALLS_PER_STEP, ADAPTIVE_MIN_STEPS = 3, 100
_BY_ALIAS = {alias: sampler for sampler in A1111_SAMPLERS.values() for alias in (sampler.label, *sampler.aliases)}
# A1111 schedule labels and the other spellings 1.10 accepts after a sampler's name ("DPM++ 2M Karras").
SCHEDULE_NAMES = {"Automatic": "automatic", "Uniform": "uniform", "Karras": "karras", "Exponential": "exponential",
                  "Polyexponential": "polyexponential", "SGM Uniform": "sgm_uniform", "KL Optimal": "kl_optimal",
                  "Align Your Steps": "align_your_steps", "Simple": "simple", "Normal": "normal", "DDIM": "ddim",
                  "Beta": "beta"}
_SCHEDULE_SPELLINGS = {**{label: label for label in SCHEDULE_NAMES},
                       **{name: label for label, name in SCHEDULE_NAMES.items()}, "SGMUniform": "SGM Uniform"}
DEFAULT_RHO = {"Karras": 7.0, "Polyexponential": 1.0}


def split_sampler(name: str) -> tuple[KSampler, str] | None:
    """An A1111 sampler name as (sampler, schedule label named in it, or "Automatic"); None if not one.

    Before 1.9 the schedule was part of the name ("DPM++ 2M Karras", "DPM++ 2M SDE Exponential");
    1.10 reads such names as the sampler with that schedule, and "Automatic" where it is the default.
    """
    if name in _BY_ALIAS:
        return _BY_ALIAS[name], "Automatic"
    for spelling, label in _SCHEDULE_SPELLINGS.items():
        base = name.removesuffix(" " + spelling)
        if base != name and base in _BY_ALIAS:
            sampler = _BY_ALIAS[base]
            return sampler, "Automatic" if label == sampler.schedule and label != "Uniform" else label
    return None


# ComfyUI's KSampler sampler names that SeedLab runs as ComfyUI runs them (engine/samplers/comfyui.py): two calls a
# step, noise drawn while stepping (dpm_adaptive: as many calls as it needs, bounded as A1111's DPM adaptive).
COMFY_SAMPLERS = {
    "euler": (False, False), "euler_ancestral": (False, True), "heun": (True, False), "dpm_2": (True, False),
    "dpm_2_ancestral": (True, True), "lms": (False, False), "dpm_fast": (False, False), "dpm_adaptive": (False, False),
    "dpmpp_2s_ancestral": (True, True), "dpmpp_sde": (True, True), "dpmpp_sde_gpu": (True, True),
    "dpmpp_2m": (False, False),
    "dpmpp_2m_sde": (False, True), "dpmpp_2m_sde_gpu": (False, True), "dpmpp_2m_sde_heun": (False, True),
    "dpmpp_2m_sde_heun_gpu": (False, True), "dpmpp_3m_sde": (False, True), "dpmpp_3m_sde_gpu": (False, True),
    "ddim": (False, False),
}


def nearest(word: str, names: Iterable[str] = ()) -> str:
    """" (nearest: DPM++ 2M, dpmpp_2m)" for a word that is none of `names` nor ComfyUI's sampler names, or ""."""
    candidates = {name.lower(): name for name in [*names, *COMFY_SAMPLERS]}
    close = difflib.get_close_matches(str(word).lower()[:80], list(candidates), n=3, cutoff=0.5)
    return f" (nearest: {', '.join(candidates[name] for name in close)})" if close else ""


def is_comfy_sampler(name: str) -> bool:
    return name in COMFY_SAMPLERS


def is_ksampler(name: str) -> bool:
    """One of the samplers SeedLab runs itself, as A1111 (its names) or ComfyUI (its names) runs it."""
    return name in COMFY_SAMPLERS or split_sampler(name) is not None


def schedule_label(text: str) -> str | None:
    """A schedule as A1111 1.10 reads it (label, name or alias: "Karras", "karras", "SGMUniform") as its label."""
    return _SCHEDULE_SPELLINGS.get(text.strip())


def sampler_label(name: str) -> tuple[str, str] | None:
    """An A1111 sampler name as (label, schedule label); None when it is not one of A1111_SAMPLERS."""
    found = split_sampler(name.strip())
    return None if found is None else (found[0].label, found[1])


def adaptive_calls(steps: int) -> int:
    """The most model calls DPM adaptive may make (it picks its own step count): more stops it with an error."""
    return ADAPTIVE_CALLS_PER_STEP * max(steps, ADAPTIVE_MIN_STEPS)


def model_calls(name: str, steps: int) -> int | None:
    """How many denoiser calls an A1111 sampler makes in `steps` steps, at most (None: not an A1111 sampler)."""
    if name == "dpm_adaptive":  # ComfyUI's, bounded as A1111's
        return adaptive_calls(steps)
    if name in COMFY_SAMPLERS:
        return 2 * steps if COMFY_SAMPLERS[name][0] else steps
    found = split_sampler(name)
    if found is None:
        return None
    if found[0].function == "dpm_adaptive":
        return adaptive_calls(steps)
    return 2 * steps if found[0].second_order else steps


def draws_each_step(name: str) -> bool:
    """Whether an A1111 sampler draws noise while stepping (ancestral and SDE samplers at A1111's eta, Restart)."""
    if name in COMFY_SAMPLERS:
        return COMFY_SAMPLERS[name][1]
    found = split_sampler(name)
    return found is not None and (found[0].brownian or found[0].uses_ensd or found[0].function == "restart")


def sampling_errors(recipe) -> list:
    """What a recipe's sampler and prompt fields refuse together (admission names them, generation raises them):
    A1111's schedule and hires fix need one of the samplers SeedLab runs itself, emphasis and clip skip need a
    prompt syntax that reads them (PROMPT_SETTINGS)."""
    from ..recipe import FieldError

    errors = []
    if not is_ksampler(recipe.scheduler):
        for field, used in (("schedule", recipe.schedule != "Automatic"), ("hires_scale", recipe.hires_scale > 0)):
            if used:
                errors.append(FieldError(
                    field, f"needs an A1111 sampler ({', '.join(A1111_SAMPLERS)}); the diffusers scheduler "
                    f"{recipe.scheduler} runs its own sigmas, so leave {field} at its default"))
    if recipe.hires_sampler and not is_ksampler(recipe.hires_sampler):
        errors.append(FieldError("hires_sampler", f"must be empty (the same) or one of {', '.join(A1111_SAMPLERS)}, "
                                                  f"got {recipe.hires_sampler[:60]!r}"))
    errors += step_range_errors(recipe)
    errors += [FieldError(name, f"needs prompt_syntax {', '.join(syntaxes[:-1])} or {syntaxes[-1]} ({what}); with "
                                f"{recipe.prompt_syntax} it stays {default}")
               for name, (default, syntaxes, what) in PROMPT_SETTINGS.items()
               if getattr(recipe, name) != default and recipe.prompt_syntax not in syntaxes]
    return errors


# The prompt settings and the syntaxes that read them: emphasis is A1111's weighting (NovelAI's brackets are weighed
# through it); clip skip is the layer of any CLIP reading (ComfyUI's CLIPSetLastLayer).
PROMPT_SETTINGS = {"emphasis": ("Original", ("a1111", "novelai"), "A1111's weighting"),
                   "clip_skip": (1, ("a1111", "novelai", "comfyui"), "the CLIP layer their readings take")}


def step_range_errors(recipe) -> list:
    """KSamplerAdvanced's start and end steps: ComfyUI samplers only, and at least one step between them."""
    from ..recipe import FieldError

    if not recipe.start_step and not recipe.end_step:
        return []
    if not is_comfy_sampler(recipe.scheduler):
        return [FieldError(name, f"needs one of ComfyUI's samplers ({', '.join(COMFY_SAMPLERS)}), as KSamplerAdvanced "
                                 f"runs them; leave {name} at 0 for {recipe.scheduler[:60]}")
                for name in ("start_step", "end_step") if getattr(recipe, name)]
    end = min(recipe.end_step or recipe.num_inference_steps, recipe.num_inference_steps)
    if recipe.start_step >= end:
        return [FieldError("start_step", f"must be below the last step run ({end}: end_step, else Steps), got "
                                         f"{recipe.start_step}")]
    return []
