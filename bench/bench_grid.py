"""Benchmark: a 4-seed grid through SeedLab vs the same pipeline called directly, in one run.

    python bench/bench_grid.py [--model embedded] [--steps 20] [--repeats 7]

Prints medians and ratios measured in the same process, interleaved (this machine is noisy):
- the median 4-image grid through SeedLab, wall-clock and CPU seconds (the process's, every thread: targets
  <= 2 s wall for embedded, <= 1 s of CPU for embedded-v2, at 20 steps);
- seedlab / direct: SeedLab's overhead over plain diffusers calls, one generator per seed (goal <= 1.05);
- per-seed / batched: what the bit-exact grid (one batch-1 call per seed) costs against one batched
  call with a generator list, and whether the batched call's pixels differ from solo runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import seedlab


def direct_grid(model: seedlab.Model, recipe: seedlab.Recipe, seeds: list[int]) -> list:
    """What a diffusers user writes: one call per seed, each with its own CPU generator."""
    pipe, images = model.pipeline, []
    for seed in seeds:
        pipe.scheduler = model.make_scheduler(recipe.scheduler)
        images += pipe(
            recipe.prompt,
            num_inference_steps=recipe.num_inference_steps,
            guidance_scale=recipe.guidance_scale,
            width=recipe.width,
            height=recipe.height,
            generator=torch.Generator("cpu").manual_seed(seed),
        ).images
    return images


def batched_grid(model: seedlab.Model, recipe: seedlab.Recipe, seeds: list[int]) -> list:
    """One batched call with a generator list: faster on big devices, but not bit-exact to solo runs."""
    pipe = model.pipeline
    pipe.scheduler = model.make_scheduler(recipe.scheduler)
    return pipe(
        [recipe.prompt] * len(seeds),
        num_inference_steps=recipe.num_inference_steps,
        guidance_scale=recipe.guidance_scale,
        width=recipe.width,
        height=recipe.height,
        generator=[torch.Generator("cpu").manual_seed(s) for s in seeds],
    ).images


def timed(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of the whole process, fn's value)."""
    start, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - start, time.process_time() - cpu, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="default: what new images are made with (embedded-v2 where "
                                                       "its weights are here, else embedded)")
    parser.add_argument("--prompt", default=None, help="default: the page's example prompt for the model")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--guidance", type=float, default=None, help="default: the model's")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from seedlab.engine.recipe import new_image_model
    from webui.page import examples

    seedlab.configure_process()
    model = seedlab.load_model(args.model or new_image_model(), torch.device("cpu"))
    args.prompt = args.prompt or examples(model.name)[0]
    width, height = model.native_size
    recipe = seedlab.Recipe(prompt=args.prompt, model=model.name, num_inference_steps=args.steps,
                            guidance_scale=model.default_guidance if args.guidance is None else args.guidance,
                            width=width, height=height)
    seeds = [0, 1, 2, 3]
    runs = {
        "seedlab": lambda: seedlab.generate_grid(model, recipe, seeds),
        "direct": lambda: direct_grid(model, recipe, seeds),
        "batched": lambda: batched_grid(model, recipe, seeds),
    }
    for fn in runs.values():  # warm-up: first calls pay for allocations and lazy imports
        fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpu_times: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, object] = {}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            seconds, cpu_seconds, outputs[name] = timed(fn)
            times[name].append(seconds)
            cpu_times[name].append(cpu_seconds)
    median = {name: statistics.median(values) for name, values in times.items()}

    ours = [np.asarray(r.image) for r in outputs["seedlab"]]
    direct = [np.asarray(i.convert("RGB")) for i in outputs["direct"]]
    batched = [np.asarray(i.convert("RGB")) for i in outputs["batched"]]
    differing = [int((np.abs(a.astype(int) - b.astype(int)) > 0).any(axis=-1).sum()) for a, b in zip(ours, batched)]
    max_diff = max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in zip(ours, batched))

    print(f"model {model.name}, {len(seeds)} seeds, {args.steps} steps, {width}x{height}, "
          f"guidance {recipe.guidance_scale:g}, torch threads {torch.get_num_threads()}, "
          f"{args.repeats} interleaved repeats")
    for name in runs:
        print(f"  {name:8s} median {median[name]:.3f} s  (min {min(times[name]):.3f}, max {max(times[name]):.3f})")
    print(f"4-image grid through SeedLab: median {median['seedlab']:.2f} s wall, "
          f"{statistics.median(cpu_times['seedlab']):.2f} s of CPU  (targets: embedded <= 2 s wall, "
          f"embedded-v2 <= 1 s of CPU)")
    print(f"seedlab / direct   = {median['seedlab'] / median['direct']:.3f}  (goal <= 1.05)")
    print(f"seedlab == direct pixels: {all(np.array_equal(a, b) for a, b in zip(ours, direct))}")
    print(f"per-seed / batched = {median['seedlab'] / median['batched']:.3f}  (the cost of the bit-exact grid)")
    print(f"batched == solo pixels: {all(d == 0 for d in differing)}  "
          f"(pixels differing per image: {differing}, max difference {max_diff} levels)")


if __name__ == "__main__":
    main()
