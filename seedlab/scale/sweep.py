"""Seed sweeps: thousands of images from the command line, resumable, on a process pool or a Ray cluster.

    python -m seedlab sweep --prompt "a red circle" --seeds 0-9999 --out sweep/ [--variation ", large" ...]

The folder holds `manifest.jsonl` (a header with the sweep's parameters, then one line per image:
seed, variation, prompt, path, fingerprint, link, recipe, environment), `images/` (one PNG per image,
carrying its recipe) and `sheets/` (contact sheets, one per block of seeds).

Each image is written under a temporary name, renamed into place, and only then listed in the
manifest (flushed). An interrupted sweep (Ctrl+C, a killed worker, a lost node) loses at most the
images in flight: the same command skips every listed image whose file exists and makes the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..engine import cpu
from ..engine.recipe import Recipe
from ..files.sheets import contact_sheet
from .compositions import write_composition
from .manifest import PARTIAL, Manifest
from .plan import Plan, parse_sweep_seeds
from .pool import Failed, Pool, one_line

SHEETS = "sheets"


@dataclass(frozen=True)
class Summary:
    """What one run of a sweep did."""

    made: int  # images made in this run
    failed: list[Failed]
    done: int  # images in the folder now, from this run and earlier ones
    total: int
    sheets: int  # contact sheets written in this run


def sweep_into(manifest: Manifest, base: Recipe, pool, *, base_url: str, json_lines: bool = False,
               progress_bar: bool = True) -> Summary:
    """Make every image of the manifest's plan that its folder lacks, on `pool` (a Pool or a RayPool).

    `pool` may be None when the folder lacks nothing: then only missing contact sheets are written.
    """
    plan = manifest.plan
    left = _missing_per_sheet(plan, manifest.done)
    issued: dict[int, int] = {}  # the pool's index of a recipe -> its image number

    def recipes():
        for index, number in enumerate(n for n in range(len(plan)) if n not in manifest.done):
            seed, variation = plan.image(number)
            issued[index] = number
            yield base.replace(seed=seed, prompt=plan.prompts[variation])

    made, failed, sheets = 0, [], 0
    with tqdm(total=len(plan), initial=len(manifest.done), unit="img", desc="sweep", smoothing=0.05,
              disable=not progress_bar) as bar:
        for item in pool.map(recipes()) if pool is not None else ():
            number = issued.pop(item.index)
            if isinstance(item, Failed):
                failed.append(item)
                bar.write(f"seed {item.recipe.seed} ({item.recipe.prompt}): {item.error}", file=sys.stderr)
                continue
            entry = manifest.add(number, item, base_url)
            made += 1
            bar.update()
            if json_lines:
                print(json.dumps(entry), flush=True)
            left[number // plan.sheet_size] -= 1
            if left[number // plan.sheet_size] == 0:
                sheets += write_sheet(manifest.folder, plan, number // plan.sheet_size)
    # Sheets whose images were all made by earlier runs that stopped before writing them.
    sheets += sum(write_sheet(manifest.folder, plan, sheet) for sheet, missing in left.items() if missing == 0)
    return Summary(made, failed, len(manifest.done), len(plan), sheets)


def _missing_per_sheet(plan: Plan, done: set[int]) -> dict[int, int]:
    size = plan.sheet_size
    left = {sheet: min(size, len(plan) - sheet * size) for sheet in range((len(plan) + size - 1) // size)}
    for number in done:
        left[number // size] -= 1
    return left


def write_sheet(folder: Path, plan: Plan, sheet: int) -> bool:
    """Write contact sheet number `sheet` unless it exists; True if written."""
    path = folder / SHEETS / f"sheet-{sheet:05d}.png"
    if path.exists():
        return False
    numbers = range(sheet * plan.sheet_size, min((sheet + 1) * plan.sheet_size, len(plan)))
    cells = [(folder / plan.path(n), str(plan.image(n)[0])) for n in numbers]
    width = 8 if len(plan.prompts) == 1 else len(plan.prompts)  # with variations: one seed per row
    rows = [cells[i:i + width] for i in range(0, len(cells), width)]
    page = contact_sheet(rows, list(plan.labels) if len(plan.prompts) > 1 else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = folder / PARTIAL / path.name
    page.save(partial, format="PNG")
    os.replace(partial, path)
    return True


def run(args: argparse.Namespace, base: Recipe) -> int:
    """`python -m seedlab sweep`: exit 0 when every image is made, 1 when some failed, 130 when interrupted.

    `base` is the recipe the grid command would build from the options; bad input raises ValueError.
    """
    # 1. Validate everything, and read the folder's manifest, before any worker starts.
    from ..engine.models import resolve_device

    plan = Plan.make(parse_sweep_seeds(args.seeds), base.prompt, args.variation)
    for option in ("workers", "threads"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            raise ValueError(f"--{option} must be a positive integer, got {getattr(args, option)}")
    if not args.base_url.startswith(("http://", "https://")):
        raise ValueError(f"--base-url must start with http:// or https://, got {args.base_url!r}")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    device = resolve_device(args.device) if args.ray is None else None
    workers = args.workers or (cores if device is None or device.type == "cpu" else 1)  # one GPU: one worker
    threads = args.threads or max(1, cores // workers)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"--out needs a folder it can write to; {args.out} cannot be one ({error.strerror})") from None
    manifest = Manifest(args.out, plan, _parameters(args, base, plan, threads))

    # 2. Start the workers (unless all is done); the model fills in its size and guidance where none was given.
    pool = None
    try:
        if len(manifest.done) < len(plan):
            pool = _start_pool(args, base, workers, threads, device)
            pool.model_info()  # a model that cannot load ends here, in one line, before any output
            where = "" if args.ray is None else " on Ray" + ("" if args.ray == "local" else f" at {args.ray}")
            print(f"sweep: {len(plan) - len(manifest.done)} of {len(plan)} images to make, "
                  f"{pool.size} workers x {threads} threads{where}",
                  file=sys.stderr)
        summary = sweep_into(manifest, base, pool, base_url=args.base_url, json_lines=args.json)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(manifest.done)} of {len(plan)} images are in {args.out}; "
              "run the same command to continue", file=sys.stderr)
        return 130
    except RuntimeError as error:  # a worker that cannot even start
        print(f"seedlab: error: {one_line(error)}", file=sys.stderr)
        return 1
    finally:
        if pool is not None:
            pool.close()
        manifest.close()

    # 3. Report; a finished preview sweep's images grouped by composition, the most different first.
    print(f"sweep: {summary.done} of {summary.total} images in {args.out} ({summary.made} made now), "
          f"{summary.sheets} contact sheets written", file=sys.stderr)
    if base.preview_steps and summary.done == summary.total:
        print(f"sweep: previews by composition in {write_composition(args.out, plan, SHEETS)}", file=sys.stderr)
    if summary.failed:
        first = summary.failed[0]
        print(f"sweep: {len(summary.failed)} images failed (seed {first.recipe.seed}: {first.error}); "
              "run the same command to make them", file=sys.stderr)
        return 1
    return 0


def _parameters(args: argparse.Namespace, base: Recipe, plan: Plan, threads: int) -> dict:
    """What decides the sweep's pixels: a later run in the same folder must ask for exactly this."""
    fields = base.to_json()  # complete: admission filled the model's size and guidance where none was given
    del fields["seed"]
    # The CPU baseline too: its kernels change low bits as the thread count does (a resumed sweep must not mix them).
    return {**fields, "seeds": str(plan.seeds), "variations": list(args.variation), "threads": threads,
            "cpu_isa": cpu.in_force()}


def _start_pool(args: argparse.Namespace, base: Recipe, workers: int, threads: int, device):
    if args.ray is None:
        return Pool(base.model, workers=workers, threads=threads, device=str(device), dtype=base.dtype)
    try:
        import ray  # noqa: F401 - only to say clearly when it is missing
    except ImportError:
        raise ValueError("--ray needs the ray package: pip install -r requirements.txt") from None
    from .cluster import RayPool

    address = None if args.ray == "local" else args.ray
    return RayPool(base.model, workers=workers if address is None else args.workers, threads=threads,
                   address=address, device=args.device or "auto", dtype=base.dtype)
