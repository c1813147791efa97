"""cuda-philox: CUDA's torch.randn computed on the CPU, against published values and a scalar reference."""

import math

import diffusers
import numpy as np
import pytest
import torch

import seedlab
from seedlab.engine.noise import MAX_NOISE_ELEMENTS, make_noise
from seedlab.engine.philox import CUDA_CARDS, cards_matching, cuda_normal, philox4x32
from tests.tiny import tiny_pipeline

CPU = torch.device("cpu")
MASK = 0xFFFFFFFF


def reference_philox(counter, key):
    """Philox4x32-10 for one counter, written from the Random123 paper with Python ints."""
    counter, key = list(counter), list(key)
    for round_index in range(10):
        if round_index:
            key = [(key[0] + 0x9E3779B9) & MASK, (key[1] + 0xBB67AE85) & MASK]
        product0, product1 = 0xD2511F53 * counter[0], 0xCD9E8D57 * counter[2]
        counter = [(product1 >> 32) ^ counter[1] ^ key[0], product1 & MASK,
                   (product0 >> 32) ^ counter[3] ^ key[1], product0 & MASK]
    return counter


def reference_normal(seed, index, offset=0):
    """One element of CUDA's randn: counter [offset, 0, index, 0], key = the seed's two words, the sine branch."""
    x, y, _, _ = reference_philox([offset, 0, index, 0], [seed & MASK, seed >> 32])
    step_2pi = 2.0**-32 * float(np.float32(2 * math.pi))  # curand's constant: 2**-32 times float32(2 pi)
    u = x * 2.0**-32 + 2.0**-33
    v = y * step_2pi + step_2pi / 2
    return np.float32(math.sqrt(-2.0 * math.log(u)) * math.sin(v))


# --- published values ---


def test_pytorch_issue_79496_cuda_vector():
    # torch.manual_seed(10); torch.randn(3, device="cuda") -> tensor([-0.1029,  1.6810, -0.2708])
    made = seedlab.randn(10, (3,), "cuda-philox").double().numpy()
    assert [f"{value:.4f}" for value in made] == ["-0.1029", "1.6810", "-0.2708"]


def test_a1111_docstring_vector_for_seed_0():
    # A1111's rng_philox docstring, seed 0, shape (3, 4). Its eight digits agree with A1111's own code
    # (and this) to within 3e-7, a float32 step or two; they are not float32 values themselves.
    published = [[-0.92466259, -0.42534415, -2.6438457, 0.14518388],
                 [-0.12086647, -0.57972564, -0.62285122, -0.32838709],
                 [-1.07454231, -0.36314407, -1.67105067, 2.26550497]]
    np.testing.assert_allclose(seedlab.randn(0, (3, 4), "cuda-philox").numpy(), published, rtol=0, atol=3e-7)


def test_only_the_documented_layout_gives_the_published_vector():
    # The element index in counter word 2 and the sine branch: the index in word 0 or the cosine are other numbers.
    index = np.arange(3, dtype=np.uint64)
    zero = np.zeros(3, dtype=np.uint64)
    x, y, _, _ = philox4x32((index, zero, zero, zero), (10, 0))
    u, v = (x + 0.5) * 2.0**-32, (y + 0.5) * 2.0**-32 * 2 * np.pi
    assert not np.allclose(np.sqrt(-2 * np.log(u)) * np.sin(v), [-0.1029, 1.6810, -0.2708], atol=1e-3)
    x, y, _, _ = philox4x32((zero, zero, index, zero), (10, 0))
    u, v = (x + 0.5) * 2.0**-32, (y + 0.5) * 2.0**-32 * 2 * np.pi
    assert not np.allclose(np.sqrt(-2 * np.log(u)) * np.cos(v), [-0.1029, 1.6810, -0.2708], atol=1e-3)


# --- against a scalar reference, exactly ---


