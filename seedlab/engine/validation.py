"""Recipe validation across fields: what several fields refuse together, each refusal a FieldError naming its field.

`Recipe.__post_init__` raises what a recipe can never be (hires fix's bounds, LoRA tags and hashes, previews, a
32-bit seed for numpy-mt19937); `sampling_errors` and `stream_errors` say what its sampler, schedule, prompt
settings and noise source refuse together (admission names them all, generation raises the first). A single field's
own range is its Spec's (spec.py, recipe.py). Torch-free: the recipe, the page and `seedlab info` read it.
"""

from __future__ import annotations

from .random_sources import MAX_UINT32_SEED, SOURCES
from .samplers.names import (
    A1111_SAMPLERS,
    APPLE,
    COMFY_SAMPLERS,
    OWN,
    SDCPP_DRAWING,
    SDCPP_NO_STREAM,
    SDCPP_SCHEDULES,
    consumes_step_noise,
    is_apple,
    is_comfy_sampler,
    is_ksampler,
    is_own,
    is_sdcpp,
    quiet_samplers,
    split_sampler,
    timestep_count,
)
from .spec import MAX_SIZE, SIZE_MULTIPLE, FieldError, RecipeError
from .weights import lora_names

MAX_HIRES_SCALE = 4.0
MAX_HIRES_SCHEDULE = 10_000  # hires steps / denoising strength: 150 steps at 0.015


def check_hires(recipe) -> None:
    """Hires fix's fields together: a scale of at least 1 that gives a valid size, a strength above 0."""
    errors = []
    sizes = recipe.hires_size
    if recipe.hires_scale < 1 or any(side > MAX_SIZE or side % SIZE_MULTIPLE for side in sizes):
        errors.append(FieldError("hires_scale", f"must be 0 (off) or from 1 to {MAX_HIRES_SCALE:g} with width "
                                                f"and height times it whole multiples of {SIZE_MULTIPLE} up to "
                                                f"{MAX_SIZE}, got {recipe.hires_scale:g} ({sizes[0]}x{sizes[1]})"))
    steps = recipe.hires_steps or recipe.num_inference_steps
    if recipe.denoising_strength == 0:
        errors.append(FieldError("denoising_strength", "must be above 0 with hires fix on (Hires upscale), got 0"))
    elif recipe.hires_sigma_count > MAX_HIRES_SCHEDULE:  # 1e-6 asked for 15 GB and minutes of CPU before a step
        errors.append(FieldError("denoising_strength", f"must be at least {steps / MAX_HIRES_SCHEDULE:.4g} with "
                                 f"{steps} hires steps (steps / strength noise levels, at most {MAX_HIRES_SCHEDULE}), "
                                 f"got {recipe.denoising_strength:g}"))
    if errors:
        raise RecipeError(errors)


def check_loras(recipe) -> None:
    """The LoRA tags of `loras` and of an A1111-syntax prompt, and the hashes: well formed and few enough."""
    errors, count = [], 0
    checks = [("loras", lambda: lora_names.parse_field(recipe.loras)),
              ("lora_hashes", lambda: lora_names.parse_hashes(recipe.lora_hashes)),
              ("ti_hashes", lambda: lora_names.parse_hashes(recipe.ti_hashes, "ti_hashes"))]
    if recipe.prompt_syntax == "a1111":
        checks.append(("prompt", lambda: lora_names.extract(recipe.prompt)[1]))
    for name, check in checks:
        try:
            found = check()
            count += len(found) if isinstance(found, list) else 0
        except ValueError as error:
            errors.append(FieldError(name, str(error).removeprefix(f"{name}: ").removeprefix(f"{name} ")))
    if count > lora_names.MAX_LORAS:
        errors.append(FieldError("loras", f"at most {lora_names.MAX_LORAS} LoRAs at once (the field and the prompt's "
                                          f"tags together), got {count}"))
    if errors:
        raise RecipeError(errors)


def check_preview(recipe) -> None:
    """A preview renders fewer steps of the same schedule kind than its image, from its first step to its last."""
    errors = []
    if recipe.preview_steps >= recipe.num_inference_steps:
        errors.append(FieldError("preview_steps", f"must be below Steps ({recipe.num_inference_steps}) or 0 (the full "
                                                  f"image), got {recipe.preview_steps}"))
    if recipe.start_step or recipe.end_step:  # KSamplerAdvanced's part of a schedule: steps of another schedule
        errors.append(FieldError("preview_steps", "must be 0 with Start at step or End at step set: a part of a "
                                                  "schedule has no shorter preview; generate it in full"))
    if errors:
        raise RecipeError(errors)




