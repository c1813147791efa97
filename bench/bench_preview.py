"""Benchmark: previews against full images on the embedded model, and the page's preview grid.

    python bench/bench_preview.py [--seeds 16] [--steps 20] [--runs 3] [--no-page]

In this process (one thread per image, as the app and the CLI run them on a CPU), all measured in one run:
- what a preview predicts: the red shape of each seed's preview (a short render from the same noise, for 3 to 8
  steps) against its full image's, as intersection over union; against another seed's full image for scale
  (goals at the default PREVIEW_STEPS: >= 0.8 same seed, <= 0.35 another seed);
- what previews cost: the previews / the full images of the same seeds (goal <= 0.35);
- what finishing costs: seedlab.finish of each preview / seedlab.generate of its full recipe (goal <= 1.05; finishing
  renders from the start, so this is 1 plus noise);
- and that each finished image is the full image bit for bit.
Then, unless --no-page, the real app (`python app.py`) driven from Chromium: Preview of the same seeds, from the click
to the last cell shown, against the same previews in this process (goal <= 1.2x). Runs alternate; the least
disturbed (fastest) of each is compared, the medians printed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_page import open_page, page_grid  # noqa: E402
from bench_speed import start_app  # noqa: E402

import seedlab  # noqa: E402
from seedlab.engine.models import default_lanes  # noqa: E402
from seedlab.engine.previews import PREVIEW_STEPS, as_preview  # noqa: E402

PROMPT = "a red circle on a blue background"
VANISHED = 10  # a final image with fewer red pixels lost its shape in the last steps (docs/models.md): no preview
# made from fewer steps can show a disappearance, so the overlap is also given over the finals that kept their shape


def shape(image) -> np.ndarray:
    """The red shape: pixels whose red exceeds their green and blue by more than 80 levels."""
    rgb = np.asarray(image.convert("RGB")).astype(int)
    return (rgb[..., 0] - np.maximum(rgb[..., 1], rgb[..., 2])) > 80


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def in_lanes(function, model, recipes):
    """`function(model, recipes)` as the app runs images on a CPU: one thread each, side by side in lanes."""
    threads, lanes = torch.get_num_threads(), model.lanes
    torch.set_num_threads(1)
    model.lanes = default_lanes(torch.device("cpu"), 1)
    try:
        start = time.perf_counter()
        results = function(model, recipes)
        return time.perf_counter() - start, results
    finally:
        torch.set_num_threads(threads)
        model.lanes = lanes


def many(model, recipes):
    return list(seedlab.iter_generate(model, recipes))


def predictions(model, base: seedlab.Recipe, seeds: list[int]) -> None:
    """Shape IoU and cost of short renders of 3 to 8 steps against the full images; finishing against full renders."""
    full_recipes = [base.replace(seed=seed) for seed in seeds]
    full_s, full = in_lanes(many, model, full_recipes)
    print(f"{len(seeds)} full images ({base.num_inference_steps} steps): {full_s:.2f} s")
    for steps in (3, 4, 5, 6, 8):
        looks_s, looks = in_lanes(many, model, [as_preview(recipe, steps) for recipe in full_recipes])
        overlaps = [iou(shape(a.image), shape(b.image)) for a, b in zip(looks, full)]
        kept = [overlap for overlap, b in zip(overlaps, full) if shape(b.image).sum() >= VANISHED]
        other = statistics.mean(iou(shape(a.image), shape(full[(i + 7) % len(full)].image))
                                for i, a in enumerate(looks))
        mark = "  <- default" if steps == PREVIEW_STEPS else ""
        print(f"preview of {steps} steps: shape IoU same seed {statistics.mean(overlaps):.3f} (finals that kept "
              f"their shape, {len(kept)} of {len(full)}: {statistics.mean(kept):.3f}), another seed {other:.3f}; "
              f"cost {looks_s / full_s:.3f} of the full images{mark}", flush=True)
        if steps == PREVIEW_STEPS:
            previews = looks
    finishing, renders = [], []
    for preview, recipe in zip(previews[:4], full_recipes[:4]):
        start = time.perf_counter()
        done = seedlab.finish(model, preview)
        finishing.append(time.perf_counter() - start)
        start = time.perf_counter()
        again = seedlab.generate(model, recipe)
        renders.append(time.perf_counter() - start)
        assert done.fingerprint == again.fingerprint, "a finished preview must be its full render"
    print(f"finishing / a full render: {sum(finishing) / sum(renders):.3f} (4 images, each finished image equal to "
          "its full render bit for bit)")


def page(model, base: seedlab.Recipe, count: int, runs: int) -> None:
    """The page's Preview against the same previews in this process."""
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="bench-preview-"))
    process, url = start_app("embedded", folder)
    page_times, here_times = [], []
    try:
        with sync_playwright() as playwright:
            browser, tab = open_page(playwright, url)
            tab.locator("#prompt textarea").fill(PROMPT)
            page_grid(tab, "100-101", 2, base.num_inference_steps, "#preview")  # warm-up
            for run in range(runs):
                first = 2000 + run * count
                page_times.append(page_grid(tab, f"{first}-{first + count - 1}", count, base.num_inference_steps,
                                            "#preview"))
                recipes = [as_preview(base.replace(seed=seed)) for seed in range(first, first + count)]
                here_times.append(in_lanes(many, model, recipes)[0])
                print(f"run {run + 1}: page Preview {page_times[-1]:.2f} s, in-process previews {here_times[-1]:.2f} s",
                      flush=True)
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(f"page preview grid / in-process previews: least disturbed {min(page_times) / min(here_times):.3f} "
          f"({min(page_times):.2f} s / {min(here_times):.2f} s); medians "
          f"{statistics.median(page_times) / statistics.median(here_times):.3f}  (goal <= 1.2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=64, help="seeds for the overlap (the costs use 16 of them)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-page", action="store_true")
    args = parser.parse_args()
    seedlab.configure_process()  # the app's CPU kernels, so the lanes run as the app's do
    model = seedlab.load_model("embedded", torch.device("cpu"))
    base = seedlab.Recipe(prompt=PROMPT, num_inference_steps=args.steps, guidance_scale=model.default_guidance)
    in_lanes(many, model, [base, as_preview(base)])  # warm-up: traces, first calls
    predictions(model, base, list(range(1000, 1000 + args.seeds)))
    if not args.no_page:
        page(model, base, 16, args.runs)


if __name__ == "__main__":
    main()
