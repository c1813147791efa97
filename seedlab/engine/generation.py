"""Generation: recipes in, images out, one fresh generator per image.

Every image is its own batch-1 pipeline call with its own `torch.Generator`. That is what makes
"grid cell == solo regeneration" exact: a batched call (a generator list) is never bit-identical
to solo runs on CPU (convolution backends, GEMM blocking and GroupNorm threading depend on the
batch size), and with one shared generator only cell 0 could ever be regenerated.

Speed comes back three ways, none of which changes a pixel:
- lanes: a model may run up to `model.lanes` images at once, each in its own thread on its own
  shallow copy of the pipeline (the weights are shared; scheduler and call state are not). On a
  CPU the process pins torch to few intra-op threads (one by default in the app), which small
  latents use badly anyway, so N lanes keep N cores busy and every image is computed exactly as a
  solo run at that thread count;
- the prompt is encoded once per request and its embeddings handed to every image that uses it
  (embeddings.py: the same `encode_prompt` the pipeline would call, so the tensors are the same);
- on a CPU the lanes call the UNet through traces (tracing.py): the same kernels in the same
  order, without the Python of a few hundred module calls per step, which a batch-1 call of a
  small model spends most of its time in.

The starting noise is a value made by noise.py (latents, and the generator that stochastic
schedulers draw from afterwards) and handed to the pipeline.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from . import memory, pixels, wide
from .determinism import current_environment, full_determinism
from .image import Result, as_asked, fingerprint
from .latents import UnsupportedPipeline
from .models import Model
from .noise import check_scheduler, make_noise
from .prompts import text_inversion
from .prompts.embeddings import Embeddings
from .recipe import Recipe, join_prompt
from .samplers import a1111, apple, sdcpp, timesteps
from .samplers.comfyui import sample_comfy
from .samplers.names import is_apple, is_comfy_sampler, is_own, is_sdcpp
from .validation import check_sampling
from .weights import lora, vae
from .weights.model_info import check_unconditional

ProgressFn = Callable[[int, int], None]  # (steps done, steps in all)

# One generation at a time in a process: the determinism switches are process-wide torch state, and
# a pipeline's scheduler is swapped per recipe, so two generations must never interleave.
_LOCK = threading.Lock()


class Cancelled(Exception):
    """Raised when a generation is stopped through its cancel event."""


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
    """Generate recipes, yielding each result in order as soon as it (and those before it) are ready.

    Up to `model.lanes` consecutive recipes with the same determinism switch run at once; the lock
    and the switches are held per such chunk, never across a yield.
    """
    steps = _Steps(sum(r.total_steps for r in recipes), progress)
    encoders: dict[int, Embeddings] = {}  # one per model (a LoRA set's merged copy is a model of its own)
    chunk: list[Recipe] = []
    chunk_model = model
    resolved: dict[tuple, tuple[Model, str]] = {}  # the folder is looked up once per LoRA set
    try:
        for recipe in recipes:
            merged, recipe = lora.with_loras(model, recipe, resolved)
            merged, recipe = vae.with_vae(merged, recipe, resolved)  # a VAE of the models folder: on the LoRAs' copy
            recipe = text_inversion.with_ti_hashes(merged, recipe, resolved)
            if chunk and (len(chunk) == max(1, model.lanes) or recipe.deterministic != chunk[0].deterministic
                          or merged is not chunk_model):
                yield from _generate_chunk(chunk_model, chunk, encoders[id(chunk_model)], steps, cancel)
                chunk = []
            chunk_model = merged
            if id(merged) not in encoders:  # built once per model, not once per recipe
                encoders[id(merged)] = Embeddings(merged)
            chunk.append(recipe)
        if chunk:
            yield from _generate_chunk(chunk_model, chunk, encoders[id(chunk_model)], steps, cancel)
    finally:  # a request's buffers, freed: back to the system, or the process grows with every new size
        del chunk, encoders, resolved
        memory.give_back()


class _Steps:
    """Steps done over a whole request, counted from every lane."""

    def __init__(self, total: int, progress: ProgressFn | None):
        self.total, self.done, self.progress = total, 0, progress
        self._lock = threading.Lock()

    def advance(self) -> None:
        # Reported under the lock: lanes finish steps at once, and a count reported after a later one would send
        # the progress bar backwards. Second-order schedulers (KDPM2) call back more often than steps: the cap.
        with self._lock:
            self.done = min(self.done + 1, self.total)
            if self.progress is not None:
                self.progress(self.done, self.total)


def _generate_chunk(model: Model, chunk: list[Recipe], embeddings: Embeddings, steps: _Steps,
                    cancel: threading.Event | None) -> list[Result]:
    """Up to `model.lanes` images at once, under one lock and one setting of the switches."""
    with _LOCK, full_determinism(chunk[0].deterministic) as switches:
        if cancel is not None and cancel.is_set():
            raise Cancelled("generation cancelled")
        calls = [_prepare(model, recipe.rendered, embeddings) for recipe in chunk]  # a preview: its short render
        pipelines = model.lane_pipelines(len(chunk))
        if len(chunk) == 1:
            results = [_run(model, pipelines[0], *calls[0], switches, steps, cancel)]
        else:
            with ThreadPoolExecutor(len(chunk), thread_name_prefix="seedlab-lane") as lanes:
                futures = [lanes.submit(_run, model, pipe, *call, switches, steps, cancel)
                           for pipe, call in zip(pipelines, calls)]
                results = [future.result() for future in futures]
    if cancel is not None and cancel.is_set():
        raise Cancelled("generation cancelled")
    return [as_asked(result, recipe) for result, recipe in zip(results, chunk)]


def _noise_arguments(model: Model, recipe: Recipe) -> dict:
    """`latents` and `generator` for the pipeline call, made by noise.py."""
    try:
        noise = make_noise(model.pipeline, seed=recipe.seed, width=recipe.width, height=recipe.height,
                           device=model.device, dtype=model.pipeline.dtype, rng=recipe.rng,
                           variation_seed=recipe.variation_seed, variation_strength=recipe.variation_strength,
                           seed_resize_from=recipe.seed_resize_from)
    except UnsupportedPipeline:
        if not (recipe.noise_is_plain and recipe.rng in ("cpu", "device")):
            raise
        # Latents noise.py cannot shape (video): diffusers draws them from the same generator itself.
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
            for result in iter_generate(model, recipes, progress=lambda d, t: events.put(Progress(d, t)),
                                        cancel=cancel):
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


def _prepare(model: Model, recipe: Recipe, embeddings: Embeddings) -> tuple[Recipe, object, dict]:
    """Check a recipe against the model and build its call arguments (prompt embeddings included)."""
    if recipe.dtype != model.dtype:
        raise ValueError(f"dtype {recipe.dtype} was asked for, but this model is loaded in {model.dtype}")
    recipe = _with_model_hash(model, recipe)
    if a1111.is_ksampler(recipe.scheduler):
        return _prepare_k(model, recipe, embeddings)
    check_sampling(recipe)
    scheduler = model.make_scheduler(recipe.scheduler)
    if model.computes_wide:  # the universal baseline: betas that do not depend on the CPU (wide.py)
        scheduler = wide.exact_betas(scheduler)
    recipe = recipe.replace(model=model.name, scheduler=type(scheduler).__name__)
    unconditional = check_unconditional(model.info, recipe.prompt, recipe.negative_prompt, recipe.width, recipe.height)
    if unconditional:
        raise unconditional[0]
    if recipe.negative_prompt and "negative_prompt" not in model.call_parameters:
        raise ValueError(f"negative_prompt is not supported by {type(model.pipeline).__name__}; leave it empty")
    if recipe.negative_prompt and "true_cfg_scale" in model.call_parameters:  # Flux: ignored unless true CFG is on
        raise ValueError(f"negative_prompt has no effect on {type(model.pipeline).__name__} (guidance is distilled "
                         "into the model; it needs true CFG, which SeedLab does not run); leave it empty")
    check_scheduler(recipe.rng, scheduler)
    # The names are diffusers' own, so this is what a user would type.
    arguments = {
        **embeddings.arguments(recipe),
        "num_inference_steps": recipe.num_inference_steps,
        "guidance_scale": recipe.guidance_scale,
        "width": recipe.width,
        "height": recipe.height,
        "output_type": pixels.OUTPUT_TYPE[recipe.to_8bit],
    }
    if "use_resolution_binning" in model.call_parameters:
        # PixArt and Sana would make the image at the nearest trained aspect ratio and resize it to the size
        # asked for: SeedLab's noise is drawn at the recipe's size, so the image is made at that size.
        arguments["use_resolution_binning"] = False
    arguments = {k: v for k, v in arguments.items() if k in model.call_parameters}
    return recipe, scheduler, arguments


def _with_model_hash(model: Model, recipe: Recipe) -> Recipe:
    """The recipe as made: the A1111 hash of the checkpoint file the model was loaded from, none for a model that
    is not one (a hash another tool wrote names its file; admission and reproduce say when it is not this one)."""
    return recipe if recipe.model_hash == model.file_hash else recipe.replace(model_hash=model.file_hash)


def _prepare_k(model: Model, recipe: Recipe, embeddings: Embeddings) -> tuple[Recipe, object, dict]:
    """An A1111 sampler's recipe: checked against the model; its call arguments are the two embeddings."""
    a1111.check_recipe(model.pipeline, recipe)
    check_sampling(recipe)
    recipe = recipe.replace(model=model.name)
    encoded = embeddings.arguments(recipe, guided=True, same_length=False)
    if "prompt_embeds" not in encoded or encoded.get("negative_prompt_embeds") is None:
        raise ValueError(f"{type(model.pipeline).__name__} cannot run A1111 samplers here (its prompt encoding "
                         "cannot be reused); choose a diffusers scheduler")
    return recipe, a1111.A1111, {"cond": encoded["prompt_embeds"], "uncond": encoded["negative_prompt_embeds"]}