def check_uint32_seeds(recipe) -> None:
    """rng numpy-mt19937 draws from a UInt32 seed: the seed, and a variation seed in use, must fit one."""
    errors = [FieldError(name, f"must be from 0 to {MAX_UINT32_SEED} with rng numpy-mt19937 (Apple's pipeline takes a "
                               f"32-bit seed), got {value}")
              for name, value, used in (("seed", recipe.seed, True),
                                        ("variation_seed", recipe.variation_seed, recipe.variation_strength > 0))
              if used and value > MAX_UINT32_SEED]
    if errors:
        raise RecipeError(errors)


def sampling_errors(recipe) -> list:
    """What a recipe's sampler and prompt fields refuse together (admission names them, generation raises them):
    A1111's schedule and hires fix need one of the samplers SeedLab runs itself, emphasis and clip skip need a
    prompt syntax that reads them (PROMPT_SETTINGS)."""
    errors = []
    if not is_ksampler(recipe.scheduler):  # said in the page's words: Scheduler, Schedule type, Hires upscale
        own = "the model's own scheduler" if recipe.scheduler == "default" else f"diffusers' {recipe.scheduler}"
        for field, used, off in (("schedule", recipe.schedule != "Automatic", "set it back to Automatic"),
                                 ("hires_scale", recipe.hires_scale > 0, "set it to 0 (off)")):
            if used:
                errors.append(FieldError(
                    field, f"works with the samplers SeedLab runs as A1111 or ComfyUI does: choose one in Scheduler "
                    f"(A1111's {', '.join(list(A1111_SAMPLERS)[:3])}, ...; ComfyUI's euler, dpmpp_2m, ...), or "
                    f"{off}; {own} runs its own sigmas"))
    if recipe.hires_sampler and not is_ksampler(recipe.hires_sampler):
        errors.append(FieldError("hires_sampler", f"must be empty (the same) or one of {', '.join(A1111_SAMPLERS)}, "
                                                  f"got {recipe.hires_sampler[:60]!r}"))
    errors += step_range_errors(recipe) + own_sampler_errors(recipe) + sdcpp_errors(recipe) + apple_errors(recipe)
    errors += [FieldError(name, f"needs prompt_syntax {', '.join(syntaxes[:-1])} or {syntaxes[-1]} ({what}); with "
                                f"{recipe.prompt_syntax} it stays {default}")
               for name, (default, syntaxes, what) in PROMPT_SETTINGS.items()
               if getattr(recipe, name) != default and recipe.prompt_syntax not in syntaxes]
    return errors


def check_sampling(recipe) -> None:
    """The sampler and prompt fields together (sampling_errors), the first refusal raised as a ValueError."""
    errors = sampling_errors(recipe)
    if errors:
        raise ValueError(str(errors[0]))


# The prompt settings and the syntaxes that read them: emphasis is A1111's weighting (NovelAI's brackets are weighed
# through it); clip skip is the layer of any CLIP reading (ComfyUI's CLIPSetLastLayer).
PROMPT_SETTINGS = {"emphasis": ("Original", ("a1111", "novelai"), "A1111's weighting"),
                   "clip_skip": (1, ("a1111", "novelai", "comfyui"), "the CLIP layer their readings take")}


def step_range_errors(recipe) -> list:
    """KSamplerAdvanced's start and end steps: ComfyUI samplers only, and at least one step between them."""
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


