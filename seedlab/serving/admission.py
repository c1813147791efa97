"""Admission: what this server accepts, shared by the app, the API and the CLI.

Untrusted values (widgets, API keywords, a link, a PNG) become validated Recipes here: unset fields
take the *chosen* model's defaults (native size, guidance), the model must be allowed, the scheduler
offered by it, the request within the host's limits and compute budget. Nothing here loads a model:
models are described from their config files (model_info.ModelInfo).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..engine.generation import generate, grid_recipes, variation_recipes
from ..engine.models import Model, ModelStore
from ..engine.noise import check_scheduler
from ..engine.prompts import text_inversion
from ..engine.recipe import COMFY_SCHEDULES, DEFAULT_SCHEDULER, SPECS, FieldError, Recipe, RecipeError
from ..engine.samplers.names import is_comfy_sampler, is_ksampler
from ..engine.seeds import parse_seeds
from ..engine.validation import sampling_errors, stream_errors
from ..engine.weights import checkpoint_files, lora_names, vae_names
from ..engine.weights.model_info import check_unconditional
from .budget import MOST_NOISE_PER_PIXEL, NATIVE_START_SECONDS, Ledger, Speed, measure
from .conventions import renders
from .limits import Limits
from .reproduction import Original, may_retry_natively

MAX_CHECKED = 4096  # scheduler answers kept: every model x scheduler x rng x step count a server sees
_SYNTAX_NAMES = {"a1111": "A1111's", "comfyui": "ComfyUI's", "novelai": "NovelAI's"}
_SYNTAX_MODELS = {"a1111": "Stable Diffusion 1.x, 2.x and SDXL", "comfyui": "Stable Diffusion 1.x and 2.x",
                  "novelai": "Stable Diffusion 1.x and 2.x"}


def measure_speed(model: Model, repeats: int = 3) -> Speed:
    """Seconds per step of `model` on this hardware, at its native size and twice it.

    The difference between 1-step and 5-step images is four steps' time, without the text encoder and
    the VAE; each is the fastest of `repeats` runs (timings on a shared machine only err upwards).
    """
    def fastest(recipe: Recipe) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            generate(model, recipe)
            times.append(time.perf_counter() - start)
        return min(times)

    def step_seconds(width: int, height: int) -> float:
        if model.info.unconditional:  # it makes its native size only, whatever the size asked for
            width, height = model.native_size
        recipe = Recipe(prompt="" if model.info.unconditional else "a", model=model.name, num_inference_steps=1,
                        width=width, height=height, guidance_scale=model.default_guidance, dtype=model.dtype)
        one, five = fastest(recipe), fastest(recipe.replace(num_inference_steps=5))
        return max((five - one) / 4, five / 10)  # the floor: noise cannot make a step look free

    return measure(step_seconds, model.native_size)


def comfy_schedule(scheduler: Any, schedule: Any) -> Any:
    """A ComfyUI sampler's schedule in ComfyUI's spelling: "Karras" or "SGM Uniform" (A1111's words, the page's
    menu) name ComfyUI's karras and sgm_uniform; any other schedule, or another sampler, is left as written."""
    if not (isinstance(scheduler, str) and is_comfy_sampler(scheduler) and isinstance(schedule, str)):
        return schedule
    spelled = schedule.strip().lower().replace(" ", "_")
    return spelled if spelled in COMFY_SCHEDULES else schedule


@dataclass(frozen=True)
class FileAdmission:
    """What admit_file made of a dropped file: its original as this server runs it (checked when `refused` is
    None), else the original with every field kept, why it is refused, and the nearest runnable recipe."""

    original: Original
    refused: ValueError | None = None
    nearest: Recipe | None = None


