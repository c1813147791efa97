"""Time a 4-image grid of the embedded model: 4 separate batch-1 calls, 20 steps, CFG on.

    python bench/bench_embedded.py [--model seedlab/embedded_model] [--repeats 5]

Prints each grid's time and the median; the target is <= 2 s on the 2-core development machine.
"""

import argparse
import statistics
import time

import torch
from diffusers import StableDiffusionPipeline


def time_grid(pipe: StableDiffusionPipeline, prompt: str, seeds: list[int], steps: int, guidance: float) -> float:
    """Seconds for one grid: one pipeline call per seed, like SeedLab renders its cells."""
    start = time.perf_counter()
    for seed in seeds:
        generator = torch.Generator("cpu").manual_seed(seed)
        pipe(prompt, num_inference_steps=steps, guidance_scale=guidance, generator=generator)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="seedlab/embedded_model")
    parser.add_argument("--prompt", default="a red circle on a blue background")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--guidance", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    pipe = StableDiffusionPipeline.from_pretrained(args.model)
    pipe.set_progress_bar_config(disable=True)
    time_grid(pipe, args.prompt, [0], args.steps, args.guidance)  # warm-up: first call allocates and dispatches
    times = [time_grid(pipe, args.prompt, [1, 2, 3, 4], args.steps, args.guidance) for _ in range(args.repeats)]
    print("grid times (s):", " ".join(f"{t:.2f}" for t in times))
    print(f"median 4-image grid, {args.steps} steps, guidance {args.guidance}: {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
