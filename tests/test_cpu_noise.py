"""engine/cpu_noise.py: torch's CPU randn as an AVX2 x86-64 build computes it, bit for bit, and the generator's state
after it; on a machine whose torch takes the scalar Box-Muller (a fresh process with ATEN_CPU_CAPABILITY=default,
as every ARM build does) torch's own values differ and cpu_noise's do not. SeedLab's CPU draws go through it: the
starting noise, diffusers' schedulers, torchsde's trees and the samplers' own step noise."""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from seedlab.engine import cpu_noise, noise

ROOT = Path(__file__).resolve().parents[1]
# The comparisons need torch's AVX2 kernel here (AVX-512 CPUs take it too: ATen has no AVX-512 normal kernel)
AVX2 = platform.machine() in ("x86_64", "AMD64") and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")
needs_avx2 = pytest.mark.skipif(not AVX2, reason="torch.randn here is not the AVX2 build's reference")
SEEDS = (0, 1, 7, 42, 2**32 + 5, 2**63 + 11, 2**64 - 1)
SHAPES = ((16,), (17,), (31,), (32,), (33,), (1, 4, 8, 8), (3, 5, 7), (4097,), (2, 4, 32, 32))


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    view = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[a.dtype]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(view), b.view(view))


def drawn(draw, seed: int, shape, dtype=torch.float32) -> tuple[torch.Tensor, torch.Generator]:
    generator = torch.Generator("cpu").manual_seed(seed)
    return draw(shape, generator, dtype), generator


def torch_randn(shape, generator, dtype=torch.float32):
    return torch.randn(shape, generator=generator, dtype=dtype)


@needs_avx2
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_computed_noise_is_torchs_bit_for_bit_and_leaves_the_generator_where_torch_does(dtype):
    for seed in SEEDS:
        for shape in SHAPES:
            ours, our_generator = drawn(cpu_noise.compute_randn, seed, shape, dtype)
            theirs, their_generator = drawn(torch_randn, seed, shape, dtype)
            assert same_bits(ours, theirs), (seed, shape, dtype)
            assert torch.equal(our_generator.get_state(), their_generator.get_state()), (seed, shape, dtype)
            # the next draw (a scheduler's step noise) follows on from the same place
            assert same_bits(cpu_noise.compute_randn((4, 9), our_generator), torch_randn((4, 9), their_generator))


@needs_avx2
def test_many_values_of_large_latents_are_all_equal():
    for seed in range(6):
        ours, _ = drawn(cpu_noise.compute_randn, seed, (4, 96, 96 + seed))  # every tail length's neighbour
        assert same_bits(ours, drawn(torch_randn, seed, (4, 96, 96 + seed))[0]), seed


def test_what_torch_computes_the_same_on_every_build_is_torchs_own():
    # under 16 values (the serial double Box-Muller) and float64 (the scalar template in double)
    for shape, dtype in (((15,), torch.float32), ((1, 4, 8, 8), torch.float64), ((7,), torch.float64)):
        ours, our_generator = drawn(cpu_noise.compute_randn, 3, shape, dtype)
        theirs, their_generator = drawn(torch_randn, 3, shape, dtype)
        assert torch.equal(ours, theirs) and torch.equal(our_generator.get_state(), their_generator.get_state())


@needs_avx2
def test_randn_is_torchs_own_kernel_where_that_kernel_gives_these_values():
    assert cpu_noise.torch_is_avx2()
    assert same_bits(drawn(cpu_noise.randn, 5, (1, 4, 8, 8))[0], drawn(torch_randn, 5, (1, 4, 8, 8))[0])


def test_a_generator_that_is_not_one_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="generator must be a torch.Generator, got int"):
        cpu_noise.randn((16,), 7)


CHILD = """
import json, sys
import numpy as np, torch
torch.randn(1)  # ATen reads ATEN_CPU_CAPABILITY at its first operation: before seedlab would set its baseline
from diffusers.schedulers import scheduling_euler_ancestral_discrete as euler_a
from seedlab.engine import cpu_noise, noise
reference, shapes = np.load(sys.argv[1]), json.loads(sys.argv[2])
noise.route_cpu_draws()
found = {"capability": torch.backends.cpu.get_cpu_capability(), "avx2": cpu_noise.torch_is_avx2()}
for index, shape in enumerate(shapes):
    expected = reference[f"v{index}"]
    own = torch.randn(shape, generator=torch.Generator().manual_seed(index)).numpy()
    ours = cpu_noise.randn(shape, torch.Generator().manual_seed(index)).numpy()
    routed = euler_a.randn_tensor(tuple(shape), generator=torch.Generator().manual_seed(index)).numpy()
    found[str(index)] = [int((own.view(np.int32) != expected.view(np.int32)).sum()),
                         bool(np.array_equal(ours.view(np.int32), expected.view(np.int32))),
                         bool(np.array_equal(routed.view(np.int32), expected.view(np.int32)))]
print(json.dumps(found))
"""


