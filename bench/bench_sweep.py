"""Benchmark: sweep throughput with 1 and 2 workers, its scaling ratio, and peak memory per worker, in one run.

    python bench/bench_sweep.py [--model embedded] [--steps 20] [--images 24] [--threads N]

Each configuration runs the sweep's own code (worker pool, PNG files, manifest, contact sheets) into
a fresh folder. The workers start and make one warm-up image each before the clock starts, so the
rate is the steady state a long sweep sees; the start-up time is printed beside it. Threads per
worker follow the sweep's default (cores / workers) unless --threads pins them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from seedlab import Recipe, configure_process
from seedlab.scale.manifest import Manifest
from seedlab.scale.plan import Plan, parse_sweep_seeds
from seedlab.scale.pool import Pool
from seedlab.scale.sweep import sweep_into


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(args: argparse.Namespace, workers: int, threads: int) -> dict:
    started = time.perf_counter()
    with Pool(args.model, workers=workers, threads=threads) as pool:
        info = pool.model_info()
        base = Recipe(prompt=args.prompt, model=info.name, num_inference_steps=args.steps,
                      guidance_scale=info.default_guidance, width=info.native_size[0], height=info.native_size[1])
        # Warm-up: every worker loads the model and makes an image (first calls pay for allocations).
        warm = list(pool.map([base.replace(seed=10**6 + i) for i in range(workers)]))
        if any(item.environment.threads != threads for item in warm):
            raise RuntimeError("a worker ran with another thread count than it was given")
        start_up = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as folder:
            plan = Plan.make(parse_sweep_seeds(f"0-{args.images - 1}"), args.prompt, [])
            manifest = Manifest(Path(folder), plan, {"bench": workers})
            clock = time.perf_counter()
            summary = sweep_into(manifest, base, pool, base_url="http://127.0.0.1:7860/", progress_bar=False)
            seconds = time.perf_counter() - clock
            manifest.close()
        if summary.failed:
            raise RuntimeError(f"{len(summary.failed)} images failed: {summary.failed[0].error}")
        peaks = [peak_rss_mib(pid) for pid in pool.pids]
    return {"workers": workers, "threads": threads, "rate": args.images / seconds, "seconds": seconds,
            "start_up": start_up, "peaks": peaks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--prompt", default="a red circle on a blue background")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--images", type=int, default=24)
    parser.add_argument("--threads", type=int, default=None, help="threads per worker (default: cores / workers)")
    args = parser.parse_args()

    configure_process()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    runs = [measure(args, workers, args.threads or max(1, cores // workers)) for workers in (1, 2)]

    print(f"model {args.model}, {args.images} images, {args.steps} steps, {cores} cores")
    report(runs)


def report(runs: list[dict], prefix: str = "  ") -> None:
    """Print each configuration's rate, start-up and peak memory per worker, then the scaling ratio."""
    for run in runs:
        peaks = ", ".join(f"{peak:.0f}" for peak in run["peaks"])
        print(f"{prefix}{run['workers']} worker(s) x {run['threads']} thread(s): {run['rate']:.2f} images/s "
              f"({run['seconds']:.1f} s; start-up {run['start_up']:.1f} s), peak RSS per worker {peaks} MiB")
    print(f"{prefix.strip() or ''}{' ' if prefix.strip() else ''}scaling 2 workers / 1 worker = "
          f"{runs[1]['rate'] / runs[0]['rate']:.2f}x")


if __name__ == "__main__":
    main()
