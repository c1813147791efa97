"""Noise: a recipe's starting latents and the generator its scheduler draws later steps from.

Generation hands both to the pipeline: `pipe(..., latents=noise.latents, generator=noise.generator)`.
Sources (`rng`):
- "cpu": plain diffusers with `generator=torch.Generator("cpu").manual_seed(seed)`, bit for bit, as an AVX2
  x86-64 build of torch computes it, on any machine (cpu_noise.py: an ARM torch's own CPU randn has other low
  bits). `randn_tensor` draws the latents on that generator as diffusers' does, and the same generator, now past
  the latents, is what ancestral/SDE schedulers draw their per-step noise from. `route_cpu_draws` sends those
  draws (diffusers' `randn_tensor` in every scheduler and pipeline module, torchsde's Brownian trees) through
  cpu_noise too; the samplers of A1111, ComfyUI and sd.cpp call cpu_noise.randn themselves.
- "device": the same with the generator on the model's device (on a CPU it is "cpu", computed as above; a GPU's
  generator draws its own noise).
- "numpy-pcg64": mindone.diffusers' noise on Ascend, `np.random.Generator(np.random.PCG64(seed))
  .standard_normal((1, C, h, w))` in float64, cast once to the model's dtype. diffusers' torch
  schedulers cannot draw their per-step noise from a numpy generator, so this source only drives
  schedulers that draw nothing while stepping (`check_scheduler` refuses the others) and hands
  the pipeline no generator.
- "cuda-philox": what torch.randn gives on a CUDA GPU, computed on the CPU (philox.py; A1111's "NV"
  source) in float32 and cast once to the model's dtype, on any machine. As with numpy-pcg64, only
  schedulers that draw nothing while stepping can run with it, and the pipeline gets no generator.
- "numpy-mt19937", "std-libstdc++", "std-libc++", "std-msvc": Apple's Core ML pipeline's and stable-diffusion.cpp's
  noise (random_sources.py), drawn as cuda-philox is: float32 on the CPU, cast once, no generator for later steps.

Seed fields, with AUTOMATIC1111's meaning (modules/rng.py, ImageRNG.first):
- variation_seed / variation_strength: the seed's noise and the variation seed's noise are
  interpolated spherically (A1111's slerp); the per-step generator stays the main seed's.
- seed_resize_from (width, height): the noise is drawn at that size and centred in the target
  size, cropped or padded with the seed's own target-size noise. Variation happens first, at the
  drawn size, as in A1111.
Both are computed in float32 on the noise source's device (the CPU for every source but "device", so the
result does not depend on the hardware) and cast to the model's dtype at the end.
"""

from __future__ import annotations

import copy
import inspect
import math
import sys
import threading
from dataclasses import dataclass

import numpy as np
import torch
from diffusers.utils import torch_utils

from . import cpu_noise, random_sources
from .latents import latent_shape, pack, size_multiple
from .philox import cuda_normal
from .recipe import MAX_SEED, MAX_SIZE, RNG_SOURCES  # torch's manual_seed takes 0..2**64-1; PCG64 any int >= 0

MAX_NOISE_ELEMENTS = 2**26  # 256 MB of float32; the largest latents (16 x 512 x 512) have 2**22
CPU_SOURCES = ("cpu", "numpy-pcg64", "cuda-philox", *random_sources.SOURCES)  # the same numbers on any machine
_NO_GENERATOR = ("numpy-pcg64", "cuda-philox", *random_sources.SOURCES)  # no step noise for diffusers' schedulers
PARALLEL_DOT = 0.9995  # A1111's threshold: above it the noises are nearly parallel and slerp is unstable
PROBE_STEPS = 4  # enough for multistep and second-order schedulers to reach the steps that draw
_NUMPY_DTYPES = {torch.float32: np.float32, torch.float16: np.float16, torch.float64: np.float64}
_DIFFUSERS_RANDN_TENSOR = torch_utils.randn_tensor
_ROUTING = threading.Lock()


@dataclass(frozen=True, eq=False)  # eq=False: tensors have no single truth value to compare by
class Noise:
    """A recipe's starting noise, and the generator the scheduler draws later steps from."""

    latents: torch.Tensor  # (1, C, h, w), packed where the pipeline packs (Flux); model's device and dtype, unscaled
    generator: torch.Generator | None  # None where nothing may draw (rng numpy-pcg64, cuda-philox)


