"""What SeedLab's exact CPU noise (engine/cpu_noise.py) costs against torch's own randn, in one run.

    python bench/bench_cpu_noise.py [--repeat 20]

For the latents of a 512x512 and a 1024x1024 SD image ((4, 64, 64) and (4, 128, 128) float32 values), the best of
REPEAT draws of `cpu_noise.randn` and of `torch.randn` on a fresh CPU generator, and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from seedlab.engine import cpu_noise

SHAPES = ((4, 64, 64), (4, 128, 128))


def best_seconds(draw, shape: tuple[int, ...], repeat: int) -> float:
    times = []
    for seed in range(repeat):
        generator = torch.Generator("cpu").manual_seed(seed)
        start = time.perf_counter()
        draw(shape, generator)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, ATen capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{torch.get_num_threads()} threads")
    for shape in SHAPES:
        ours = best_seconds(cpu_noise.randn, shape, args.repeat)
        theirs = best_seconds(lambda s, g: torch.randn(s, generator=g), shape, args.repeat)
        print(f"{'x'.join(map(str, shape)):>10}: cpu_noise.randn {ours * 1e3:7.3f} ms, torch.randn "
              f"{theirs * 1e3:7.3f} ms, ratio {ours / theirs:5.1f}x")


if __name__ == "__main__":
    main()
