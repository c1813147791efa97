"""Benchmark: an 8-seed grid as a visitor sees it, from the page's Generate to its last new cell.

    python bench/bench_page.py [--model embedded] [--seeds 8] [--steps 20] [--runs 5]

It starts the real app (`python app.py`, the machine's defaults) and drives it from Chromium as a
visitor does: type the seeds, click Generate, wait until the grid shows every new image, decoded.
Against it, ONE plain batched diffusers call of the same images in this process (a generator list,
torch's default thread count). The browser shares the machine's cores with the app, as on a laptop.
The two alternate; with the machine's noise the least disturbed run of each (the fastest) is compared,
and the medians are printed beside it. Needs Chromium at /usr/bin/chromium.
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

import torch  # noqa: E402
from bench_grid import batched_grid  # noqa: E402
from bench_speed import start_app  # noqa: E402

import seedlab  # noqa: E402
from tests.settle import TRACKER, settle  # noqa: E402

CHROMIUM = "/usr/bin/chromium"


def page_grid(page, seeds: str, count: int, steps: int) -> float:
    """Seconds from the click on Generate to the last new cell shown (all `count` images decoded)."""
    page.locator("#seeds textarea").fill(seeds)
    page.locator("#num-inference-steps input").fill(str(steps))
    settle(page)
    page.evaluate("""() => { window.__clicked = performance.now();
        window.__before = new Set([...document.querySelectorAll('#grid .thumbnail-item img')].map(img => img.src)); }""")
    page.locator("#generate").click()
    done = page.wait_for_function(
        """count => {
            const images = [...document.querySelectorAll('#grid .thumbnail-item img')];
            if (images.length !== count || images.some(img => window.__before.has(img.src))) return false;
            if (!images.every(img => img.complete && img.naturalWidth > 0)) return false;
            return performance.now() - window.__clicked;
        }""", arg=count, polling="raf", timeout=600_000)
    seconds = done.json_value() / 1000
    settle(page)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    model = seedlab.load_model(args.model, torch.device("cpu"))
    recipe = seedlab.Recipe(prompt="a red circle on a blue background", model=args.model,
                            num_inference_steps=args.steps)
    folder = Path(tempfile.mkdtemp(prefix="bench-page-"))
    process, url = start_app(args.model, folder)
    page_times, batched_times = [], []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"])
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.add_init_script(TRACKER)
            page = context.new_page()
            page.set_default_timeout(600_000)
            page.goto(url)
            page.wait_for_function("document.body.dataset.seedlab === 'ready'")
            page_grid(page, "100-101", 2, args.steps)  # warm-up: the app's and the browser's first use
            batched_grid(model, recipe, [100, 101])
            for run in range(args.runs):
                first = 1000 + run * args.seeds
                seeds = list(range(first, first + args.seeds))
                page_times.append(page_grid(page, f"{first}-{first + args.seeds - 1}", args.seeds, args.steps))
                start = time.perf_counter()
                batched_grid(model, recipe, seeds)
                batched_times.append(time.perf_counter() - start)
                print(f"run {run + 1}: page {page_times[-1]:.2f} s, one batched diffusers call {batched_times[-1]:.2f} s",
                      flush=True)
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(f"page grid (Generate to last cell) / one batched call: least disturbed "
          f"{min(page_times) / min(batched_times):.3f} ({min(page_times):.2f} s / {min(batched_times):.2f} s); "
          f"medians {statistics.median(page_times) / statistics.median(batched_times):.3f}")


if __name__ == "__main__":
    main()