def make_noise(
    pipeline,
    *,
    seed: int,
    width: int,
    height: int,
    device: torch.device,
    dtype: torch.dtype,
    rng: str = "cpu",
    variation_seed: int = 0,
    variation_strength: float = 0.0,
    seed_resize_from: tuple[int, int] | None = None,
) -> Noise:
    """The starting latents and per-step generator for one image."""
    route_cpu_draws()  # the scheduler's step noise, drawn by diffusers or torchsde, is exact CPU noise too
    _check_rng(rng)
    _check_seed("seed", seed)
    _check_seed("variation_seed", variation_seed)
    _check_strength(variation_strength)
    device = torch.device(device)
    shape = latent_shape(pipeline, width, height)
    multiple = size_multiple(pipeline)
    for name, value in (("width", width), ("height", height)):
        if int(value) % multiple:
            raise ValueError(f"{name} must be a multiple of {multiple} for {type(pipeline).__name__} "
                             f"(its latents come in {multiple}-pixel patches), got {value}")
    source_shape = shape if seed_resize_from is None else _resize_shape(pipeline, seed_resize_from)

    # 1. The seed's own latents, drawn as plain diffusers draws them. For torch sources this also
    #    leaves the generator exactly where diffusers leaves it for the scheduler's per-step noise.
    if rng == "numpy-pcg64":
        generator = None
        latents = _numpy_noise(seed, shape, dtype).to(device)
    elif rng in _NO_GENERATOR:  # cuda-philox and the other tools' sources
        generator = None
        latents = randn(seed, shape, rng).to(device=device, dtype=dtype)  # float32, as the tool draws it, cast once
    else:
        generator = torch.Generator(_generator_device(rng, device)).manual_seed(seed)
        latents = randn_tensor(shape, generator=generator, device=device, dtype=dtype)
    if variation_strength == 0 and source_shape == shape:
        return Noise(pack(pipeline, latents), generator)  # the plain seed: no arithmetic touches its bits

    # 2. Variation, then resize, in A1111's order, from fresh sources in float32.
    noise = _first_noise(rng, seed, source_shape, device)
    if variation_strength > 0:
        other = _first_noise(rng, variation_seed, source_shape, device)
        noise = slerp(variation_strength, noise[0], other[0])[None]
    if source_shape != shape:
        noise = place_centred(noise, _first_noise(rng, seed, shape, device))
    return Noise(pack(pipeline, noise.to(device=device, dtype=dtype)), generator)


def randn(seed: int, shape: tuple[int, ...], rng: str = "cpu") -> torch.Tensor:
    """The float32 CPU tensor of shape `shape` that the `rng` source seeded with `seed` draws first.

    "cpu": torch.randn with a CPU generator; "numpy-pcg64": numpy's PCG64 standard normals (float64, cast to
    float32); "cuda-philox": torch.randn on a CUDA GPU, for tensors of up to philox.CUDA_CARDS elements; the other
    tools' sources as random_sources.normals draws them, row-major. ("device" draws on the model's device: none here.)
    """
    if rng not in CPU_SOURCES:
        raise ValueError(f"rng must be one of {', '.join(CPU_SOURCES)} (device draws on the model's device, not "
                         f"here), got {rng!r:.60}")
    _check_seed("seed", seed)
    shape = _check_shape(shape)
    if rng == "numpy-pcg64":
        return _numpy_noise(seed, shape, torch.float32)
    if rng == "cuda-philox":
        return torch.from_numpy(cuda_normal(seed, math.prod(shape)).reshape(shape))
    if rng in random_sources.SOURCES:
        return torch.from_numpy(random_sources.normals(rng, seed, math.prod(shape)).reshape(shape))
    return cpu_noise.randn(shape, torch.Generator("cpu").manual_seed(seed))


def randn_tensor(shape, generator=None, device=None, dtype=None, layout=None) -> torch.Tensor:
    """diffusers' `randn_tensor`, with CPU generators' draws made by cpu_noise: torch's AVX2 values on any machine.

    The same arguments and result as diffusers' own (a list of generators draws one batch row each, on the CPU,
    then moves to `device`); without a generator, with a GPU one or a sparse layout it is diffusers' own call.
    """
    generators = generator if isinstance(generator, list) else [generator]
    on_cpu = all(isinstance(each, torch.Generator) and each.device.type == "cpu" for each in generators)
    if generator is None or not on_cpu or layout not in (None, torch.strided):
        return _DIFFUSERS_RANDN_TENSOR(shape, generator=generator, device=device, dtype=dtype, layout=layout)
    dtype, device = dtype or torch.get_default_dtype(), torch.device(device or "cpu")
    if len(generators) == 1:
        return cpu_noise.randn(tuple(shape), generators[0], dtype).to(device)
    rows = [cpu_noise.randn((1, *shape[1:]), generators[row], dtype) for row in range(shape[0])]
    return torch.cat(rows).to(device)


