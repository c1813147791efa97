"""A1111's sampler names, torch-free: which names SeedLab runs as A1111 runs them, and their options.

The table is AUTOMATIC1111 1.10's `samplers_k_diffusion` (modules/sd_samplers_kdiffusion.py): each
sampler's k-diffusion function, the schedule "Automatic" stands for, and the options that change how
it is driven. engine/samplers/a1111.py runs them; the file readers (files/infotext.py) and the page read the names
from here without importing torch. A second table holds A1111's own samplers (its timestep samplers and LCM,
engine/samplers/timesteps.py), spelled "DDIM (A1111)" in a recipe.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class KSampler:
    """One of A1111's k-diffusion samplers and its options (sd_samplers_kdiffusion.samplers_k_diffusion)."""

    label: str
    function: str  # the name in kdiffusion.SAMPLER_FUNCTIONS (k-diffusion's sample_<name>)
    aliases: tuple[str, ...]
    schedule: str = "Uniform"  # what "Automatic" means for this sampler
    discard_penultimate: bool = False
    brownian: bool = False
    uses_ensd: bool = False
    solver_type: str = "midpoint"
    second_order: bool = False  # two model calls a step
    timesteps: bool = False  # walks A1111's timesteps (sd_samplers_timesteps), not sigmas: it takes no schedule


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
    # From sigma_max to sigma_min in `steps` model calls / in as many as it needs (engine/samplers/kdiffusion.py);
    # the schedule only sets the first noise's scale (sigmas[0]).
    KSampler("DPM fast", "dpm_fast", ("k_dpm_fast",), uses_ensd=True),
    KSampler("DPM adaptive", "dpm_adaptive", ("k_dpm_ad",), uses_ensd=True),
    KSampler("Restart", "restart", ("restart",), "Karras", second_order=True),  # modules/sd_samplers_extra.py
)}
# DPM adaptive chooses its own steps (A1111 ignores Steps for it); SeedLab bounds its model calls by the larger of
# Steps and ADAPTIVE_MIN_STEPS, three calls a try (a second- and a third-order step), so a request is priced by it.
ADAPTIVE_CALLS_PER_STEP, ADAPTIVE_MIN_STEPS = 3, 100
# A1111's own samplers (modules/sd_samplers_timesteps.py samplers_timesteps, sd_samplers_lcm.py samplers_lcm): A1111's
# name + OWN, as a recipe spells them, for A1111's bare names mean diffusers' classes on a plot axis ("DDIM" is
# DDIMScheduler there); A1111's texts name them bare ("Sampler: DDIM") and are read and written as these.
OWN = " (A1111)"
A1111_OWN_SAMPLERS = {sampler.label: sampler for sampler in (
    KSampler("DDIM" + OWN, "ddim", (), timesteps=True),
    KSampler("DDIM CFG++" + OWN, "ddim_cfgpp", (), timesteps=True),
    KSampler("PLMS" + OWN, "plms", (), timesteps=True),
    KSampler("UniPC" + OWN, "unipc", (), timesteps=True),
    KSampler("LCM" + OWN, "lcm", ()),  # a k-diffusion-style sampler on LCM's 50 timesteps: it takes schedules
)}
_BY_ALIAS = {alias: sampler for sampler in (*A1111_SAMPLERS.values(), *A1111_OWN_SAMPLERS.values())
             for alias in (sampler.label, *sampler.aliases)}
_OWN_SPELLINGS = sorted(((label.removesuffix(OWN), label) for label in A1111_OWN_SAMPLERS), key=lambda x: -len(x[0]))
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


# ComfyUI's KSampler schedulers, for ComfyUI's sampler names ("dpmpp_2m" + "karras").
COMFY_SCHEDULES = ("normal", "karras", "exponential", "sgm_uniform", "simple", "ddim_uniform", "beta",
                   "linear_quadratic", "kl_optimal")
