"""Generation: recipes in, images out, one fresh generator per image.

Every image is its own batch-1 pipeline call with its own `torch.Generator`. That is what makes
"grid cell == solo regeneration" exact: a batched call (a generator list) is never bit-identical
to solo runs on CPU (convolution backends, GEMM blocking and GroupNorm threading depend on the
batch size), and with one shared generator only cell 0 could ever be regenerated. Measured on 2 CPU
cores with the embedded model, batch-1 calls one after another cost 1.63x one batched call
(bench/bench_grid.py); running them in parallel processes wins that back (pool.py).

The starting noise is a value made by noise.py (latents, and the generator that stochastic
schedulers draw from afterwards) and handed to the pipeline.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from .determinism import current_environment, full_determinism
from .environment import Environment
from .models import Model
from .noise import check_scheduler, make_noise
from .recipe import Recipe, join_prompt

ProgressFn = Callable[[int, int], None]  # (steps done, steps in all)

# One generation at a time in a process: the determinism switches are process-wide torch state, and
# a pipeline's scheduler is swapped per recipe, so two generations must never interleave.
_LOCK = threading.Lock()


class Cancelled(Exception):
    """Raised when a generation is stopped through its cancel event."""


@dataclass(frozen=True)
class Result:
    """One generated image, the recipe that made it and the environment it was made in."""

    recipe: Recipe
    image: Image.Image
    fingerprint: str
    environment: Environment


def fingerprint(image: Image.Image | np.ndarray) -> str:
    """sha256 of the uint8 RGB pixel array (not of a file's bytes, which depend on the encoder)."""
    pixels = np.ascontiguousarray(np.asarray(image.convert("RGB") if isinstance(image, Image.Image) else image))
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"fingerprint needs an RGB uint8 image, got {pixels.dtype} {pixels.shape}")
    return hashlib.sha256(pixels.tobytes()).hexdigest()


def grid_recipes(recipe: Recipe, seeds: list[int]) -> list[Recipe]:
    """One recipe per seed, everything else as in `recipe`."""
    return [recipe.replace(seed=seed) for seed in seeds]


def variation_recipes(recipe: Recipe, variations: list[str], include_base: bool = True) -> list[Recipe]:
    """The base prompt (for comparison) and each variation appended to it, all from the anchor seed."""
    prompts = ([recipe.prompt] if include_base else []) + [join_prompt(recipe.prompt, v) for v in variations]
    return [recipe.replace(prompt=prompt) for prompt in prompts]


def generate(
    model: Model, recipe: Recipe, *, progress: ProgressFn | None = None, cancel: threading.Event | None = None
) -> Result:
    """Generate one image from its recipe."""
    return next(iter_generate(model, [recipe], progress=progress, cancel=cancel))


