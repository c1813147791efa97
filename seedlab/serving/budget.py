"""Budget: what a request costs in seconds on this hardware, and how much each visitor may spend.

Independent caps (images, steps, size) allow requests of a day on a CPU: 16 images x 50 steps at
1024x1024. So every request is also priced: seconds per model call, measured on the loaded model at two
sizes and fitted as `a * pixels + b * pixels**2` (convolutions grow with the pixels, attention with
their square), growing with the square beyond the sizes measured, times the calls (steps, twice for a
second-order scheduler, plus an image's own encoding and decoding) and images, plus the noise drawn. A request
over `max_request_seconds` is refused, and so is one that would take a visitor over `visitor_seconds` in any ten
minutes; the message says what to reduce.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from ..engine.recipe import Recipe
from ..engine.samplers.names import model_calls, step_draws
from ..engine.weights.lora_names import uses_of
from .limits import Limits

WINDOW_SECONDS = 600  # the per-visitor window
# What an image costs besides its steps (the prompt's encoding, the VAE's decoding, saving), in model calls of
# its size: 34 one-step grids admitted for 10 s took 31 s of CPU when only the steps were priced.
IMAGE_CALLS = 2
# Seconds per noise value drawn, by noise source, with room over what was measured on the 2-core machine, one thread,
# drawing 14.7M values (a 4096x4096 seed resize on the embedded model; 57k values cost the same or less): cpu 4.5 ns,
# numpy-pcg64 32, cuda-philox 77 to 100, numpy-mt19937 425, std-libstdc++ 29 to 34, std-libc++ 29 to 33, std-msvc 84 to
# 91. Beside a victim's grid on two lanes the same draws took up to 2.4 times as long (std-msvc: 80 s for 16 images).
NOISE_SECONDS = {"cpu": 20e-9, "device": 20e-9, "numpy-pcg64": 80e-9, "cuda-philox": 250e-9, "numpy-mt19937": 1000e-9,
                 "std-libstdc++": 80e-9, "std-libc++": 80e-9, "std-msvc": 220e-9}
# The starting noise's values per image pixel where a model is not known: a pixel-space model's 3 channels at 1/1,
# the most of any family (the embedded model 14 channels at 1/4: 0.875; SD 4 at 1/8: 0.0625; Flux 16 at 1/8).
MOST_NOISE_PER_PIXEL = 3.0
# Seconds per noise level of hires fix's schedule (steps / denoising strength of them, before a step is taken):
# ComfyUI's beta and normal schedules took 29 and 21 us each over 20,000 levels on the 2-core machine.
SCHEDULE_SECONDS = 50e-6
# A prompt's chunks of 75 tokens (long prompts and BREAK in A1111's and ComfyUI's syntaxes) each lengthen the
# UNet's cross-attention context: 32 chunks made a step 2.5x as long at 64 px and 1.9x at 128 px (embedded model).
CHUNK_STEP_SHARE = 0.06  # of a step, per chunk past the first
_BREAK = re.compile(r"\bBREAK\b")
_TOKENS = re.compile(r"[^\W\d_]+|\d|[^\w\s]")  # words, digits and signs: CLIP gives each a token at least
# A new set of LoRAs: each file read and merged into a copy of the weights it touches (0.4 to 0.8 s measured on
# the embedded model, kept ~24 MB), priced once per set in a request whether or not a copy is kept.
LORA_SET_SECONDS = 1.0
# A retry with native kernels (serving/reproduction.py) starts a worker process that imports torch and loads the
# model before its one image: 7 s of CPU on the quiet 2-core machine for the embedded model, 30 s (46 s wall,
# +600 MB) beside other requests; priced at the busy figure, on top of the image's own render.
NATIVE_START_SECONDS = 30.0
MAX_VISITORS = 4096  # visitors remembered at once; the least recently seen are forgotten first


@dataclass(frozen=True)
class Speed:
    """Seconds for one denoising step of one image with `pixels` pixels.

    Up to the largest size measured: a * pixels + b * pixels**2. Beyond it the last measurement grows
    with the square of the pixels: attention's cost takes over at sizes a start-up measurement cannot
    afford to reach (measured on the embedded model: x3 per doubled side up to 256 px, x16 from 256 to
    512), so the estimate errs towards refusing.
    """

    a: float
    b: float
    measured: int  # the largest pixel count measured

    @classmethod
    def fit(cls, small: tuple[int, float], large: tuple[int, float]) -> Speed:
        """From two measurements (pixels, seconds per step); never negative, never cheaper than measured."""
        (p1, t1), (p2, t2) = small, large
        b = max(0.0, (t2 / p2 - t1 / p1) / (p2 - p1))
        a = max(0.0, t1 / p1 - b * p1)
        return cls(a, b, p2)

    def step_seconds(self, pixels: int) -> float:
        if pixels <= self.measured:
            return self.a * pixels + self.b * pixels * pixels
        return self.step_seconds(self.measured) * (pixels / self.measured) ** 2

    def seconds(self, recipe: Recipe, noise_per_pixel: float = MOST_NOISE_PER_PIXEL) -> float:
        """Estimated seconds for one image of `recipe`: its model calls, what each image costs besides, its noise
        (`noise_per_pixel`: its model's latent values per image pixel, ModelInfo.noise_per_pixel).

        Hires fix adds its second pass: its own steps at its own size, its own noise and its schedule. A preview
        costs its short render (Recipe.rendered).
        """
        recipe = recipe.rendered
        widen = 1 + CHUNK_STEP_SHARE * (prompt_chunks(recipe) - 1)
        calls = model_calls(recipe.scheduler, recipe.num_inference_steps) + IMAGE_CALLS
        seconds = (calls * widen * self.step_seconds(recipe.width * recipe.height)
                   + noise_seconds(recipe, noise_per_pixel))
        if recipe.hires_scale:
            width, height = recipe.hires_size
            steps = recipe.hires_steps or recipe.num_inference_steps
            calls = model_calls(recipe.hires_sampler or recipe.scheduler, steps) + IMAGE_CALLS
            seconds += (calls * widen * self.step_seconds(width * height) + recipe.hires_sigma_count * SCHEDULE_SECONDS
                        + noise_values_hires(recipe, noise_per_pixel) * _per_value(recipe.rng))
        return seconds

    def request_seconds(self, recipes: list[Recipe], noise_per_pixel: Callable[[str], float] | None = None) -> float:
        """Estimated seconds for a request: its images, and each set of LoRAs it merges once (`noise_per_pixel`: a
        model's latent values per pixel by its name; unknown models are priced at the most)."""
        per_pixel = noise_per_pixel or (lambda _: MOST_NOISE_PER_PIXEL)
        lora_sets = {tuple(uses_of(recipe)) for recipe in recipes} - {()}
        return (sum(self.seconds(recipe, per_pixel(recipe.model)) for recipe in recipes)
                + len(lora_sets) * LORA_SET_SECONDS)


def prompt_chunks(recipe: Recipe) -> int:
    """The chunks of 75 tokens the longer of the two prompts takes, estimated without a tokenizer (never fewer):
    one for plain syntax (diffusers truncates), else one per BREAK-separated part and 75 tokens."""
    if recipe.prompt_syntax == "plain":
        return 1

    def chunks(text: str) -> int:
        return sum(max(1, math.ceil(len(_TOKENS.findall(part)) / 75)) for part in _BREAK.split(text))

    return max(chunks(recipe.prompt), chunks(recipe.negative_prompt))


def noise_values(recipe: Recipe, noise_per_pixel: float = MOST_NOISE_PER_PIXEL) -> int:
    """The noise values one image of `recipe` draws from its source before a hires pass, at most: the starting
    latents, drawn again with a variation seed or a seed resize (noise.make_noise: the seed's at the source size, the
    variation seed's there too, the seed's at the image's size to place them in), and what its sampler draws while
    stepping (samplers.names.step_draws: a latent a step for ancestral samplers, a Brownian tree's levels for SDE).

    A1111's GPU noise replayed on the CPU at a 4096x4096 `seed_resize_from` is 14.7M values an image on the embedded
    model (16 such images took 38 to 70 s when the count assumed 4 channels at 1/8).
    """
    own = _latent(recipe.width, recipe.height, noise_per_pixel)
    values = own
    if recipe.variation_strength > 0 or recipe.seed_resize_from:
        width, height = recipe.seed_resize_from or (recipe.width, recipe.height)
        source = _latent(width, height, noise_per_pixel)
        values += source * (2 if recipe.variation_strength > 0 else 1) + (own if recipe.seed_resize_from else 0)
    return values + own * step_draws(recipe.scheduler, recipe.num_inference_steps)


def noise_values_hires(recipe: Recipe, noise_per_pixel: float = MOST_NOISE_PER_PIXEL) -> int:
    """The noise values hires fix's second pass draws: its starting noise at its size and its sampler's step draws."""
    width, height = recipe.hires_size
    steps = recipe.hires_steps or recipe.num_inference_steps
    own = _latent(width, height, noise_per_pixel)
    return own * (1 + step_draws(recipe.hires_sampler or recipe.scheduler, steps))


def noise_seconds(recipe: Recipe, noise_per_pixel: float = MOST_NOISE_PER_PIXEL) -> float:
    """What drawing one image's noise costs before a hires pass (noise_values) from its source."""
    return noise_values(recipe, noise_per_pixel) * _per_value(recipe.rng)


def _latent(width: int, height: int, noise_per_pixel: float) -> int:
    return math.ceil(width * height * noise_per_pixel)


def _per_value(rng: str) -> float:
    return NOISE_SECONDS.get(rng, max(NOISE_SECONDS.values()))


def measure(step_seconds: Callable[[int, int], float], native: tuple[int, int]) -> Speed:
    """Fit a Speed from `step_seconds(width, height)` at the native size and at twice it."""
    width, height = native
    small = (width * height, step_seconds(width, height))
    large = (4 * width * height, step_seconds(2 * width, 2 * height))
    return Speed.fit(small, large)


class Window:
    """What each visitor used in the last WINDOW_SECONDS (a count and an amount), bounded in visitors."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._used: OrderedDict[str, deque[tuple[float, float]]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, visitor: str, amount: float, allowed: Callable[[int, float], bool]) -> tuple[int, float] | None:
        """Record `amount` for `visitor` if `allowed(count, total)` of what they used so far; else return those."""
        with self._lock:
            now = self.clock()
            used = self._used.pop(visitor, deque())
            while used and used[0][0] < now - WINDOW_SECONDS:
                used.popleft()
            self._used[visitor] = used  # most recently seen last
            while len(self._used) > MAX_VISITORS:
                self._used.popitem(last=False)
            count, total = len(used), sum(value for _, value in used)
            if not allowed(count, total):
                return count, total
            used.append((now, amount))
            return None

    def __len__(self) -> int:
        return len(self._used)


class Ledger:
    """Prices requests against the per-request limit and each visitor's share of the window."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.window = Window(clock)

    def charge(self, visitor: str | None, seconds: float) -> None:
        """Admit a request estimated at `seconds` for `visitor`, or raise ValueError saying what to reduce."""
        limit = self.limits.max_request_seconds
        if seconds > limit:
            raise ValueError(f"this request would take about {_duration(seconds)} here; one request may take at most "
                             f"{_duration(limit)} on this server: ask for fewer images, fewer steps or a smaller size")
        if visitor is None:
            return
        share = self.limits.visitor_seconds
        refused = self.window.take(visitor, seconds, lambda _, used: used + seconds <= share)
        if refused:
            raise ValueError(f"you have used about {_duration(refused[1])} of generation time in the last "
                             f"{WINDOW_SECONDS // 60} minutes; each visitor may use {_duration(share)}: wait a few "
                             "minutes or ask for less")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
