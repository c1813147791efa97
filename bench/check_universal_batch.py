"""Whether universal images are the same in a worker process and batched with other seeds (embedded model).

    python bench/check_universal_batch.py [--seeds 0,1,2,3] [--steps 20]

- worker: the seeds made by a worker process (seedlab/scale/pool.py) against the same seeds made here;
- batch: SeedLab makes every image in its own batch-1 call, so the batch is measured with plain diffusers on the
  float64 twin of the pipeline (wide.widened): one call with a generator per seed against one call per seed, and
  the same on the float32 pipeline for comparison. Prints how many float values and fingerprints differ.
"""

import argparse
import os
import sys
from pathlib import Path

os.environ["SEEDLAB_CPU_ISA"] = "universal"  # before seedlab is imported: this process runs the universal baseline
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

import seedlab
from seedlab.engine import generation, models, wide
from seedlab.engine.image import fingerprint
from seedlab.engine.recipe import Recipe
from seedlab.scale.pool import Pool

PROMPT = "a red circle on a blue background"


def worker_against_here(model, seeds: list[int], steps: int) -> str:
    recipes = [Recipe(prompt=PROMPT, seed=seed, num_inference_steps=steps) for seed in seeds]
    here = [generation.generate(model, recipe).fingerprint for recipe in recipes]
    with Pool("embedded", workers=1, threads=torch.get_num_threads()) as pool:
        there = [item.result().fingerprint for item in pool.map(recipes)]
    return f"worker process: {sum(a != b for a, b in zip(here, there))} of {len(seeds)} fingerprints differ"


def batch_against_solo(pipe, seeds: list[int], steps: int, label: str) -> str:
    """One call with a generator per seed, against one call per seed (plain diffusers, float output)."""
    common = {"num_inference_steps": steps, "guidance_scale": 2.5, "output_type": "np", "width": 64, "height": 64}
    with torch.inference_mode():
        batched = pipe(prompt=[PROMPT] * len(seeds), generator=[torch.Generator().manual_seed(s) for s in seeds],
                       **common).images
        solo = np.concatenate([pipe(prompt=PROMPT, generator=torch.Generator().manual_seed(s), **common).images
                               for s in seeds])
    values = int(np.count_nonzero(batched != solo))
    prints = sum(fingerprint(_pil(a)) != fingerprint(_pil(b)) for a, b in zip(batched, solo))
    return (f"{label}: batch of {len(seeds)} against solo calls: {values} of {solo.size} float values and "
            f"{prints} of {len(seeds)} fingerprints differ")


def _pil(image: np.ndarray):
    from PIL import Image

    return Image.fromarray((image * 255).round().astype("uint8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    seedlab.configure_process(args.threads, "universal")
    model = models.load_model("embedded", torch.device("cpu"))
    print(worker_against_here(model, seeds, args.steps), flush=True)
    pipe = model.pipeline
    pipe.scheduler = wide.exact_betas(pipe.scheduler)
    print(batch_against_solo(wide.widened(pipe), seeds, args.steps, "universal (float64 models)"), flush=True)
    print(batch_against_solo(pipe, seeds, args.steps, "float32 models (this shell's kernels)"), flush=True)


if __name__ == "__main__":
    main()