def generate_grid(
    model: Model,
    recipe: Recipe,
    seeds: list[int],
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> list[Result]:
    """A grid: `recipe` once per seed, each image with its own generator."""
    return list(iter_generate(model, grid_recipes(recipe, seeds), progress=progress, cancel=cancel))


def generate_variations(
    model: Model,
    recipe: Recipe,
    variations: list[str],
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> list[Result]:
    """The base prompt and every variation from the anchor seed `recipe.seed`, a fresh generator each."""
    return list(iter_generate(model, variation_recipes(recipe, variations), progress=progress, cancel=cancel))


def iter_generate(
    model: Model,
    recipes: list[Recipe],
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[Result]:
    """Generate recipes one by one, yielding each result as soon as it is ready."""
    total = sum(r.num_inference_steps for r in recipes)
    done = 0
    for recipe in recipes:
        yield _generate_one(model, recipe, done, total, progress, cancel)
        done += recipe.num_inference_steps


def _noise_arguments(model: Model, recipe: Recipe) -> dict:
    """`latents` and `generator` for the pipeline call, made by noise.py."""
    try:
        noise = make_noise(model.pipeline, seed=recipe.seed, width=recipe.width, height=recipe.height,
                           device=model.device, dtype=model.pipeline.dtype, rng=recipe.rng,
                           variation_seed=recipe.variation_seed, variation_strength=recipe.variation_strength,
                           seed_resize_from=recipe.seed_resize_from)
    except ValueError:
        if not (recipe.noise_is_plain and recipe.rng in ("cpu", "device")):
            raise
        # Latents noise.py cannot shape (packed ones: Flux): diffusers draws them from the same generator itself.
        where = torch.device("cpu") if recipe.rng == "cpu" else model.device
        return {"generator": torch.Generator(where).manual_seed(recipe.seed)}
    return {"latents": noise.latents, "generator": noise.generator}


@dataclass(frozen=True)
class Progress:
    """A step finished: `done` of `total` denoising steps, counted over all images of the request."""

    done: int
    total: int


def stream(
    model: Model, recipes: list[Recipe], *, cancel: threading.Event | None = None
) -> Iterator[Progress | Result]:
    """Generate in a worker thread, yielding a Progress after every step and each Result when ready.

    The consumer regains control at every step, so closing this iterator (a closed browser tab, a
    cancelled API call) stops the work within a step: the worker sees the cancel at its next step
    callback. Errors from the worker (Cancelled, ValueError) are raised here.
    """
    cancel = cancel or threading.Event()
    events: queue.Queue = queue.Queue()
    finished = object()

    def work() -> None:
        try:
            for result in iter_generate(model, recipes, progress=lambda d, t: events.put(Progress(d, t)), cancel=cancel):
                events.put(result)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer's thread
            events.put(error)
        finally:
            events.put(finished)

    worker = threading.Thread(target=work, name="seedlab-generation", daemon=True)
    worker.start()
    try:
        while (event := events.get()) is not finished:
            if isinstance(event, BaseException):
                raise event
            yield event
    finally:
        if worker.is_alive():  # the consumer left early: stop the worker at its next step
            cancel.set()
            worker.join()


def _generate_one(
    model: Model,
    recipe: Recipe,
    done: int,
    total: int,
    progress: ProgressFn | None,
    cancel: threading.Event | None,
) -> Result:
    if recipe.dtype != model.dtype:
        raise ValueError(f"dtype {recipe.dtype} was asked for, but this model is loaded in {model.dtype}")
    pipe = model.pipeline
    scheduler = model.make_scheduler(recipe.scheduler)
    recipe = recipe.replace(model=model.name, scheduler=type(scheduler).__name__)

    def on_step_end(pipeline, step: int, timestep, tensors: dict) -> dict:
        if progress is not None:
            progress(done + step + 1, total)
        if cancel is not None and cancel.is_set():
            pipeline._interrupt = True  # diffusers' own early exit: the loop skips the remaining steps
        return tensors

    # 1. The call arguments: the names are diffusers' own, so this is what a user would type.
    arguments = {
        "prompt": recipe.prompt,
        "negative_prompt": recipe.negative_prompt or None,
        "num_inference_steps": recipe.num_inference_steps,
        "guidance_scale": recipe.guidance_scale,
        "width": recipe.width,
        "height": recipe.height,
        "output_type": "pil",
        "callback_on_step_end": on_step_end,
    }
    if recipe.negative_prompt and "negative_prompt" not in model.call_parameters:
        raise ValueError(f"negative_prompt is not supported by {type(pipe).__name__}; leave it empty")
    arguments = {k: v for k, v in arguments.items() if k in model.call_parameters}
    check_scheduler(recipe.rng, scheduler)

    # 2. Run with a fresh scheduler and fresh noise, under the requested determinism switches.
    with _LOCK, full_determinism(recipe.deterministic) as switches:
        if cancel is not None and cancel.is_set():
            raise Cancelled("generation cancelled")
        pipe.scheduler = scheduler
        image = pipe(**_noise_arguments(model, recipe), **arguments).images[0]
        environment = current_environment(model.device, pipe.dtype, switches)
    if cancel is not None and cancel.is_set():
        raise Cancelled("generation cancelled")

    # 3. Fingerprint the pixels as they will be saved.
    image = image.convert("RGB")
    return Result(recipe=recipe, image=image, fingerprint=fingerprint(image), environment=environment)
