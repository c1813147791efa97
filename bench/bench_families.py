"""Benchmark: SeedLab / plain diffusers per image, for every family's tiny pipeline, measured in one run.

    python bench/bench_families.py [--rounds 3] [--images 8] [--steps 4]

For each family (tests/family_features.py), the same images two ways, in the same process and round:
- plain: the family's pipeline called once per seed with its own CPU generator, as a user's loop would,
  at torch's default thread count here and at one thread (what SeedLab's lanes run each image at);
- SeedLab: `generate_grid`, as the CLI and the app run it (images side by side, one thread each, the
  prompt encoded once, traced UNet calls where the family allows), and the fingerprints checked equal
  to the one-thread plain images.
The two take turns within each round, so the machine's noise spreads over both; the ratio is taken per
round and the median round printed. Run it alone: the machine has two cores, and anything beside it
changes both sides.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diffusers import DiffusionPipeline  # noqa: E402

from seedlab import Recipe, fingerprint, generate_grid, load_model  # noqa: E402
from seedlab.engine.models import default_lanes  # noqa: E402
from tests.family_features import FAMILIES, GUIDANCE, PROMPT  # noqa: E402


def plain_images(pipe, family, seeds: list[int], steps: int, threads: int) -> tuple[float, list[str]]:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    prompted = {} if family.unconditional else {"prompt": PROMPT, "guidance_scale": GUIDANCE,
                                                "width": family.size, "height": family.size}
    try:
        start = time.perf_counter()
        prints = [fingerprint(pipe(num_inference_steps=steps, generator=torch.Generator("cpu").manual_seed(seed),
                                   **prompted, **family.plain_options).images[0]) for seed in seeds]
        return (time.perf_counter() - start) / len(seeds), prints
    finally:
        torch.set_num_threads(before)


def seedlab_images(model, recipe: Recipe, seeds: list[int]) -> tuple[float, list[str]]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the CLI's and the app's: one thread per image, images side by side
    try:
        start = time.perf_counter()
        results = generate_grid(model, recipe, seeds)
        return (time.perf_counter() - start) / len(seeds), [result.fingerprint for result in results]
    finally:
        torch.set_num_threads(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--family", action="append", choices=list(FAMILIES), help="only these (repeatable)")
    args = parser.parse_args()
    seeds = list(range(args.images))
    threads = torch.get_num_threads()
    print(f"{args.images} images of {args.steps} steps a round; plain at {threads} and 1 thread(s); "
          f"SeedLab in {default_lanes(torch.device('cpu'), 1)} lane(s) of 1 thread", flush=True)
    with tempfile.TemporaryDirectory() as root:
        for name in args.family or FAMILIES:
            family = FAMILIES[name]
            folder = family.build(Path(root) / name)
            pipe = DiffusionPipeline.from_pretrained(folder)
            pipe.set_progress_bar_config(disable=True)
            model = load_model(str(folder), torch.device("cpu"))
            model.lanes = default_lanes(torch.device("cpu"), 1)
            recipe = Recipe(prompt="" if family.unconditional else PROMPT, seed=0, model=str(folder),
                            num_inference_steps=args.steps, guidance_scale=GUIDANCE, width=family.size,
                            height=family.size)
            plain_images(pipe, family, seeds[:1], args.steps, 1), seedlab_images(model, recipe, seeds[:2])  # warm up
            ratios, ratios_one = [], []
            for _ in range(args.rounds):
                many, _ = plain_images(pipe, family, seeds, args.steps, threads)
                one, expected = plain_images(pipe, family, seeds, args.steps, 1)
                mine, prints = seedlab_images(model, recipe, seeds)
                if prints != expected:
                    raise SystemExit(f"{name}: SeedLab's images differ from plain diffusers' at one thread")
                ratios.append(mine / many)
                ratios_one.append(mine / one)
            print(f"{family.title:28s} SeedLab / plain ({threads} threads) {statistics.median(ratios):.2f} "
                  f"[{min(ratios):.2f}-{max(ratios):.2f}]   SeedLab / plain (1 thread) "
                  f"{statistics.median(ratios_one):.2f} [{min(ratios_one):.2f}-{max(ratios_one):.2f}]   "
                  f"SeedLab {mine * 1000:.0f} ms an image, the same pixels", flush=True)


if __name__ == "__main__":
    main()
