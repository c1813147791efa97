"""Whether SeedLab's `rng cpu` noise on this machine is what torch.randn gives on an AVX2 x86-64 build.

On an x86-64 machine with AVX2, `save` writes torch's own values; on any other machine (aarch64 under
../shared/arm-lab, ATEN_CPU_CAPABILITY=default), `check` compares with them and prints, per draw, how many seeds
give the same bits: cpu_noise.randn (and the generator's state after it), this machine's own torch.randn,
noise.randn (the starting noise), an Euler a and a DDPM scheduler's step noise (diffusers' randn_tensor, routed)
and a torchsde draw; then the paths cpu_noise leaves to torch (under 16 values, float64) over 100 seeds.

    python bench/check_cpu_noise.py save /tmp/avx2.npz                      # on the AVX2 machine
    ../shared/arm-lab/run.sh python bench/check_cpu_noise.py check /tmp/avx2.npz   # on ARM (~30 s emulated)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

torch.randn(1)  # ATen reads ATEN_CPU_CAPABILITY at its first operation: before importing seedlab sets its baseline
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: bench/ is not a package

from seedlab.engine import cpu_noise, noise  # noqa: E402 - after torch's first operation, on purpose

SEEDS = (0, 1, 7, 42, 2**32 + 5)
CASES = (((1, 4, 8, 8), torch.float32), ((17,), torch.float32), ((31,), torch.float32), ((2, 3, 5), torch.float32),
         ((4, 64, 64), torch.float32), ((1, 4, 96, 96), torch.float32), ((1, 4, 8, 8), torch.float16),
         ((33,), torch.bfloat16))


def raw(tensor: torch.Tensor) -> np.ndarray:
    return tensor.contiguous().view(torch.uint8).numpy().copy()


def draws(seed: int) -> dict[str, np.ndarray]:
    """Every draw for one seed, as raw bytes; torch's own under "torch ...", cpu_noise's under "cpu_noise ..."."""
    found = {}
    for shape, dtype in CASES:
        name = f"{'x'.join(map(str, shape))} {str(dtype)[6:]}"
        for label, draw in (("torch", lambda s, g, d: torch.randn(s, generator=g, dtype=d)),
                            ("cpu_noise", cpu_noise.randn)):
            generator = torch.Generator().manual_seed(seed)
            found[f"{label} {name}"] = raw(draw(shape, generator, dtype))
            found[f"{label} {name} state"] = generator.get_state().numpy().copy()
    found["noise.randn 1x4x32x32"] = raw(noise.randn(seed, (1, 4, 32, 32)))
    found.update(step_noise(seed))
    return found


def step_noise(seed: int) -> dict[str, np.ndarray]:
    """The noise two diffusers schedulers draw in two steps, and one torchsde draw, with SeedLab's routing."""
    from diffusers import DDPMScheduler, EulerAncestralDiscreteScheduler
    from torchsde._brownian import brownian_interval

    noise.route_cpu_draws()
    found = {}
    for name, scheduler in (("euler a", EulerAncestralDiscreteScheduler()), ("ddpm", DDPMScheduler())):
        module = sys.modules[type(scheduler).__module__]
        drawn, routed = [], module.randn_tensor

        def kept(*args, routed=routed, drawn=drawn, **kwargs):  # the scheduler's draw, kept to compare
            drawn.append(routed(*args, **kwargs))
            return drawn[-1]

        module.randn_tensor = kept
        try:
            scheduler.set_timesteps(4)
            sample = torch.linspace(-1, 1, 4 * 16 * 17).reshape(1, 4, 16, 17)
            generator = torch.Generator().manual_seed(seed)
            for timestep in scheduler.timesteps[:2]:
                sample = scheduler.step(sample * 0.5, timestep, scheduler.scale_model_input(sample, timestep),
                                        generator=generator).prev_sample
        finally:
            module.randn_tensor = routed
        found[f"{name} step noise"] = raw(torch.stack(drawn))
    tree_draw = brownian_interval._randn((1, 4, 16, 16), torch.float32, torch.device("cpu"), seed)
    found["Brownian tree draw (torchsde)"] = raw(tree_draw)
    return found


def torchs_own(seed: int) -> dict[str, np.ndarray]:
    """The draws cpu_noise leaves to torch: the serial double Box-Muller (under 16 values) and float64."""
    return {"serial 15": raw(torch.randn((15,), generator=torch.Generator().manual_seed(seed))),
            "float64 4x16x16": raw(torch.randn((4, 16, 16), generator=torch.Generator().manual_seed(seed),
                                               dtype=torch.float64))}


def everything() -> dict[str, np.ndarray]:
    found = {f"{seed}|{key}": value for seed in SEEDS for key, value in draws(seed).items()}
    found.update({f"{seed}|{key}": value for seed in range(100) for key, value in torchs_own(seed).items()})
    return found


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    print(f"torch {torch.__version__}, ATen capability {torch.backends.cpu.get_cpu_capability()}, "
          f"torch's kernel gives the AVX2 values: {cpu_noise.torch_is_avx2()}")
    found = everything()
    if mode == "save":
        np.savez(path, **found)
        return print(f"saved {len(found)} draws to {path}")
    reference, equal = np.load(path), {}
    for key, value in found.items():
        seed, name = key.split("|")
        if name.split(" ")[0] in ("cpu_noise", "torch"):  # both against torch's AVX2 values
            label, name = name.split(" ", 1)
            same = np.array_equal(value, reference[f"{seed}|torch {name}"])
            name = f"{label} {name}"
        else:
            same = np.array_equal(value, reference[key])
        counts = equal.setdefault(name, [0, 0])
        counts[0], counts[1] = counts[0] + same, counts[1] + 1
    print(json.dumps({name: f"{same}/{total}" for name, (same, total) in equal.items()}, indent=1))


if __name__ == "__main__":
    main()