# ComfyUI's KSampler sampler names that SeedLab runs as ComfyUI runs them (engine/samplers/comfyui/), in the order
# of ComfyUI's SAMPLER_NAMES (October 2025; exp_heun_2_x0 and _sde came in December 2025): the model calls a step at
# most, and whether noise is drawn while stepping (dpm_adaptive: as many calls as it needs, bounded as A1111's DPM
# adaptive).
COMFY_SAMPLERS = {
    "euler": (1, False), "euler_cfg_pp": (1, False), "euler_ancestral": (1, True), "euler_ancestral_cfg_pp": (1, True),
    "heun": (2, False), "heunpp2": (3, False), "exp_heun_2_x0": (2, False), "exp_heun_2_x0_sde": (2, True),
    "dpm_2": (2, False), "dpm_2_ancestral": (2, True), "lms": (1, False),
    "dpm_fast": (1, False), "dpm_adaptive": (1, False), "dpmpp_2s_ancestral": (2, True),
    "dpmpp_2s_ancestral_cfg_pp": (2, True), "dpmpp_sde": (2, True), "dpmpp_sde_gpu": (2, True), "dpmpp_2m": (1, False),
    "dpmpp_2m_cfg_pp": (1, False), "dpmpp_2m_sde": (1, True), "dpmpp_2m_sde_gpu": (1, True),
    "dpmpp_2m_sde_heun": (1, True), "dpmpp_2m_sde_heun_gpu": (1, True), "dpmpp_3m_sde": (1, True),
    "dpmpp_3m_sde_gpu": (1, True), "ddpm": (1, True), "lcm": (1, True), "ipndm": (1, False), "ipndm_v": (1, False),
    "deis": (1, False), "res_multistep": (1, False), "res_multistep_cfg_pp": (1, False),
    "res_multistep_ancestral": (1, True), "res_multistep_ancestral_cfg_pp": (1, True),
    "gradient_estimation": (1, False), "gradient_estimation_cfg_pp": (1, False), "er_sde": (1, True),
    "seeds_2": (2, True), "seeds_3": (3, True), "sa_solver": (1, True), "sa_solver_pece": (2, True), "ddim": (1, False),
    "uni_pc": (1, False), "uni_pc_bh2": (1, False),  # SAMPLER_NAMES' last two, run by engine/samplers/unipc.py
}


# stable-diffusion.cpp's samplers SeedLab runs as sd.cpp computes them (engine/samplers/sdcpp.py), its name + SDCPP
# in a recipe ("euler (sd.cpp)"; sd.cpp's bare "euler" is ComfyUI's here): model calls a step, at most. Its ancestral
# ones (euler_a, dpm++2s_a) draw their step noise from the rng that drew the starting latents, continued: any rng
# with a stream (SDCPP_NO_STREAM has none). Schedules: Automatic is "discrete".
SDCPP = " (sd.cpp)"
SDCPP_SAMPLERS = {name + SDCPP: calls for name, calls in
                  {"euler": 1, "heun": 2, "dpm2": 2, "dpm++2m": 1, "dpm++2mv2": 1, "euler_a": 1,
                   "dpm++2s_a": 2}.items()}
SDCPP_DRAWING = ("euler_a" + SDCPP, "dpm++2s_a" + SDCPP)
SDCPP_NO_STREAM = ("numpy-pcg64", "numpy-mt19937")  # sources that are no sd.cpp rng object: no step noise
SDCPP_SCHEDULES = {"Automatic": "discrete", "Karras": "karras", "karras": "karras"}


def is_sdcpp(name: str) -> bool:
    return name in SDCPP_SAMPLERS


# Apple's Core ML pipeline's schedulers (Mochi Diffusion's), run as its Swift computes them (engine/samplers/apple.py),
# its label + APPLE in a recipe: UNet calls for n steps (PNDM: n + 1 timesteps, the next-to-last one twice).
APPLE = " (Apple)"
APPLE_SAMPLERS = {"PNDM" + APPLE: 1, "DPM-Solver++" + APPLE: 0}


def is_apple(name: str) -> bool:
    return name in APPLE_SAMPLERS


