"""Benchmark: previews against full images on the embedded model, and the page's preview grid.

    python bench/bench_preview.py [--seeds 16] [--steps 20] [--runs 3] [--no-page]

In this process, all measured in one run:
- what a preview predicts: the red shape of each seed's preview (a short render from the same noise, for 3 to 8
  steps) against its full image's, as intersection over union; against another seed's full image for scale
  (goals at the default PREVIEW_STEPS: >= 0.8 same seed, <= 0.35 another seed). A final image whose shape faded in
  its last steps has no shape: a preview that shows none either agrees with it (1), one that shows a shape does not
  (0); the mean over the finals that kept their shape is printed beside it;
- what previews cost: the previews / the full images of the same seeds (goal <= 0.35), both as the app and the CLI
  run them on a CPU (one thread per image, side by side in lanes) and as a Python user calls the API
  (seedlab.preview and seedlab.generate once per seed, torch's default threads);
- what finishing costs: seedlab.finish of each preview / seedlab.generate of its full recipe (goal <= 1.05; finishing
  renders from the start, so this is 1 plus noise);
- and that each finished image is the full image bit for bit.
With --page-costs N, only what a visitor waits for, through the real app from Chromium: Generate of N seeds,
Preview of N others, Finish all previews of that grid (goals: preview / generate <= 0.40, finish all / generate
<= 1.1). Otherwise, unless --no-page, the real app (`python app.py`) driven from Chromium: Preview of the same
seeds, from the click to the last cell shown (goal <= 1.2x), against the same previews in this process both ways:
the app's own route without the web (lanes) and the API as a Python user calls it. Runs alternate; the least
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
    """Intersection over union of two shapes; two images without a shape agree (1)."""
    union = (a | b).sum()
    return float((a & b).sum() / union) if union else 1.0


def no_shape(mask: np.ndarray) -> bool:
    return mask.sum() < VANISHED


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


def one_by_one(model, recipes) -> float:
    """Seconds for `recipes` as a Python user makes them: seedlab.preview (or generate) once each, default threads."""
    start = time.perf_counter()
    for recipe in recipes:
        if recipe.preview_steps:
            seedlab.preview(model, recipe.replace(preview_steps=0), steps=recipe.preview_steps)
        else:
            seedlab.generate(model, recipe)
    return time.perf_counter() - start


def predictions(model, base: seedlab.Recipe, seeds: list[int]) -> None:
    """Shape IoU and cost of short renders of 3 to 8 steps against the full images; finishing against full renders."""
    full_recipes = [base.replace(seed=seed) for seed in seeds]
    full_s, full = in_lanes(many, model, full_recipes)
    finals = [shape(result.image) for result in full]
    faded = sum(no_shape(final) for final in finals)
    print(f"{len(seeds)} full images ({base.num_inference_steps} steps): {full_s:.2f} s; {faded} lost their shape in "
          "the last steps")
    for steps in (3, 4, 5, 6, 8):
        looks_s, looks = in_lanes(many, model, [as_preview(recipe, steps) for recipe in full_recipes])
        masks = [shape(result.image) for result in looks]
        overlaps = [iou(mask, final) for mask, final in zip(masks, finals)]
        kept = [overlap for overlap, final in zip(overlaps, finals) if not no_shape(final)]
        foreseen = sum(no_shape(mask) and no_shape(final) for mask, final in zip(masks, finals))
        other = statistics.mean(iou(mask, finals[(i + 7) % len(finals)]) for i, mask in enumerate(masks))
        mark = "  <- default" if steps == PREVIEW_STEPS else ""
        print(f"preview of {steps} steps: shape IoU same seed {statistics.mean(overlaps):.3f} (finals that kept "
              f"their shape: {statistics.mean(kept):.3f}; faded shapes foreseen {foreseen} of {faded}), another seed "
              f"{other:.3f}; cost {looks_s / full_s:.3f} of the full images{mark}", flush=True)
        if steps == PREVIEW_STEPS:
            previews = looks
    sixteen = full_recipes[:16]
    previews_s = one_by_one(model, [as_preview(recipe) for recipe in sixteen])
    full_api_s = one_by_one(model, sixteen)
    print(f"through the API (seedlab.preview / seedlab.generate, once per seed, {torch.get_num_threads()} threads): "
          f"{len(sixteen)} previews {previews_s:.2f} s / {len(sixteen)} full images {full_api_s:.2f} s = "
          f"{previews_s / full_api_s:.3f}  (goal <= 0.35)")
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


def page(model, base: seedlab.Recipe, count: int, runs: int, history: int = 0) -> None:
    """The page's Preview against the same previews in this process: the app's route (lanes) and the API's; after
    `history` grids made first (each one an entry of the page's History)."""
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="bench-preview-"))
    process, url = start_app("embedded", folder)
    page_times, lanes_times, api_times = [], [], []
    try:
        with sync_playwright() as playwright:
            browser, tab = open_page(playwright, url)
            tab.locator("#prompt textarea").fill(PROMPT)
            page_grid(tab, "100-101", 2, base.num_inference_steps, "#preview")  # warm-up
            for made in range(history):
                took = page_grid(tab, f"{10_000 + made * count}-{10_000 + made * count + count - 1}", count,
                                 base.num_inference_steps, "#preview")
                if made in (0, history - 1):
                    print(f"History: grid {made + 1} of {history} made first took {took:.2f} s", flush=True)
            for run in range(runs):
                first = 2000 + run * count
                page_times.append(page_grid(tab, f"{first}-{first + count - 1}", count, base.num_inference_steps,
                                            "#preview"))
                recipes = [as_preview(base.replace(seed=seed)) for seed in range(first, first + count)]
                lanes_times.append(in_lanes(many, model, recipes)[0])
                api_times.append(one_by_one(model, recipes))
                print(f"run {run + 1}: page Preview {page_times[-1]:.2f} s; in this process: the app's route "
                      f"{lanes_times[-1]:.2f} s, the API once per seed {api_times[-1]:.2f} s", flush=True)
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    for name, times in (("the app's route in this process (lanes, no web)", lanes_times),
                        ("the API once per seed in this process (seedlab.preview)", api_times)):
        print(f"page preview grid / {name}: least disturbed {min(page_times) / min(times):.3f} "
              f"({min(page_times):.2f} s / {min(times):.2f} s); medians "
              f"{statistics.median(page_times) / statistics.median(times):.3f}  (goal <= 1.2)")