def torchsde_randn(size, dtype, device, seed) -> torch.Tensor:
    """torchsde's `_randn` (a Brownian tree's draw from a fresh generator on `device`), by cpu_noise on a CPU."""
    generator = torch.Generator(device).manual_seed(int(seed))
    return cpu_noise.randn(tuple(size), generator, dtype).to(device)


def route_cpu_draws() -> None:
    """Send diffusers' and torchsde's CPU-generator draws through cpu_noise; once per process, any thread.

    diffusers' schedulers and pipelines import `randn_tensor` by name (`from ..utils.torch_utils import
    randn_tensor`): each loaded module's name is replaced, and torch_utils' own for modules imported later.
    torchsde's trees (A1111's, ComfyUI's and diffusers' SDE samplers) draw with brownian_interval's `_randn`,
    replaced unless a wrapper that ends in torchsde_randn is there already (samplers/a1111.py's).
    """
    with _ROUTING:
        if torch_utils.randn_tensor is randn_tensor:
            return
        for module in list(sys.modules.values()):
            if getattr(module, "__dict__", {}).get("randn_tensor") is _DIFFUSERS_RANDN_TENSOR:
                module.randn_tensor = randn_tensor
        try:
            from torchsde._brownian import brownian_interval
        except ImportError:  # without torchsde no tree draws
            return
        if getattr(brownian_interval._randn, "__module__", None) == brownian_interval.__name__:
            brownian_interval._randn = torchsde_randn


