"""Other tools' noise (random_sources.py): the real C++ libraries' output, NumPy's legacy generator, the C++
standard's published values, and a step-by-step reference written from MSVC's STL for what cannot run here."""

import ctypes
import ctypes.util
import math
import platform
import time
from pathlib import Path

import diffusers
import numpy as np
import pytest
import torch

import seedlab
from seedlab.engine import random_sources
from seedlab.engine.noise import check_scheduler, make_noise, place_centred, slerp
from seedlab.engine.philox import cuda_normal
from seedlab.engine.recipe import Recipe, RecipeError
from tests.tiny import tiny_pipeline

FIXTURES = Path(__file__).parent / "fixtures" / "rng"
SEEDS = [0, 1, 2**32 - 1, 474561583]  # the rows of the fixtures; the last drawn once at random
COUNT = 4096
CPU = torch.device("cpu")


# --- against the real libraries (the fixtures: tests/fixtures/rng/README.md) ---


@pytest.mark.parametrize("rng, fixture", [("std-libstdc++", "libstdcxx.npy"), ("std-libc++", "libcxx.npy")])
def test_std_sources_equal_the_real_cpp_libraries_bit_for_bit(rng, fixture):
    real = np.load(FIXTURES / fixture)
    assert real.shape == (len(SEEDS), COUNT) and real.dtype == np.float32
    for row, seed in enumerate(SEEDS):
        made = seedlab.randn(seed, (COUNT,), rng)
        assert made.dtype == torch.float32 and made.device == CPU
        assert np.array_equal(made.numpy().view(np.uint32), real[row].view(np.uint32)), (rng, seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_numpy_mt19937_equals_numpys_legacy_randn_in_float64_and_float32(seed):
    # Apple's NumPyRandomSource re-creates RandomState(seed).randn: the same MT19937 seeding, 53-bit doubles and
    # polar method with its cached second value, so the doubles are equal bit for bit, and so are the floats.
    legacy = np.random.RandomState(seed).standard_normal(COUNT)
    assert np.array_equal(random_sources.apple_gauss(seed, COUNT), legacy)
    assert np.array_equal(seedlab.randn(seed, (COUNT,), "numpy-mt19937").numpy(), legacy.astype(np.float32))


def test_numpy_mt19937_gives_apples_own_published_values():
    # apple/ml-stable-diffusion swift/StableDiffusionTests: NumPyRandomSource(seed: 12345), 10,000 values, the last 5.
    last = random_sources.apple_gauss(12345, 10_000)[-5:]
    np.testing.assert_allclose(last, [-0.86285345, 2.15229409, -0.00670556, -1.21472309, 0.65498866], atol=1e-8)


def test_the_engines_give_the_values_the_cpp_standard_publishes():
    # [rand.predef]: the 10000th value of each default-constructed engine (seeds 5489, 1 and 1).
    assert random_sources._MersenneTwister(5489).words(10_000)[-1] == 4123659995
    assert random_sources._MinimalStandard(16807, 1).words(10_000)[-1] == 1043618065
    assert random_sources._MinimalStandard(48271, 1).words(10_000)[-1] == 399268537


def test_words_continue_across_calls():
    whole = random_sources._MersenneTwister(7).words(2000)
    parts = random_sources._MersenneTwister(7)
    assert np.array_equal(np.concatenate([parts.words(5), parts.words(1000), parts.words(995)]), whole)
    lcg = random_sources._MinimalStandard(48271, 9)
    assert np.array_equal(np.concatenate([lcg.words(4097), lcg.words(3)]),
                          random_sources._MinimalStandard(48271, 9).words(4100))


# sd.cpp's rng objects, call after call (tests/fixtures/rng/README.md: std_stream.cpp): seed 0 drew 4095 (odd: the
# distribution's saved value is dropped with it), then 255 and 256; the other seed 4096, then 256 and 256.
STREAM_CALLS = [(0, (4095, 255, 256)), (474561583, (4096, 256, 256))]


@pytest.mark.parametrize("rng, fixture", [("std-libstdc++", "libstdcxx_stream.npy"),
                                          ("std-libc++", "libcxx_stream.npy")])
def test_std_streams_continue_as_the_real_cpp_objects_do(rng, fixture):
    real, ours = np.load(FIXTURES / fixture), []
    for seed, counts in STREAM_CALLS:
        stream = random_sources.Stream(rng, seed)
        assert np.array_equal(stream.randn(counts[0]), random_sources.normals(rng, seed, counts[0]))
        ours += [stream.randn(count) for count in counts[1:]]
    assert real.dtype == np.float32 and np.array_equal(np.concatenate(ours).view(np.uint32), real.view(np.uint32))


@pytest.mark.parametrize("rng", ["std-libstdc++", "std-libc++", "std-msvc"])
def test_a_std_stream_draws_each_call_with_a_fresh_distribution(rng):
    stream, whole = random_sources.Stream(rng, 3), random_sources.normals(rng, 3, 20)
    assert np.array_equal(np.concatenate([stream.randn(10), stream.randn(10)]), whole)  # even: nothing saved
    odd = random_sources.Stream(rng, 3)
    assert np.array_equal(odd.randn(9), whole[:9]) and np.array_equal(odd.randn(4), whole[10:14])  # whole[9] dropped


def test_the_philox_stream_moves_its_offset_by_one_a_call():
    stream = random_sources.Stream("cuda-philox", 2**40 + 7)
    assert np.array_equal(stream.randn(5), seedlab.randn(2**40 + 7, (5,), "cuda-philox").numpy())
    assert np.array_equal(stream.randn(3), cuda_normal(2**40 + 7, 3, 1))
    assert np.array_equal(stream.randn(4096), cuda_normal(2**40 + 7, 4096, 2))
    with pytest.raises(ValueError, match="stream"):
        random_sources.Stream("numpy-mt19937", 1)


def _glibc():
    name = ctypes.util.find_library("m") if platform.system() == "Linux" else None
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        major, minor = (int(part) for part in libc.gnu_get_libc_version().decode().split(".")[:2])
    except (OSError, AttributeError, ValueError):
        return None
    if (major, minor) < (2, 28):  # glibc's table-based logf arrived in 2.28
        return None
    libm = ctypes.CDLL(name)
    libm.logf.restype, libm.logf.argtypes = ctypes.c_float, [ctypes.c_float]
    return libm


@pytest.mark.skipif(_glibc() is None, reason="needs glibc 2.28 or later, whose logf the re-creation follows")
def test_glibc_logf_equals_the_c_librarys_own():
    libm = _glibc()
    bits = np.random.Generator(np.random.PCG64(46)).integers(0x00800000, 0x3F800001, 100_000, dtype=np.uint32)
    values = np.concatenate([bits.view(np.float32), np.float32([1.0, 0.5, 0.70703125, np.nextafter(1, 0)])])
    real = np.array([libm.logf(float(value)) for value in values], dtype=np.float32)
    assert np.array_equal(random_sources.glibc_logf(values).view(np.uint32), real.view(np.uint32))


# --- MSVC's STL, which cannot run here: against a step-by-step reference written from its source ---


def reference_mt19937(seed):
    """std::mt19937 (C++ [rand.eng.mers]), one word at a time with Python ints."""
    state = [seed & 0xFFFFFFFF]
    for index in range(1, 624):
        previous = state[-1]
        state.append((1812433253 * (previous ^ (previous >> 30)) + index) & 0xFFFFFFFF)
    position = 624
    while True:
        if position == 624:
            for index in range(624):
                y = (state[index] & 0x80000000) | (state[(index + 1) % 624] & 0x7FFFFFFF)
                state[index] = state[(index + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            position = 0
        y = state[position]
        position += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        yield y ^ (y >> 18)


def reference_msvc(seed, count):
    """MSVC STL's normal_distribution<float>::_Eval on mt19937 (stl/inc/random), one float32 step at a time:
    generate_canonical<float, 24> as P0952R2 (x >> 8 times 2**-24), Knuth's algorithm P returning v1 * f first,
    log(s) correctly rounded (the UCRT's logf is not published)."""
    f32 = np.float32
    words = reference_mt19937(seed)
    out = []
    while len(out) < count:
        v1 = f32(2) * (f32(next(words) >> 8) * f32(2.0**-24)) - f32(1)
        v2 = f32(2) * (f32(next(words) >> 8) * f32(2.0**-24)) - f32(1)
        s = v1 * v1 + v2 * v2
        if not (s < f32(1) and v1 != 0 and v2 != 0):
            continue
        if s > f32(1e-4):
            log_s = f32(math.log(float(s)))
        else:
            exponent = math.frexp(float(max(abs(v1), abs(v2))))[1] - 1  # ilogb
            v1, v2 = f32(math.ldexp(float(v1), -exponent)), f32(math.ldexp(float(v2), -exponent))
            s = v1 * v1 + v2 * v2
            log_s = f32(math.log(float(s))) + f32(exponent) * (f32(0.6931471805599453) * f32(2))
        factor = f32(math.sqrt(float(f32(-2) * log_s / s)))
        out += [factor * v1 + f32(0), factor * v2 + f32(0)]
    return np.array(out[:count], dtype=np.float32)


@pytest.mark.parametrize("seed", SEEDS)
def test_std_msvc_equals_a_reference_written_from_msvcs_stl(seed):
    """Not checked against MSVC itself (it does not run here): against this step-by-step re-creation only."""
    made = seedlab.randn(seed, (COUNT,), "std-msvc").numpy()
    assert np.array_equal(made.view(np.uint32), reference_msvc(seed, COUNT).view(np.uint32))


def test_msvc_rescales_a_tiny_pair_before_its_logarithm():
    f32 = np.float32
    first, second = np.float32([3e-3, -2e-4, 0.5]), np.float32([-5e-3, 1e-4, 0.25])
    square = first * first + second * second
    scaled_first, scaled_second, scaled, log = random_sources._msvc_log(first, second, square)
    for index in range(2):  # both pairs are small: scaled by 2**-ilogb of the larger
        exponent = math.frexp(float(max(abs(first[index]), abs(second[index]))))[1] - 1
        assert scaled_first[index] == f32(math.ldexp(float(first[index]), -exponent))
        assert 0.25 <= scaled[index] < 8 and abs(float(log[index]) - math.log(float(square[index]))) < 1e-5
    assert (scaled_first[2], scaled_second[2], scaled[2]) == (first[2], second[2], square[2])  # a large one is not


# --- seeds, shapes, speed ---


def test_seeds_follow_each_tool():
    # sd.cpp casts its seed to unsigned int; Apple's pipeline takes a UInt32, and so does NumPy's legacy seeding.
    for rng in ("std-libstdc++", "std-libc++", "std-msvc"):
        assert torch.equal(seedlab.randn(2**32 + 5, (64,), rng), seedlab.randn(5, (64,), rng))
    with pytest.raises(ValueError, match="seed must be an integer from 0 to 4294967295 with rng numpy-mt19937"):
        seedlab.randn(2**32, (4,), "numpy-mt19937")
    with pytest.raises(RecipeError, match="seed must be from 0 to 4294967295 with rng numpy-mt19937"):
        Recipe(prompt="x", rng="numpy-mt19937", seed=2**32)
    with pytest.raises(RecipeError, match="variation_seed must be from 0 to 4294967295"):
        Recipe(prompt="x", rng="numpy-mt19937", variation_seed=2**40, variation_strength=0.5)
    assert Recipe(prompt="x", rng="numpy-mt19937", seed=2**32 - 1, variation_seed=2**40).seed == 2**32 - 1


@pytest.mark.parametrize("rng", random_sources.SOURCES)
def test_a_shape_is_filled_in_row_major_order_and_odd_counts_work(rng):
    flat = seedlab.randn(11, (2 * 4 * 5 * 7,), rng)
    assert torch.equal(seedlab.randn(11, (2, 4, 5, 7), rng), flat.reshape(2, 4, 5, 7))
    assert torch.equal(seedlab.randn(11, (3,), rng), flat[:3])
    assert seedlab.randn(11, (0,), rng).shape == (0,)


@pytest.mark.parametrize("rng", random_sources.SOURCES)
def test_latents_of_any_size_are_quick(rng):
    start = time.perf_counter()
    values = seedlab.randn(3, (1, 4, 128, 128), rng)
    assert time.perf_counter() - start < 2.0  # 65,536 values: 4 to 30 ms on the 2-core development machine
    assert abs(float(values.mean())) < 0.02 and abs(float(values.std()) - 1) < 0.02


# --- in make_noise and against schedulers ---


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("tokenizer"))


@pytest.mark.parametrize("rng", random_sources.SOURCES)
def test_make_noise_draws_the_latents_and_the_seed_fields_from_the_same_source(pipe, rng):
    plain = make_noise(pipe, seed=7, width=64, height=64, device=CPU, dtype=torch.float16, rng=rng)
    assert plain.generator is None
    assert torch.equal(plain.latents, seedlab.randn(7, (1, 4, 16, 16), rng).half())
    varied = make_noise(pipe, seed=7, width=64, height=64, device=CPU, dtype=torch.float32, rng=rng,
                        variation_seed=9, variation_strength=0.3, seed_resize_from=(32, 96))
    small = slerp(0.3, seedlab.randn(7, (1, 4, 24, 8), rng)[0], seedlab.randn(9, (1, 4, 24, 8), rng)[0])[None]
    assert torch.equal(varied.latents, place_centred(small, seedlab.randn(7, (1, 4, 16, 16), rng)))


def test_schedulers_that_draw_while_stepping_are_refused_naming_rng(pipe):
    ancestral = diffusers.EulerAncestralDiscreteScheduler.from_config(pipe.scheduler.config)
    for rng in random_sources.SOURCES:
        with pytest.raises(ValueError, match=f"rng {rng.replace('+', '[+]')} cannot drive "
                                             "EulerAncestralDiscreteScheduler"):
            check_scheduler(rng, ancestral)
        check_scheduler(rng, diffusers.EulerDiscreteScheduler.from_config(pipe.scheduler.config))


def test_a1111_samplers_that_draw_while_stepping_refuse_them_too(pipe):
    from seedlab.engine.samplers import a1111

    for rng in random_sources.SOURCES:
        a1111.check_recipe(pipe, Recipe(prompt="a", scheduler="DPM++ 2M", rng=rng, seed=5))
        with pytest.raises(ValueError, match=f"rng {rng.replace('+', '[+]')} cannot draw the noise ancestral"):
            a1111.check_recipe(pipe, Recipe(prompt="a", scheduler="Euler a", rng=rng, seed=5))


def test_seedlabs_own_text_and_the_cli_name_each_source():
    from seedlab.files.infotext import parameters_text
    from tests.helpers import read_parameters

    for rng in random_sources.SOURCES:
        recipe = Recipe(prompt="a fox", seed=123, rng=rng, scheduler="EulerDiscreteScheduler")
        text = parameters_text(recipe, None, "0.1.0")
        assert f"SeedLab RNG: {rng}" in text and read_parameters(text)[0] == recipe