# ComfyUI's samplers whose noise is a Brownian tree seeded with the seed (BrownianTreeNoiseSampler); every other one
# that draws (COMFY_SAMPLERS' second flag) draws from default_noise_sampler.
COMFY_BROWNIAN = ("dpmpp_sde", "dpmpp_2m_sde", "dpmpp_2m_sde_heun", "dpmpp_3m_sde")


def nearest(word: str, names: Iterable[str] = ()) -> str:
    """" (nearest: DPM++ 2M, dpmpp_2m)" for a word that is none of `names` nor ComfyUI's sampler names, or ""."""
    candidates = {name.lower(): name for name in [*names, *COMFY_SAMPLERS]}
    close = difflib.get_close_matches(str(word).lower()[:80], list(candidates), n=3, cutoff=0.5)
    return f" (nearest: {', '.join(candidates[name] for name in close)})" if close else ""


def is_comfy_sampler(name: str) -> bool:
    return name in COMFY_SAMPLERS


def is_ksampler(name: str) -> bool:
    """One of the samplers SeedLab runs itself, as A1111 (its names) or ComfyUI (its names) runs it."""
    return name in COMFY_SAMPLERS or name in SDCPP_SAMPLERS or is_apple(name) or split_sampler(name) is not None


def schedule_label(text: str) -> str | None:
    """A schedule as A1111 1.10 reads it (label, name or alias: "Karras", "karras", "SGMUniform") as its label."""
    return _SCHEDULE_SPELLINGS.get(text.strip())


def sampler_label(name: str) -> tuple[str, str] | None:
    """An A1111 sampler name as (label, schedule label), A1111's own samplers as spelled by A1111 ("DDIM") or by a
    recipe ("DDIM (A1111)"); None when it is not one of A1111's."""
    name = name.strip()
    found = split_sampler(name)
    for spelling, label in () if found else _OWN_SPELLINGS:  # "DDIM", "UniPC Karras" (1.10 ignores the schedule)
        if name == spelling or name.startswith(spelling + " "):
            found = split_sampler(label + name[len(spelling):])
            break
    return None if found is None else (found[0].label, found[1])


def a1111_spelling(name: str) -> str:
    """A recipe's sampler as A1111 writes it: "DDIM (A1111)" as "DDIM", any other name as it is."""
    return name.removesuffix(OWN) if name in A1111_OWN_SAMPLERS else name


def is_own(name: str) -> bool:
    """One of A1111's own samplers (A1111_OWN_SAMPLERS, in a recipe's spelling)."""
    found = split_sampler(name)
    return found is not None and found[0].label in A1111_OWN_SAMPLERS