def slerp(strength: float, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """A1111's slerp from `low` (strength 0) to `high` (strength 1) of one image's (C, h, w) noise.

    As in A1111, the angle is taken per (channel, column): vectors along the height axis (dim 1).
    When the noises are nearly parallel (mean cosine above 0.9995) the angle is too small to divide
    by, and a linear interpolation is used instead. A1111 swaps the weights there (strength 0.1
    gives 90% of the variation noise); this is the correct lerp, low*(1-s) + high*s. Between two
    different seeds that branch is practically never taken, so results match A1111's (which also
    gives NaN where a single column has no angle; those columns are lerped here).
    """
    low_unit = low / torch.norm(low, dim=1, keepdim=True)
    high_unit = high / torch.norm(high, dim=1, keepdim=True)
    cosine = (low_unit * high_unit).sum(1)  # (C, w)
    if cosine.mean() > PARALLEL_DOT:
        return low * (1.0 - strength) + high * strength
    omega = torch.acos(cosine.clamp(-1.0, 1.0))  # rounding can step past +-1, where acos is NaN
    sin_omega = torch.sin(omega)
    low_weight = torch.sin((1.0 - strength) * omega) / sin_omega
    high_weight = torch.sin(strength * omega) / sin_omega
    # A column at cosine +-1 (always so for one-row noise) has no plane to turn in: sin(omega) is 0,
    # or about 1e-7 at a rounded pi, and the weights blow up. Lerp those columns instead.
    flat = cosine.abs() >= 1.0
    low_weight = torch.where(flat, 1.0 - strength, low_weight).unsqueeze(1)
    high_weight = torch.where(flat, strength, high_weight).unsqueeze(1)
    return low_weight * low + high_weight * high


def place_centred(noise: torch.Tensor, canvas: torch.Tensor) -> torch.Tensor:
    """`noise` centred in a copy of `canvas` (both (1, C, h, w)), cropped or padded per axis, as A1111 does."""
    (top, source_top, rows), (left, source_left, cols) = (
        _centred_span(canvas.shape[axis], noise.shape[axis]) for axis in (2, 3)
    )
    placed = canvas.clone()
    placed[:, :, top : top + rows, left : left + cols] = noise[
        :, :, source_top : source_top + rows, source_left : source_left + cols
    ]
    return placed


def draws_noise(scheduler) -> bool:
    """Does this scheduler consume the generator while stepping? Found by stepping a copy of it."""
    if "generator" not in inspect.signature(scheduler.step).parameters:
        return False  # pipelines hand the generator only to a step that takes one
    generator = torch.Generator("cpu").manual_seed(0)
    before = generator.get_state()
    try:
        _step_through(copy.deepcopy(scheduler), generator)  # a copy: stepping changes a scheduler's state
    except Exception:  # noqa: BLE001 - a scheduler we cannot probe counts as drawing: refusing is safe
        return True
    return not torch.equal(generator.get_state(), before)


def check_scheduler(rng: str, scheduler) -> None:
    """Raise ValueError when noise from `rng` cannot drive `scheduler` faithfully."""
    _check_rng(rng)
    if rng in _NO_GENERATOR and draws_noise(scheduler):
        also = " (or rng device on a CUDA GPU, whose own generator is Philox)" if rng == "cuda-philox" else ""
        raise ValueError(
            f"rng {rng} cannot drive {type(scheduler).__name__}, which draws noise at every step: "
            f"pick a deterministic scheduler (Euler, DDIM, DPM++ 2M, ...) or rng cpu{also}"
        )


def _step_through(scheduler, generator: torch.Generator) -> None:
    """Run a short fresh schedule on a tiny tensor with the step arguments a pipeline uses (DDIM's eta 0).

    `set_timesteps` starts the schedule afresh (step index, multistep history), as a pipeline does.
    """
    # Flow-matching schedulers with dynamic shifting need the resolution-dependent shift mu.
    shift = {"mu": 1.0} if scheduler.config.get("use_dynamic_shifting") else {}
    scheduler.set_timesteps(PROBE_STEPS, **shift)
    sample = torch.linspace(-1.0, 1.0, 4 * 8 * 8).reshape(1, 4, 8, 8)
    model_output = sample.flip(-1) * 0.5
    scale = getattr(scheduler, "scale_model_input", None)  # flow-matching schedulers have none
    for timestep in scheduler.timesteps:
        if scale is not None:
            scale(sample, timestep)  # some schedulers track their step index from here
        sample = scheduler.step(model_output, timestep, sample, generator=generator, return_dict=False)[0]


def _first_noise(rng: str, seed: int, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """The first float32 noise of a fresh `rng` source seeded with `seed`, on the source's device."""
    if rng in CPU_SOURCES:
        return randn(seed, shape, rng)
    generator = torch.Generator(_generator_device(rng, device)).manual_seed(seed)
    return randn_tensor(shape, generator=generator, device=generator.device, dtype=torch.float32)


def _numpy_noise(seed: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """mindone's draw: PCG64 standard normals in float64, cast once to `dtype` (on the CPU)."""
    values = np.random.Generator(np.random.PCG64(seed)).standard_normal(shape)
    if dtype in _NUMPY_DTYPES:  # numpy rounds float64 -> float16 directly; torch goes through float32
        return torch.from_numpy(values.astype(_NUMPY_DTYPES[dtype]))
    return torch.from_numpy(values).to(dtype)  # bfloat16, which numpy lacks


def _generator_device(rng: str, device: torch.device) -> torch.device:
    return torch.device("cpu") if rng == "cpu" else device


def _centred_span(target: int, source: int) -> tuple[int, int, int]:
    """(start in target, start in source, length) of `source` centred in `target` along one axis.

    A1111's floor division: an odd excess is cropped by the larger half on both sides, so the last
    row or column keeps the target-size noise; an odd shortfall leaves the extra row at the end.
    """
    offset = (target - source) // 2
    if offset >= 0:
        return offset, 0, source
    return 0, -offset, source + 2 * offset


def _resize_shape(pipeline, size: tuple[int, int]) -> tuple[int, ...]:
    allowed = f"a (width, height) pair of integers from 1 to {MAX_SIZE}"
    if not isinstance(size, (tuple, list)) or len(size) != 2:
        raise ValueError(f"seed_resize_from must be {allowed}, got {size!r}")
    if any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_SIZE for v in size):
        raise ValueError(f"seed_resize_from must be {allowed}, got {size[0]!r}x{size[1]!r}")
    shape = latent_shape(pipeline, *size)
    if min(shape[2:]) < 1:
        scale = pipeline.vae_scale_factor
        raise ValueError(f"seed_resize_from must be at least {scale}x{scale} for this model, got {size[0]}x{size[1]}")
    return shape


def _check_rng(rng: str) -> None:
    if rng not in RNG_SOURCES:
        raise ValueError(f"rng must be one of {', '.join(RNG_SOURCES)}, got {rng!r}")


def _check_seed(field: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise ValueError(f"{field} must be an integer from 0 to {MAX_SEED}, got {value!r}")


def _check_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    allowed = f"a tuple of whole numbers from 0 up, with at most {MAX_NOISE_ELEMENTS:,} elements in all"
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or len(shape) > 8:
        raise ValueError(f"shape must be {allowed}, got {shape!r:.60}")
    if any(isinstance(side, bool) or not isinstance(side, int) or side < 0 for side in shape):
        raise ValueError(f"shape must be {allowed}, got {tuple(shape)!r:.60}")
    if math.prod(shape) > MAX_NOISE_ELEMENTS:
        raise ValueError(f"shape must be {allowed}, got {tuple(shape)!r:.60} ({math.prod(shape):,} elements)")
    return tuple(shape)


def _check_strength(value: float) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"variation_strength must be a number from 0 to 1, got {value!r}")