def page_costs(steps: int, count: int, runs: int) -> None:
    """What a visitor waits for on the page, all through the real app: Generate of `count` seeds, Preview of
    `count` others, then Finish all previews of that grid, each from the click to the last cell shown."""
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="bench-preview-costs-"))
    process, url = start_app("embedded", folder)
    times: dict[str, list[float]] = {"generate": [], "preview": [], "finish all": []}
    try:
        with sync_playwright() as playwright:
            browser, tab = open_page(playwright, url)
            tab.locator("#prompt textarea").fill(PROMPT)
            page_grid(tab, "100-101", 2, steps, "#preview")  # warm-up
            page_grid(tab, "102-103", 2, steps)
            for run in range(runs):
                first = 3000 + 2 * run * count
                generated = f"{first}-{first + count - 1}"
                previewed = f"{first + count}-{first + 2 * count - 1}"
                times["generate"].append(page_grid(tab, generated, count, steps))
                times["preview"].append(page_grid(tab, previewed, count, steps, "#preview"))
                times["finish all"].append(page_grid(tab, previewed, count, steps, "#finish-all"))
                print(f"run {run + 1}, {count} seeds on the page: " + "; ".join(
                    f"{name} {values[-1]:.2f} s" for name, values in times.items()), flush=True)
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    least = {name: min(values) for name, values in times.items()}
    middle = {name: statistics.median(values) for name, values in times.items()}
    # The page's own costs per update (webui/streaming.py) come on top of the backend's ratio (about 0.31 at 5 of
    # 20 steps): a preview grid should still take under 0.4 of a full one; finishing them all about a full grid.
    for name, goal in (("preview", "<= 0.40"), ("finish all", "<= 1.1")):
        print(f"page {name} / page generate, {count} seeds: least disturbed {least[name] / least['generate']:.3f} "
              f"({least[name]:.2f} s / {least['generate']:.2f} s); medians "
              f"{middle[name] / middle['generate']:.3f}  (goal {goal})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=64, help="seeds for the overlap (the costs use 16 of them)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-page", action="store_true")
    parser.add_argument("--page-costs", type=int, default=0, metavar="N",
                        help="only the page's own costs: Generate, Preview and Finish all of N seeds each")
    parser.add_argument("--history", type=int, default=0, help="page preview grids made before the measured ones "
                        "(History keeps 40; 26 such grids fill its 400 images)")
    args = parser.parse_args()
    if args.page_costs:
        page_costs(args.steps, args.page_costs, args.runs)
        return
    seedlab.configure_process()  # the app's CPU kernels, so the lanes run as the app's do
    model = seedlab.load_model("embedded", torch.device("cpu"))
    base = seedlab.Recipe(prompt=PROMPT, num_inference_steps=args.steps, guidance_scale=model.default_guidance)
    in_lanes(many, model, [base, as_preview(base)])  # warm-up: traces, first calls
    predictions(model, base, list(range(1000, 1000 + args.seeds)))
    if not args.no_page:
        page(model, base, 16, args.runs, args.history)


if __name__ == "__main__":
    main()