def _run_k(model: Model, pipe, recipe: Recipe, arguments: dict, switches, steps: _Steps,
           cancel: threading.Event | None) -> Result:
    """One image with an A1111 sampler (a1111.py) on one lane's pipeline."""

    def on_step() -> None:
        steps.advance()
        if cancel is not None and cancel.is_set():
            raise Cancelled("generation cancelled")

    with torch.inference_mode():
        if is_comfy_sampler(recipe.scheduler):  # ComfyUI's names: run as ComfyUI runs them
            latents = sample_comfy(pipe, recipe, arguments["cond"], arguments["uncond"], on_step)
        else:  # A1111's samplers (a1111.py), its own (timesteps.py: DDIM (A1111)), sd.cpp's (sdcpp.py: euler (sd.cpp)),
            # Apple's (apple.py: PNDM (Apple))
            sample = (sdcpp if is_sdcpp(recipe.scheduler) else apple if is_apple(recipe.scheduler)
                      else timesteps if is_own(recipe.scheduler) else a1111).sample
            latents = sample(pipe, a1111.model_sigmas(pipe), recipe, arguments["cond"], arguments["uncond"], on_step)
        decoded = pipe.vae.decode(latents / pipe.vae.config.scaling_factor, return_dict=False)[0]
        decoded = decoded if recipe.to_8bit == "round" else decoded.float()  # A1111, ComfyUI: float32 before (x+1)/2
        image = pipe.image_processor.postprocess(decoded, output_type=pixels.OUTPUT_TYPE[recipe.to_8bit],
                                                 do_denormalize=[True])[0]
    environment = current_environment(model.device, pipe.dtype, switches)
    image = pixels.to_rgb(image, recipe.to_8bit)
    return Result(recipe=recipe, image=image, fingerprint=fingerprint(image), environment=environment)