def timestep_count(steps: int) -> int:
    """How many timesteps A1111's timestep samplers walk for `steps` steps (CompVisSampler.get_timesteps: every
    1000 // steps-th of 1000, so more than `steps` when it does not divide 1000)."""
    return len(range(0, 1000, 1000 // steps))


def adaptive_calls(steps: int) -> int:
    """The most model calls DPM adaptive may make (it picks its own step count): more stops it with an error."""
    return ADAPTIVE_CALLS_PER_STEP * max(steps, ADAPTIVE_MIN_STEPS)


# diffusers' schedulers that call the model twice a step (a second-order correction)
TWO_CALL_SCHEDULERS = ("HeunDiscreteScheduler", "KDPM2DiscreteScheduler", "KDPM2AncestralDiscreteScheduler")


def model_calls(name: str, steps: int) -> int:
    """How many denoiser calls a sampler makes in `steps` steps, at most: a tool's sampler as SeedLab runs it, or a
    diffusers class (twice a step for its second-order ones)."""
    if name == "dpm_adaptive":  # ComfyUI's, bounded as A1111's
        return adaptive_calls(steps)
    if name in COMFY_SAMPLERS or name in SDCPP_SAMPLERS:
        return COMFY_SAMPLERS[name][0] * steps if name in COMFY_SAMPLERS else SDCPP_SAMPLERS[name] * steps
    if is_apple(name):
        return steps + APPLE_SAMPLERS[name]
    found = split_sampler(name)
    if found is None:
        return steps * (2 if name in TWO_CALL_SCHEDULERS else 1)
    if found[0].function == "dpm_adaptive":
        return adaptive_calls(steps)
    if found[0].timesteps:  # DDIM: a call from each timestep to the next; UniPC: one at each timestep
        count = timestep_count(steps)
        extra = 1 if found[0].function == "plms" and count > 1 else 0  # PLMS: a second call at its first step
        return count if found[0].function == "unipc" else count - 1 + extra
    return 2 * steps if found[0].second_order else steps


def draws_each_step(name: str) -> bool:
    """Whether an A1111 sampler draws noise while stepping (ancestral and SDE samplers at A1111's eta, Restart;
    ComfyUI's and sd.cpp's ancestral ones)."""
    if name in COMFY_SAMPLERS:
        return COMFY_SAMPLERS[name][1]
    if name in SDCPP_SAMPLERS:
        return name in SDCPP_DRAWING
    found = split_sampler(name)
    return found is not None and (found[0].brownian or found[0].uses_ensd or found[0].function in ("restart", "lcm"))


# What a Brownian tree draws for one query, in latents: torchsde's BrownianTree bisects down to its tolerance and draws
# a latent's worth at each level (47 to 52 a query counted over 5 to 50 steps, embedded model; 56 with room).
BROWNIAN_DRAWS = 56
CHURNING = ("euler", "heun", "dpm_2")  # k-diffusion's churn draws a latent every step, used or not


def consumes_step_noise(name: str, eta_ddim: float = 0.0) -> bool:
    """Whether a sampler asks its noise source for a latent while stepping, whether or not the image uses it: every
    sampler that draws (draws_each_step), A1111's Euler, Heun and DPM2, whose churn draws at every step as
    k-diffusion does (at churn 0 the draw is unused, but a source that cannot stream cannot give it), and A1111's
    DDIM at Eta DDIM above 0."""
    found = split_sampler(name) if is_ksampler(name) and name not in COMFY_SAMPLERS else None
    function = found[0].function if found is not None else ""
    return draws_each_step(name) or function in CHURNING or (function.startswith("ddim") and eta_ddim > 0)


def quiet_samplers(name: str) -> list[str]:
    """The samplers of `name`'s tool that ask their noise source for nothing while stepping (a source without a
    stream can drive them): sd.cpp's for an sd.cpp sampler, A1111's (and its own) for any other."""
    if is_sdcpp(name):
        return [other for other in SDCPP_SAMPLERS if not consumes_step_noise(other)]
    return [label for label in (*A1111_SAMPLERS, *A1111_OWN_SAMPLERS) if not consumes_step_noise(label)]


def step_draws(name: str, steps: int) -> int:
    """The latents' worth of values a sampler draws while stepping, at most, for `steps` steps (besides the starting
    noise): what the budget prices per source. A diffusers class may draw one a step (its generator)."""
    if name in COMFY_SAMPLERS:
        if not COMFY_SAMPLERS[name][1]:
            return 0
        per_step = COMFY_SAMPLERS[name][0] if name.removesuffix("_gpu") not in COMFY_BROWNIAN else (
            BROWNIAN_DRAWS * COMFY_SAMPLERS[name][0])
        return per_step * (adaptive_calls(steps) if name == "dpm_adaptive" else steps)
    if name in SDCPP_SAMPLERS:
        # a latent a call, after the starting latents' call replayed to continue the stream (samplers/sdcpp.py)
        return SDCPP_SAMPLERS[name] * steps + 1 if name in SDCPP_DRAWING else 0
    if is_apple(name):
        return 0
    found = split_sampler(name)
    if found is None:  # a diffusers class, with the image's generator
        return steps
    sampler = found[0]
    if sampler.brownian:  # DPM++ SDE asks the tree twice a step
        return BROWNIAN_DRAWS * steps * (2 if sampler.second_order else 1)
    if sampler.function == "dpm_adaptive":
        return adaptive_calls(steps)
    if sampler.timesteps:  # A1111's DDIM at Eta DDIM above 0 draws a latent a timestep
        return timestep_count(steps)
    return steps * (2 if sampler.second_order else 1) if consumes_step_noise(name) else 0