@pytest.mark.parametrize("seed", [0, 10, 2**32 - 1, 2**32 + 7, 2**63 + 12345, 2**64 - 1])
def test_philox_blocks_equal_the_scalar_reference(seed):
    index = np.arange(0, 2**32, 2**32 // 37, dtype=np.uint64)  # indices across the whole 32-bit word
    offset = np.full(index.shape, 5, dtype=np.uint64)
    zero = np.zeros(index.shape, dtype=np.uint64)
    blocks = np.stack(philox4x32((offset, zero, index, zero), (seed & MASK, seed >> 32)), axis=1)
    expected = [reference_philox([5, 0, int(i), 0], [seed & MASK, seed >> 32]) for i in index]
    assert blocks.tolist() == expected


@pytest.mark.parametrize("seed", [0, 42, 2**40 + 3, 2**64 - 1])
def test_normals_equal_the_scalar_reference_bit_for_bit(seed):
    made = cuda_normal(seed, 300)
    expected = np.array([reference_normal(seed, i) for i in range(300)], dtype=np.float32)
    assert made.dtype == np.float32
    assert np.array_equal(made, expected)
    later = cuda_normal(seed, 5, offset=1)  # a second draw of a small tensor: the counter's first word is 1
    assert np.array_equal(later, [reference_normal(seed, i, offset=1) for i in range(5)])
    assert not np.array_equal(later, made[:5])


def test_chunks_do_not_change_the_numbers():
    count = 2**20 + 5  # past one chunk
    made = cuda_normal(7, count)
    assert np.array_equal(made[-5:], [reference_normal(7, i) for i in range(count - 5, count)])
    assert abs(float(made.std()) - 1.0) < 0.01 and abs(float(made.mean())) < 0.01


def test_cards_matching_a_size():
    assert cards_matching(4 * 64 * 64) == list(CUDA_CARDS)  # SD 1.x at 512x512: every card
    assert cards_matching(4 * 128 * 128) == ["L4", "A10G", "H100 PCIe"]  # SDXL at 1024x1024: not a T4
    assert cards_matching(10**6) == []


# --- seedlab.randn: each source's first draw ---


@pytest.mark.parametrize("seed", [0, 3, 2**64 - 1])
def test_randn_equals_each_generator_itself(seed):
    shape = (2, 3, 5)
    cpu = seedlab.randn(seed, shape)
    assert torch.equal(cpu, torch.randn(shape, generator=torch.Generator("cpu").manual_seed(seed)))
    pcg = seedlab.randn(seed, shape, "numpy-pcg64")
    expected = np.random.Generator(np.random.PCG64(seed)).standard_normal(shape).astype(np.float32)
    assert np.array_equal(pcg.numpy(), expected)
    philox = seedlab.randn(seed, shape, "cuda-philox")
    assert np.array_equal(philox.numpy().ravel(), [reference_normal(seed, i) for i in range(30)])
    for tensor in (cpu, pcg, philox):
        assert tensor.dtype == torch.float32 and tensor.device == CPU and tuple(tensor.shape) == shape
    assert not torch.equal(cpu, philox) and not torch.equal(pcg, philox)


def test_randn_takes_a_list_or_an_int_shape_and_empty_shapes():
    assert torch.equal(seedlab.randn(1, [2, 2], "cuda-philox"), seedlab.randn(1, (2, 2), "cuda-philox"))
    assert seedlab.randn(1, 4, "cuda-philox").shape == (4,)
    assert seedlab.randn(1, (0, 3), "cuda-philox").shape == (0, 3)


@pytest.mark.parametrize(
    "args, message",
    [
        ((-1, (2,), "cpu"), "seed must be an integer from 0 to 18446744073709551615, got -1"),
        ((2**64, (2,), "cuda-philox"), "seed must be an integer from 0 to 18446744073709551615"),
        ((1.0, (2,), "cpu"), "seed must be an integer"),
        ((1, (2, -1), "cpu"), "shape must be a tuple of whole numbers from 0 up"),
        ((1, "4x4", "cpu"), "shape must be a tuple"),
        ((1, (2.0,), "cpu"), "shape must be a tuple"),
        ((1, (MAX_NOISE_ELEMENTS + 1,), "cuda-philox"), f"at most {MAX_NOISE_ELEMENTS:,} elements"),
        ((1, (2**40, 2**40), "cuda-philox"), "elements"),
        ((1, (2,), "device"), "rng must be one of cpu, numpy-pcg64, cuda-philox, numpy-mt19937, .*got 'device'"),
        ((1, (2,), "gpu"), "rng must be one of"),
    ],
)
def test_randn_refuses_bad_arguments_naming_them(args, message):
    with pytest.raises(ValueError, match=message):
        seedlab.randn(*args)


# --- the source in make_noise and in a pipeline ---


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("tokenizer"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_latents_are_the_float32_draw_cast_once(pipe, dtype):
    made = make_noise(pipe, seed=5, width=64, height=64, device=CPU, dtype=dtype, rng="cuda-philox")
    assert made.generator is None  # the scheduler may draw nothing: check_scheduler refuses those that do
    assert made.latents.dtype == dtype
    assert torch.equal(made.latents, seedlab.randn(5, (1, 4, 16, 16), "cuda-philox").to(dtype))


def test_variation_and_resize_draw_from_cuda_philox(pipe):
    def latents(seed, size=(64, 64), **fields):
        return make_noise(pipe, seed=seed, width=size[0], height=size[1], device=CPU, dtype=torch.float32,
                          rng="cuda-philox", **fields).latents

    assert torch.equal(latents(1, variation_seed=2, variation_strength=1.0), latents(2))
    half = latents(1, variation_seed=2, variation_strength=0.5)
    assert not torch.equal(half, latents(1)) and not torch.equal(half, latents(2))
    resized = latents(1, seed_resize_from=(32, 32))
    assert torch.equal(resized[:, :, 4:12, 4:12], seedlab.randn(1, (1, 4, 8, 8), "cuda-philox"))
    assert torch.equal(resized[:, :, :4], latents(1)[:, :, :4])  # the border keeps the target-size noise


def test_a_pipeline_runs_from_cuda_philox_latents_without_a_generator(pipe):
    pipe.scheduler = diffusers.EulerDiscreteScheduler.from_config(pipe.scheduler.config)
    made = make_noise(pipe, seed=9, width=64, height=64, device=CPU, dtype=torch.float32, rng="cuda-philox")

    def run(latents):
        return pipe("a red circle", num_inference_steps=3, width=64, height=64, latents=latents,
                    output_type="np").images

    first = run(made.latents)
    assert np.array_equal(run(made.latents.clone()), first)
    assert not np.array_equal(run(seedlab.randn(9, (1, 4, 16, 16))), first)  # the cpu source: another image