def _run(model: Model, pipe, recipe: Recipe, scheduler, arguments: dict, switches, steps: _Steps,
         cancel: threading.Event | None) -> Result:
    """One image on one lane's pipeline; under the universal baseline its float32 transcendentals are wide."""
    with wide.exact_math(model.computes_wide):
        return _run_lane(model, pipe, recipe, scheduler, arguments, switches, steps, cancel)


def _run_lane(model: Model, pipe, recipe: Recipe, scheduler, arguments: dict, switches, steps: _Steps,
              cancel: threading.Event | None) -> Result:
    """One image on one lane's pipeline: a fresh scheduler, fresh noise; the caller holds the lock."""
    if scheduler is a1111.A1111:
        return _run_k(model, pipe, recipe, arguments, switches, steps, cancel)

    def on_step_end(pipeline, step: int, timestep, tensors: dict) -> dict:
        steps.advance()
        if cancel is not None and cancel.is_set():
            pipeline._interrupt = True  # diffusers' own early exit: the loop skips the remaining steps
        return tensors

    if "callback_on_step_end" in model.call_parameters:
        arguments = {**arguments, "callback_on_step_end": on_step_end}
    else:  # DDIMPipeline, DDPMPipeline: no step callback, so progress and Stop ride on this scheduler's steps
        step = scheduler.step

        def counted_step(*args, **kwargs):
            if cancel is not None and cancel.is_set():
                raise Cancelled("generation cancelled")
            output = step(*args, **kwargs)
            steps.advance()
            return output

        scheduler.step = counted_step  # this run's own scheduler instance: nothing else sees it
    pipe.scheduler = scheduler
    # inference_mode: no autograd bookkeeping (no_grad keeps some); the same kernels and pixels, ~4% faster steps
    with torch.inference_mode():
        image = pipe(**_noise_arguments(model, recipe), **arguments).images[0]
    environment = current_environment(model.device, pipe.dtype, switches)
    image = pixels.to_rgb(image, recipe.to_8bit)  # fingerprinted as it will be saved
    return Result(recipe=recipe, image=image, fingerprint=fingerprint(image), environment=environment)
