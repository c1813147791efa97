"""The seed's noise against independent references: numpy's PCG64, torch.randn, plain diffusers, A1111's formulas."""

import re
from types import SimpleNamespace

import diffusers
import numpy as np
import pytest
import torch

from seedlab.engine.latents import latent_shape
from seedlab.engine.noise import RNG_SOURCES, check_scheduler, draws_noise, make_noise, randn, slerp
from tests.tiny import tiny_pipeline

CPU = torch.device("cpu")
BIG_SEED = 2**64 - 1
SEEDS = [0, 42, 2**32 + 7, BIG_SEED]
SIZE = 64  # the tiny pipeline's VAE scales by 4: 16x16 latents


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    pipe = tiny_pipeline(tmp_path_factory.mktemp("tokenizer"))
    pipe.original_scheduler_config = dict(pipe.scheduler.config)  # tests swap schedulers; each starts from this
    return pipe


def noise(pipe, seed=0, size=(SIZE, SIZE), **fields):
    fields.setdefault("dtype", torch.float32)
    return make_noise(pipe, seed=seed, width=size[0], height=size[1], device=CPU, **fields)


def torch_noise(seed, shape, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def numpy_noise(seed, shape):
    return np.random.Generator(np.random.PCG64(seed)).standard_normal(shape)


def shape_at(width, height):
    return (1, 4, height // 4, width // 4)


# --- sources ---


def test_latent_shape_of_the_tiny_pipeline(pipe):
    assert latent_shape(pipe, 64, 64) == (1, 4, 16, 16)
    assert latent_shape(pipe, 96, 32) == (1, 4, 8, 24)


@pytest.mark.parametrize("seed", SEEDS)
def test_cpu_latents_are_torch_randn_and_the_generator_continues_after_them(pipe, seed):
    made = noise(pipe, seed)
    reference = torch.Generator().manual_seed(seed)
    assert torch.equal(made.latents, torch.randn(shape_at(SIZE, SIZE), generator=reference))
    assert made.latents.dtype == torch.float32 and made.latents.device == CPU
    assert torch.equal(made.generator.get_state(), reference.get_state())
    assert torch.equal(torch.randn(8, generator=made.generator), torch.randn(8, generator=reference))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cpu_latents_in_half_precision_are_drawn_as_diffusers_draws_them(pipe, dtype):
    made = noise(pipe, 5, dtype=dtype)
    assert made.latents.dtype == dtype
    assert torch.equal(made.latents, torch_noise(5, shape_at(SIZE, SIZE), dtype))


def test_device_source_on_a_cpu_is_the_cpu_source(pipe):
    cpu, device = noise(pipe, 9, rng="cpu"), noise(pipe, 9, rng="device")
    assert torch.equal(cpu.latents, device.latents)
    assert device.generator.device.type == "cpu"
    assert torch.equal(cpu.generator.get_state(), device.generator.get_state())


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype, numpy_dtype", [(torch.float32, np.float32), (torch.float16, np.float16)])
def test_numpy_pcg64_latents_are_numpys_own_draw_cast_once(pipe, seed, dtype, numpy_dtype):
    # 262144 values: float64 -> float16 through float32 (double rounding) differs on about 1 in 14000
    made = noise(pipe, seed, size=(1024, 1024), rng="numpy-pcg64", dtype=dtype)
    expected = numpy_noise(seed, shape_at(1024, 1024)).astype(numpy_dtype)  # float64 draw, one cast
    assert made.latents.dtype == dtype
    assert np.array_equal(made.latents.numpy(), expected)
    assert made.generator is None


@pytest.mark.parametrize("rng", RNG_SOURCES)
def test_the_largest_seeds_work_for_every_source(pipe, rng):
    big = 2**32 - 1 if rng == "numpy-mt19937" else BIG_SEED  # Apple's pipeline takes a UInt32 seed
    made = noise(pipe, big, rng=rng, variation_seed=big - 1, variation_strength=0.5)
    assert torch.isfinite(made.latents).all()
    plain = noise(pipe, big, rng=rng).latents
    if rng in ("cpu", "device"):
        expected = torch_noise(big, plain.shape)
    else:
        expected = numpy_noise(big, plain.shape) if rng == "numpy-pcg64" else randn(big, plain.shape, rng)
    assert np.array_equal(plain.numpy(), np.asarray(expected, dtype=np.float32))


# --- plain diffusers, bit for bit ---

PIPELINE_SCHEDULERS = [
    diffusers.EulerDiscreteScheduler,
    diffusers.EulerAncestralDiscreteScheduler,
    diffusers.DDIMScheduler,
    diffusers.DPMSolverMultistepScheduler,
    diffusers.KDPM2AncestralDiscreteScheduler,
]


def run(pipe, scheduler_class, **call):
    pipe.scheduler = scheduler_class.from_config(pipe.original_scheduler_config)
    return pipe("a red circle", num_inference_steps=4, guidance_scale=5.0, width=SIZE, height=SIZE,
                output_type="np", **call).images


@pytest.mark.parametrize("scheduler_class", PIPELINE_SCHEDULERS, ids=lambda c: c.__name__)
def test_pipeline_pixels_equal_plain_diffusers(pipe, scheduler_class):
    seed = 2**40 + 3
    plain = run(pipe, scheduler_class, generator=torch.Generator("cpu").manual_seed(seed))
    made = noise(pipe, seed)
    ours = run(pipe, scheduler_class, latents=made.latents, generator=made.generator)
    assert np.array_equal(ours, plain)
    other = noise(pipe, seed + 1)  # the comparison can fail: another seed gives other pixels
    assert not np.array_equal(run(pipe, scheduler_class, latents=other.latents, generator=other.generator), plain)


def test_numpy_pcg64_with_a_deterministic_scheduler_never_touches_the_global_rng(pipe):
    made = noise(pipe, 3, rng="numpy-pcg64")
    check_scheduler("numpy-pcg64", diffusers.EulerDiscreteScheduler.from_config(pipe.original_scheduler_config))
    before = torch.random.get_rng_state()
    first = run(pipe, diffusers.EulerDiscreteScheduler, latents=made.latents, generator=made.generator)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert np.array_equal(run(pipe, diffusers.EulerDiscreteScheduler, latents=made.latents), first)


# --- variation seed: A1111's slerp ---


def reference_slerp(strength, low, high):
    """Slerp written from its formula, in float64: one angle per (channel, column) vector along the height."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    out = np.empty_like(low)
    channels, _, columns = low.shape
    for c in range(channels):
        for x in range(columns):
            a, b = low[c, :, x], high[c, :, x]
            omega = np.arccos(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
            out[c, :, x] = (np.sin((1 - strength) * omega) * a + np.sin(strength * omega) * b) / np.sin(omega)
    return out


@pytest.mark.parametrize("rng", ["cpu", "numpy-pcg64", "cuda-philox"])
@pytest.mark.parametrize("strength", [0.1, 0.5, 0.9])
def test_variation_is_the_slerp_of_the_two_seeds_noise(pipe, rng, strength):
    made = noise(pipe, 11, rng=rng, variation_seed=12, variation_strength=strength)
    low, high = (noise(pipe, seed, rng=rng).latents[0] for seed in (11, 12))
    np.testing.assert_allclose(made.latents[0].numpy(), reference_slerp(strength, low, high), rtol=0, atol=2e-5)


def test_variation_keeps_the_main_seeds_generator_for_later_steps(pipe):
    varied, plain = noise(pipe, 11, variation_seed=12, variation_strength=0.3), noise(pipe, 11)
    assert torch.equal(varied.generator.get_state(), plain.generator.get_state())


@pytest.mark.parametrize("rng", RNG_SOURCES)
def test_strength_zero_is_the_plain_seed_and_strength_one_the_variation_seed(pipe, rng):
    plain, other = noise(pipe, 21, rng=rng).latents, noise(pipe, 22, rng=rng).latents
    assert torch.equal(noise(pipe, 21, rng=rng, variation_seed=22, variation_strength=0.0).latents, plain)
    assert torch.equal(noise(pipe, 21, rng=rng, variation_seed=22, variation_strength=1.0).latents, other)


@pytest.mark.parametrize("strength", [0.25, 0.5, 0.75])
def test_intermediate_strengths_keep_unit_variance(pipe, strength):
    made = noise(pipe, 5, size=(256, 256), variation_seed=6, variation_strength=strength).latents
    assert abs(made.std().item() - 1.0) < 0.05  # a plain lerp at 0.5 would shrink it to about 0.71
    assert abs(made.mean().item()) < 0.05


def test_nearly_parallel_noise_falls_back_to_a_correct_lerp():
    low = torch_noise(1, (4, 16, 16))
    high = low + 1e-3 * torch_noise(2, (4, 16, 16))
    result = slerp(0.1, low, high)
    assert torch.equal(result, low * 0.9 + high * 0.1)  # A1111 swaps these weights (0.1 low, 0.9 high)
    assert torch.allclose(slerp(0.3, low, low), low, rtol=0, atol=1e-6)


def test_one_row_noise_has_no_angle_and_is_lerped_not_nan(pipe):
    # At a 4x4 seed size the latents are 1x1: every (channel, column) vector has one value.
    made = noise(pipe, 1, seed_resize_from=(4, 4), variation_seed=2, variation_strength=0.25).latents
    low, high = (noise(pipe, seed, size=(4, 4)).latents for seed in (1, 2))
    assert torch.isfinite(made).all()
    assert torch.equal(made[:, :, 7:8, 7:8], 0.75 * low + 0.25 * high)


# --- seed resize: centred crop or pad, as A1111 ---


def reference_place(source, canvas):
    """Element by element: the source's centre window over the canvas, the larger half cut first when odd."""
    out = canvas.clone()
    _, _, rows, cols = canvas.shape
    _, _, source_rows, source_cols = source.shape

    def source_index(i, target, size):
        if size > target:  # crop: the same margin (rounded up) off both sides, placed from index 0
            margin = (size - target + 1) // 2
            return i + margin if i < size - 2 * margin else None
        offset = (target - size) // 2  # pad: shifted to the centre, the extra row at the end
        return i - offset if offset <= i < offset + size else None

    for y in range(rows):
        for x in range(cols):
            sy, sx = source_index(y, rows, source_rows), source_index(x, cols, source_cols)
            if sy is not None and sx is not None:
                out[:, :, y, x] = source[:, :, sy, sx]
    return out


@pytest.mark.parametrize(
    "resize_from",
    [(96, 80), (40, 48), (76, 52), (36, 100), (4, 4)],
    ids=["crop", "pad", "odd crop and pad", "pad width crop height", "smallest"],
)
@pytest.mark.parametrize("rng", ["cpu", "numpy-pcg64", "cuda-philox"])
def test_seed_resize_places_the_noise_centred(pipe, resize_from, rng):
    made = noise(pipe, 31, rng=rng, seed_resize_from=resize_from)
    drawn = noise(pipe, 31, size=resize_from, rng=rng).latents
    expected = reference_place(drawn, noise(pipe, 31, rng=rng).latents)
    assert torch.equal(made.latents, expected)
    assert not torch.equal(made.latents, noise(pipe, 31, rng=rng).latents)


def test_seed_resize_keeps_the_main_generator_and_does_variation_first(pipe):
    made = noise(pipe, 31, seed_resize_from=(96, 80), variation_seed=32, variation_strength=0.4)
    low, high = (noise(pipe, seed, size=(96, 80)).latents[0] for seed in (31, 32))
    varied = torch.from_numpy(reference_slerp(0.4, low, high)).float()[None]
    expected = reference_place(varied, noise(pipe, 31).latents)
    torch.testing.assert_close(made.latents, expected, rtol=0, atol=2e-5)
    assert torch.equal(made.generator.get_state(), noise(pipe, 31).generator.get_state())


@pytest.mark.parametrize("resize_from", [(SIZE, SIZE), (SIZE + 2, SIZE + 3), None])
def test_seed_resize_to_the_same_latent_size_is_the_plain_seed(pipe, resize_from):
    assert torch.equal(noise(pipe, 31, seed_resize_from=resize_from).latents, noise(pipe, 31).latents)


# --- which schedulers draw noise while stepping ---

SCHEDULER_DRAWS = [
    (diffusers.EulerDiscreteScheduler, {}, False),
    (diffusers.EulerAncestralDiscreteScheduler, {}, True),
    (diffusers.DDIMScheduler, {}, False),
    (diffusers.DPMSolverMultistepScheduler, {}, False),
    (diffusers.DPMSolverMultistepScheduler, {"algorithm_type": "sde-dpmsolver++"}, True),
    (diffusers.KDPM2AncestralDiscreteScheduler, {}, True),
    (diffusers.LCMScheduler, {}, True),
    (diffusers.DDPMScheduler, {}, True),
    (diffusers.UniPCMultistepScheduler, {}, False),
    (diffusers.PNDMScheduler, {}, False),
    (diffusers.HeunDiscreteScheduler, {}, False),
    (diffusers.LMSDiscreteScheduler, {}, False),
    (diffusers.FlowMatchEulerDiscreteScheduler, {}, False),
    (diffusers.FlowMatchEulerDiscreteScheduler, {"stochastic_sampling": True}, True),
]


def make_scheduler(pipe, scheduler_class, options):
    if scheduler_class is diffusers.LMSDiscreteScheduler:
        pytest.importorskip("scipy")  # LMS computes its coefficients with scipy
    if scheduler_class is diffusers.FlowMatchEulerDiscreteScheduler:
        return scheduler_class(**options)
    return scheduler_class.from_config(pipe.original_scheduler_config, **options)


def schedule_state(scheduler):
    timesteps = scheduler.timesteps
    return (None if timesteps is None else np.asarray(timesteps).tolist(), getattr(scheduler, "step_index", None))


@pytest.mark.parametrize("scheduler_class, options, draws", SCHEDULER_DRAWS,
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_draws_noise_and_check_scheduler(pipe, scheduler_class, options, draws):
    scheduler = make_scheduler(pipe, scheduler_class, options)
    before = schedule_state(scheduler)
    assert draws_noise(scheduler) is draws
    assert schedule_state(scheduler) == before  # it stepped a copy
    check_scheduler("cpu", scheduler)
    check_scheduler("device", scheduler)
    for rng in ("numpy-pcg64", "cuda-philox", "numpy-mt19937", "std-libc++"):  # the others share their path
        if draws:
            with pytest.raises(ValueError, match=f"rng {re.escape(rng)} cannot drive {scheduler_class.__name__}.*cpu"):
                check_scheduler(rng, scheduler)
        else:
            check_scheduler(rng, scheduler)


def test_ddim_draws_only_when_eta_is_positive(pipe):
    # Pipelines pass eta=0.0 unless asked: the probe steps with the pipeline's defaults.
    scheduler = diffusers.DDIMScheduler.from_config(pipe.original_scheduler_config)
    scheduler.set_timesteps(2)
    generator = torch.Generator().manual_seed(0)
    before = generator.get_state()
    sample = torch.ones(1, 4, 8, 8)
    scheduler.step(sample, scheduler.timesteps[0], sample, eta=0.5, generator=generator)
    assert not torch.equal(generator.get_state(), before)
    assert draws_noise(scheduler) is False


# --- errors ---


class FluxLikePipeline:
    transformer = SimpleNamespace(config=SimpleNamespace(in_channels=64))
    vae_scale_factor = 8

    def _pack_latents(self, latents):
        return latents

    def __call__(self, prompt, latents=None, generator=None):
        return None


def test_latent_shape_refuses_packed_pipelines_by_name():
    with pytest.raises(ValueError, match="FluxLikePipeline is not supported"):
        latent_shape(FluxLikePipeline(), 64, 64)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"rng": "gpu"}, re.escape("rng must be one of cpu, device, numpy-pcg64, cuda-philox, numpy-mt19937, "
                                   "std-libstdc++, std-libc++, std-msvc, got 'gpu'")),
        ({"seed": 2**64}, "seed must be an integer from 0 to 18446744073709551615, got 18446744073709551616"),
        ({"seed": -1}, "seed must be an integer from 0 to"),
        ({"variation_seed": 1.5}, "variation_seed must be an integer from 0 to"),
        ({"variation_strength": 1.5}, "variation_strength must be a number from 0 to 1, got 1.5"),
        ({"variation_strength": float("nan")}, "variation_strength must be a number from 0 to 1, got nan"),
        ({"seed_resize_from": (0, 64)}, "seed_resize_from must be a \\(width, height\\) pair of integers from 1 to"),
        ({"seed_resize_from": "64x64"}, "seed_resize_from must be a \\(width, height\\) pair"),
        ({"seed_resize_from": (2, 64)}, "seed_resize_from must be at least 4x4 for this model, got 2x64"),
    ],
)
def test_bad_fields_raise_a_value_error_naming_them(pipe, fields, message):
    fields = {"seed": 1, **fields}
    with pytest.raises(ValueError, match=message):
        noise(pipe, **fields)


def test_check_scheduler_refuses_unknown_sources(pipe):
    with pytest.raises(ValueError, match="rng must be one of"):
        check_scheduler("philox", pipe.scheduler)
