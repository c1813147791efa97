"""The recipe's checks of several fields together (hires fix, LoRA tags and hashes, previews), each raising one
RecipeError that names every bad field. recipe.py calls them from Recipe.__post_init__."""

from __future__ import annotations

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


MAX_UINT32_SEED = 2**32 - 1  # rng numpy-mt19937: Apple's pipeline takes a UInt32 seed (NumPy's legacy seeding too)


def check_uint32_seeds(recipe) -> None:
    """rng numpy-mt19937 draws from a UInt32 seed: the seed, and a variation seed in use, must fit one."""
    errors = [FieldError(name, f"must be from 0 to {MAX_UINT32_SEED} with rng numpy-mt19937 (Apple's pipeline takes a "
                               f"32-bit seed), got {value}")
              for name, value, used in (("seed", recipe.seed, True),
                                        ("variation_seed", recipe.variation_seed, recipe.variation_strength > 0))
              if used and value > MAX_UINT32_SEED]
    if errors:
        raise RecipeError(errors)