def own_sampler_errors(recipe) -> list:
    """What A1111's own samplers refuse: a schedule for its timestep samplers (they walk their own), hires fix (not
    run with them), UniPC in fewer than 3 timesteps (A1111 asserts its order, 3), Eta DDIM with a sampler not DDIM."""
    found = split_sampler(recipe.scheduler)
    sampler = found[0] if found else None
    hires = [name for name in (recipe.scheduler, recipe.hires_sampler) if recipe.hires_scale > 0 and is_own(name)]
    errors = [FieldError("hires_scale", f"is not run with {hires[0]}: leave it at 0")] if hires else []
    if sampler and sampler.timesteps and recipe.schedule != "Automatic":
        errors.append(FieldError("schedule", f"{recipe.scheduler} walks A1111's own timesteps and takes no schedule: "
                                             f"leave schedule at Automatic, got {recipe.schedule}"))
    if sampler and sampler.function == "unipc" and timestep_count(recipe.num_inference_steps) < 3:
        errors.append(FieldError("num_inference_steps", f"must be at least 3 for {recipe.scheduler} (A1111's UniPC "
                                                        f"is of order 3), got {recipe.num_inference_steps}"))
    if recipe.eta_ddim and not (sampler and sampler.function.startswith("ddim")):
        errors.append(FieldError("eta_ddim", f"is A1111's DDIM's: it needs scheduler DDIM{OWN} or DDIM CFG++{OWN}; "
                                             f"leave it at 0 for {recipe.scheduler[:60]}"))
    return errors


def sdcpp_errors(recipe) -> list:
    """What sd.cpp's samplers refuse: schedules other than discrete (Automatic) and karras, hires fix."""
    if not is_sdcpp(recipe.scheduler):
        return [FieldError("hires_sampler", f"is sd.cpp's: it needs no hires fix, got {recipe.hires_sampler}")] \
            if is_sdcpp(recipe.hires_sampler) else []
    errors = [] if recipe.schedule in SDCPP_SCHEDULES else [FieldError(
        "schedule", f"must be Automatic (sd.cpp's discrete) or Karras for {recipe.scheduler}, got {recipe.schedule}")]
    if recipe.scheduler in SDCPP_DRAWING and recipe.rng in SDCPP_NO_STREAM:
        errors.append(FieldError("rng", f"cannot draw the step noise {recipe.scheduler} draws from the latents' rng, "
                                        f"continued: choose rng cpu, cuda-philox, std-libstdc++, std-libc++ or "
                                        f"std-msvc, got {recipe.rng}"))
    return errors + ([FieldError("hires_scale", f"is not run with {recipe.scheduler}: leave it at 0")]
                     if recipe.hires_scale > 0 else [])


def apple_errors(recipe) -> list:
    """What Apple's schedulers refuse: a schedule (Apple's pipeline spaces its own timesteps), hires fix, and PNDM
    (Apple) in one step (its timesteps need two)."""
    if not is_apple(recipe.scheduler):
        return [FieldError("hires_sampler", f"is Apple's: it needs no hires fix, got {recipe.hires_sampler}")] \
            if is_apple(recipe.hires_sampler) else []
    errors = [] if recipe.schedule == "Automatic" else [FieldError(
        "schedule", f"must be Automatic for {recipe.scheduler} (Apple's own timesteps), got {recipe.schedule}")]
    if recipe.scheduler == "PNDM" + APPLE and recipe.num_inference_steps < 2:
        errors.append(FieldError("num_inference_steps", f"must be at least 2 for {recipe.scheduler}, got "
                                                        f"{recipe.num_inference_steps}"))
    return errors + ([FieldError("hires_scale", f"is not run with {recipe.scheduler}: leave it at 0")]
                     if recipe.hires_scale > 0 else [])


def stream_errors(recipe) -> list:
    """A sampler SeedLab runs itself that asks for noise while stepping, in either pass, with a source that cannot
    give it (no stream of its own): refused before anything is drawn, naming the samplers that can run with it."""
    errors = []
    passes = (("rng", recipe.scheduler), ("hires_sampler", recipe.hires_sampler if recipe.hires_scale else ""))
    for field, name in passes:
        if not name or not is_ksampler(name) or is_comfy_sampler(name):  # ComfyUI's: rng cpu only (another check)
            continue
        no_stream = SDCPP_NO_STREAM if is_sdcpp(name) else ("numpy-pcg64", *SOURCES)  # sd.cpp's rngs stream
        if recipe.rng in no_stream and consumes_step_noise(name, recipe.eta_ddim):
            problem = (f"cannot draw the noise {name} draws at every step; choose rng cpu or cuda-philox, or a "
                       f"sampler that draws nothing while stepping ({', '.join(quiet_samplers(name))})")
            errors.append(FieldError(field, f"cannot be used here: {recipe.rng} {problem}" if field == "rng"
                                     else f"is {name}: rng {recipe.rng} {problem}"))
    return errors