@needs_avx2
def test_a_torch_without_the_avx2_kernel_differs_and_cpu_noise_still_gives_the_avx2_values(tmp_path):
    shapes = [[1, 4, 8, 8], [17], [4, 32, 32]]
    values = {f"v{index}": torch_randn(shape, torch.Generator().manual_seed(index)).numpy()
              for index, shape in enumerate(shapes)}
    np.savez(tmp_path / "avx2.npz", **values)
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "SEEDLAB_CPU_ISA": "native", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "avx2.npz"), json.dumps(shapes)], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = json.loads(out.strip().splitlines()[-1])
    assert found["capability"] == "DEFAULT" and found["avx2"] is False
    for index, shape in enumerate(shapes):
        own_differing, ours_equal, routed_equal = found[str(index)]
        assert own_differing > 0, f"torch's scalar kernel gave the AVX2 values for {shape}"
        assert ours_equal and routed_equal, shape


@pytest.fixture
def computed(monkeypatch):
    """Every cpu_noise.randn computed, as on a machine without the AVX2 kernel; counts the computed draws."""
    calls = []
    compute = cpu_noise.compute_randn

    def counted(*args, **kwargs):
        calls.append(args[0])
        return compute(*args, **kwargs)

    monkeypatch.setattr(cpu_noise, "torch_is_avx2", lambda: False)
    monkeypatch.setattr(cpu_noise, "compute_randn", counted)
    return calls


@needs_avx2
def test_diffusers_schedulers_draw_their_step_noise_through_cpu_noise(computed):
    from diffusers import EulerAncestralDiscreteScheduler
    from diffusers.schedulers import scheduling_euler_ancestral_discrete as euler_a

    noise.route_cpu_draws()
    assert euler_a.randn_tensor is noise.randn_tensor
    scheduler = EulerAncestralDiscreteScheduler()
    scheduler.set_timesteps(3)
    sample = torch.linspace(-1, 1, 4 * 8 * 8).reshape(1, 4, 8, 8)
    timestep = scheduler.timesteps[0]
    routed = scheduler.step(sample * 0.5, timestep, sample, generator=torch.Generator().manual_seed(3)).prev_sample
    assert computed == [(1, 4, 8, 8)]
    scheduler.set_timesteps(3)
    with_torch = _step_with_diffusers_draw(scheduler, sample * 0.5, timestep, sample, euler_a)
    assert same_bits(routed, with_torch)


def _step_with_diffusers_draw(scheduler, output, timestep, sample, module):
    """The same step with diffusers' own randn_tensor put back for it."""
    routed, module.randn_tensor = module.randn_tensor, noise._DIFFUSERS_RANDN_TENSOR
    try:
        return scheduler.step(output, timestep, sample, generator=torch.Generator().manual_seed(3)).prev_sample
    finally:
        module.randn_tensor = routed


@needs_avx2
def test_randn_tensor_draws_as_diffusers_does_for_one_generator_or_a_list(computed):
    one = noise.randn_tensor((2, 4, 8, 8), generator=torch.Generator().manual_seed(1), dtype=torch.float32)
    rows = noise.randn_tensor((2, 4, 8, 8), generator=[torch.Generator().manual_seed(s) for s in (1, 2)])
    assert same_bits(one, noise._DIFFUSERS_RANDN_TENSOR((2, 4, 8, 8), generator=torch.Generator().manual_seed(1)))
    diffusers_rows = noise._DIFFUSERS_RANDN_TENSOR((2, 4, 8, 8), generator=[torch.Generator().manual_seed(s)
                                                                            for s in (1, 2)])
    assert same_bits(rows, diffusers_rows) and len(computed) == 3
    assert noise.randn_tensor((3, 5)).shape == (3, 5)  # no generator: diffusers' own call


@needs_avx2
def test_torchsdes_trees_draw_through_cpu_noise(computed):
    from torchsde._brownian import brownian_interval

    noise.route_cpu_draws()
    drawn_values = brownian_interval._randn((2, 16), torch.float32, torch.device("cpu"), 12345)
    generator = torch.Generator().manual_seed(12345)
    assert same_bits(drawn_values, torch.randn((2, 16), generator=generator)) and computed == [(2, 16)]


@needs_avx2
def test_the_starting_noise_of_rng_cpu_is_computed_where_torch_differs(computed):
    assert same_bits(noise.randn(9, (1, 4, 8, 8)), drawn(torch_randn, 9, (1, 4, 8, 8))[0])
    assert computed == [(1, 4, 8, 8)]