class Admission:
    """The host's policy: allowed models (ModelStore), limits, the compute budget."""

    def __init__(self, store: ModelStore, limits: Limits | None = None, speed: Speed | None = None,
                 native_retry: bool = False):
        self.store = store
        self.limits = limits or Limits()
        self.speed = speed  # seconds per step, measured on the default model; None: no budget check
        # An old original whose pixels differ is made again with native kernels in a process of its own only where
        # the host allows it (app.py --native-retry): a process start costs ~140 times a small image's price.
        self.native_retry = native_retry
        self.ledger = Ledger(self.limits)
        self._checked: dict[tuple, tuple[FieldError, ...]] = {}  # (model, scheduler, rng, steps) -> refusals
        self._lock = threading.Lock()

    def defaults(self, model: str | None = None) -> dict[str, Any]:
        """Every field's starting value for `model` (the default model when None)."""
        info = self.store.info(model or self.store.default)
        width, height = info.native_size
        values = {name: getattr(Recipe, name) for name in SPECS if hasattr(Recipe, name)}
        return {**values, "prompt": "", "model": info.name, "guidance_scale": info.default_guidance,
                "num_inference_steps": info.default_steps, "width": width, "height": height, "dtype": self.store.dtype}

    def recipe(self, values: Mapping[str, Any]) -> Recipe:
        """A validated Recipe from untrusted values keyed by field name; None or "" (but for text) means unset."""
        unknown = sorted(str(name)[:40] for name in set(values) - set(SPECS))
        if unknown:
            raise ValueError(f"unknown recipe field(s): {', '.join(unknown)}")
        errors: list[FieldError] = []
        model = values.get("model") or self.store.default
        try:
            model = self.store.check(model)
        except FieldError as error:  # named once: the recipe goes on with the default model
            errors.append(error)
            model, values = self.store.default, {**values, "model": None}
        fields = self.defaults(model)
        for name, value in values.items():
            if value is None or (value == "" and SPECS[name].kind not in ("text", "size")):
                continue
            fields[name] = SPECS[name].coerce(value)
        fields["schedule"] = comfy_schedule(fields.get("scheduler"), fields.get("schedule"))
        try:
            recipe = Recipe(**fields)
        except RecipeError as error:  # a range refusal names this server's narrower limit beside the recipe's
            raise RecipeError(errors + self.limits.narrowed(error).errors) from None
        errors += self._server_errors(recipe)
        if errors:
            raise RecipeError(errors)
        return recipe

    def _server_errors(self, recipe: Recipe) -> list[FieldError]:
        """What this server refuses in an otherwise valid recipe: limits, dtype, scheduler, noise source."""
        errors: list[FieldError] = []
        try:
            self.limits.check_recipe(recipe)
        except RecipeError as error:
            errors += error.errors
        try:
            self.store.check_dtype(recipe.dtype)
        except FieldError as error:
            errors.append(error)
        try:
            info = self.store.info(recipe.model)
            errors += check_unconditional(info, recipe.prompt, recipe.negative_prompt, recipe.width, recipe.height)
        except FieldError as error:
            return errors + [error]
        if not info.reads(recipe.prompt_syntax):
            errors.append(FieldError("prompt_syntax", f"{recipe.prompt_syntax} is read for "
                                                      f"{_SYNTAX_MODELS[recipe.prompt_syntax]}; {recipe.model} reads "
                                                      "prompts its own way: use plain"))
        errors += lora_names.missing(recipe) + vae_names.errors(recipe)
        if recipe.model_hash and (problem := checkpoint_files.hash_problem(recipe.model, recipe.model_hash)):
            errors.append(FieldError("model_hash", problem))
        errors += sampling_errors(recipe) + list(self._scheduler_errors(recipe.model, recipe.scheduler, recipe.rng,
                                                                        recipe.num_inference_steps))
        return errors + stream_errors(recipe)

    def _scheduler_errors(self, model: str, name: str, rng: str, steps: int) -> tuple[FieldError, ...]:
        """What the scheduler refuses (a noise source, a step count); each combination is worked out once.

        Stepping a scheduler to see whether it draws noise costs milliseconds; a history, a plot or an
        import checks hundreds of cells, mostly alike, so the answers are kept (a bounded number of them).
        """
        key = (model, name, rng, steps)
        if key in self._checked:
            return self._checked[key]
        errors: list[FieldError] = []
        if is_ksampler(name):  # A1111's samplers: the model must run them, the noise source must draw their noise
            try:
                self.store.info(model).scheduler_name(name)
            except FieldError as error:
                return (error,)
            if is_comfy_sampler(name) and rng != "cpu":
                return (FieldError("rng", f"must be cpu with ComfyUI's {name} (ComfyUI draws its noise on the CPU)"),)
            return ()
        try:
            scheduler = self.store.info(model).make_scheduler(name)
        except FieldError as error:
            return (error,)
        try:
            check_scheduler(rng, scheduler)
        except ValueError as error:  # the noise source cannot drive this scheduler
            errors.append(FieldError("rng", f"cannot be used here: {error}"))
        try:  # some schedulers cannot make a schedule this short (PNDM's warm-up steps): say so, not numpy's words
            shift = {"mu": 1.0} if scheduler.config.get("use_dynamic_shifting") else {}  # Flux's resolution shift
            scheduler.set_timesteps(steps, **shift)
        except Exception:  # noqa: BLE001 - any failure here would fail the generation the same way
            errors.append(FieldError("num_inference_steps", f"cannot be {steps} with {type(scheduler).__name__}: use "
                                                            "more steps or another scheduler"))
        with self._lock:  # requests are checked on many threads at once
            if len(self._checked) >= MAX_CHECKED:
                self._checked.pop(next(iter(self._checked)))
            self._checked[key] = tuple(errors)
        return tuple(errors)

    def grid(self, values: Mapping[str, Any], seeds: str) -> list[Recipe]:
        """One recipe per seed ("42", "0-7", "3, 17, 99"; -1 a random one, as in A1111), within the image limit."""
        seed_list = parse_seeds(seeds, random_allowed=True)
        self.limits.check_count(len(seed_list), "seeds")
        return grid_recipes(self.recipe({**values, "seed": seed_list[0]}), seed_list)

    def nudges(self, anchor: Mapping[str, Any], variation_seeds: list[int], strength: Any) -> list[Recipe]:
        """Nudges around an anchor: its recipe with each variation seed at `strength`, within the image limit."""
        self.limits.check_count(len(variation_seeds), "seeds")
        base = self.recipe({**anchor, "variation_seed": variation_seeds[0], "variation_strength": strength})
        return [base.replace(variation_seed=seed) for seed in variation_seeds]

    def variations(self, values: Mapping[str, Any], lines: list[str]) -> list[Recipe]:
        """The base prompt and each variation line appended to it; every joined prompt is within the limits."""
        lines = [line for line in lines if line.strip()]
        if not lines:
            raise ValueError('variations: write at least one, one per line, such as ", highly realistic"')
        self.limits.check_count(len(lines), "variations")
        recipes = variation_recipes(self.recipe(values), lines)
        for recipe in recipes[1:]:  # a joined prompt can pass the limit that each part kept
            self.limits.check_recipe(recipe)
        return recipes

    def charge(self, recipes: list[Recipe], visitor: str | None, extra_seconds: float = 0.0) -> float:
        """Price a request on this hardware and charge it to `visitor`; ValueError saying what to reduce.
        `extra_seconds`: work besides the recipes' renders (a worker process's start)."""
        if self.speed is None:
            return 0.0
        seconds = self.speed.request_seconds(recipes, self.noise_per_pixel) + extra_seconds
        self.ledger.charge(visitor, seconds)
        return seconds

    def noise_per_pixel(self, model: str) -> float:
        """A model's starting-noise values per image pixel (the budget's count); the most where it cannot be read."""
        try:
            return self.store.info(model).noise_per_pixel
        except FieldError:
            return MOST_NOISE_PER_PIXEL

    def charge_reproduction(self, original: Original, visitor: str | None) -> float:
        """Charge what regenerating `original` may render, before anything starts: its recipe, the other convention
        a file's pixels may need (conventions.py), and a retry with native kernels (its process start and its
        render) where this server offers one."""
        recipes, extra = renders(original), 0.0
        if self.native_retry and may_retry_natively(original, self.store.device.type):
            recipes, extra = [*recipes, original.recipe], NATIVE_START_SECONDS
        return self.charge(recipes, visitor, extra)

    def original(self, original: Original) -> Original:
        """An untrusted original (a link, recipe JSON) checked against this server: anything it cannot run is an
        error naming the field. A dropped file, perhaps another tool's, goes through admit_file instead."""
        return dataclasses.replace(original, recipe=self.recipe(original.recipe.to_dict()))

    def admit_file(self, original: Original) -> FileAdmission:
        """A dropped file's original in one pass: adapted to this server (a note for each thing replaced), then
        checked and priced. A recipe this server cannot run keeps every field, with the refusal and the nearest
        recipe the server runs (None when no smaller or shorter render would pass)."""
        adapted = self.adapt(original)
        try:
            checked = self.original(adapted)
            self.price(checked.recipe)
        except ValueError as error:
            return FileAdmission(adapted, error, self.nearest(adapted.recipe))
        return FileAdmission(checked)

    def adapt(self, original: Original) -> Original:
        """An original from another tool with what this server lacks replaced, and a note for each: its model,
        dtype or scheduler become the server's defaults. Nothing is checked against the limits here."""
        recipe, notes = original.recipe, list(original.notes)
        recipe, found = checkpoint_files.resolve_hash(recipe)
        notes += found
        if recipe.model not in self.store.allowed:
            hashed = f" (checkpoint hash {recipe.model_hash})" if recipe.model_hash else ""
            notes.append(f"model {recipe.model}{hashed} is not available on this server: {self.store.default} is used")
            if recipe.vae or recipe.vae_hash:  # a VAE for another model (a Flux one, 16 channels) may not fit it
                notes.append(f"VAE {recipe.vae or recipe.vae_hash} was used with {recipe.model}: {self.store.default} "
                             "decodes with its own VAE")
            recipe = recipe.replace(model=self.store.default, model_hash="", vae="", vae_hash="")
        elif recipe.model_hash and checkpoint_files.find_checkpoint(recipe.model) is None:
            notes.append(f"Model hash {recipe.model_hash} is not checked: {recipe.model} is not a checkpoint file here")
            recipe = recipe.replace(model_hash="")
        if recipe.dtype != self.store.dtype:
            notes.append(f"dtype {recipe.dtype} is not served here: {self.store.dtype} is used")
            recipe = recipe.replace(dtype=self.store.dtype)
        info = self.store.info(recipe.model)
        if not info.reads(recipe.prompt_syntax):
            notes.append(f"its prompt is written in {_SYNTAX_NAMES[recipe.prompt_syntax]} syntax, which SeedLab reads "
                         f"for {_SYNTAX_MODELS[recipe.prompt_syntax]} only: {recipe.model} reads it as plain text, so "
                         "its weights are not applied")
            recipe = recipe.replace(prompt_syntax="plain", emphasis="Original", clip_skip=1)
        elif recipe.prompt_syntax == "a1111" and recipe.clip_skip > 2 and not info.a1111:  # SDXL (2: the same layer)
            notes.append(f"Clip skip {recipe.clip_skip} is written by A1111 on SDXL but applied only with its setting "
                         "\"Clip skip SDXL\" (sdxl_clip_l_skip), off by default: it is not applied here, as A1111 "
                         "does by default (an image made with that setting on differs)")
        recipe, missing = lora_names.adapt(recipe)
        notes += missing + text_inversion.missing_notes(recipe.ti_hashes)
        recipe, missing = vae_names.adapt(recipe)
        notes += missing
        offered = self.store.info(recipe.model).offered()
        if recipe.scheduler != DEFAULT_SCHEDULER and recipe.scheduler not in offered and not (
                is_ksampler(recipe.scheduler) and self.store.info(recipe.model).a1111):
            notes.append(f"scheduler {recipe.scheduler} is not offered by this model: its default is used")
            recipe = recipe.replace(scheduler=DEFAULT_SCHEDULER)
        if recipe.rng != "cpu" and not is_ksampler(recipe.scheduler):  # A1111's GPU noise (cuda-philox) cannot
            # drive a diffusers scheduler that draws while stepping (A1111's own samplers draw NV's noise)
            try:
                check_scheduler(recipe.rng, self.store.info(recipe.model).make_scheduler(recipe.scheduler))
            except FieldError:
                pass  # an unknown scheduler: refused later, with its own message
            except ValueError:
                notes.append(f"its sampler draws noise at every step, which rng {recipe.rng} cannot drive here: rng "
                             "cpu is used, so the composition differs from the original (a sampler that draws "
                             "nothing while stepping keeps the original's starting noise)")
                recipe = recipe.replace(rng="cpu")
        return dataclasses.replace(original, recipe=recipe, notes=tuple(notes))

    def price(self, recipe: Recipe) -> None:
        """Refuse one image this server would never run (over the per-request time), saying so; no charge."""
        if self.speed is not None:
            Ledger(self.limits).charge(None, self.speed.seconds(recipe, self.noise_per_pixel(recipe.model)))

    def nearest(self, recipe: Recipe) -> Recipe | None:
        """The nearest recipe this server runs for one refused for its size, steps, time or text, else None.

        The same seed at the largest size within the limits and the per-request time (the aspect kept, multiples
        of 8), at most max_steps steps, with the noise still drawn at the original size (seed_resize_from), so the
        composition stays; a prompt or negative prompt over the limit cut at its last comma (else word) within it
        (shortened). It is not the original image.
        """
        limit = self.limits.max_prompt_chars
        original, recipe = recipe, recipe.replace(prompt=shortened(recipe.prompt, limit),
                                                  negative_prompt=shortened(recipe.negative_prompt, limit))
        size = recipe.seed_resize_from or (recipe.width, recipe.height)
        steps = min(recipe.num_inference_steps, self.limits.max_steps)
        scale = min(1.0, self.limits.max_size / max(recipe.width, recipe.height))
        while True:
            width, height = (max(32, int(side * scale) // 8 * 8) for side in (recipe.width, recipe.height))
            candidate = recipe.replace(width=width, height=height, num_inference_steps=steps, seed_resize_from=size)
            if candidate.seed_resize_from == (width, height):
                candidate = candidate.replace(seed_resize_from=None)
            affordable = self.speed is None or (self.speed.seconds(candidate, self.noise_per_pixel(candidate.model))
                                                <= self.limits.max_request_seconds)
            if affordable or max(width, height) <= 64:
                break
            scale *= 0.9
        if not affordable or candidate == original:
            return None
        try:
            return self.recipe(candidate.to_dict())
        except ValueError:  # refused for something no smaller or shorter recipe changes (its noise source, a LoRA)
            return None


def shortened(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut after its last whole comma-separated part (else its last whole word)
    that fits: a prompt too long for this server keeps its first parts, which A1111 and ComfyUI weigh the most."""
    if len(text) <= limit:
        return text
    head = text[:limit + 1]  # a separator just past the limit still ends a part that fits
    for mark in (",", " "):
        cut = head.rfind(mark)
        if cut >= limit // 2:  # not so early that most of what fits is lost
            return text[:cut].rstrip(" ,\n")
    return text[:limit].rstrip(" ,\n")
