"""Benchmark: what each CPU baseline (seedlab/engine/cpu.py) costs, measured in one run on this machine.

    python bench/bench_cpu_isa.py [--rounds 3] [--seeds 0-7]

Each baseline is a process setting, so every measurement is a fresh `python -m seedlab grid` (the CLI a
user runs: traced UNet, images side by side at one thread each), timed from its first image to its last
so model loading and tracing are left out. The baselines take turns within each round, so the machine's
noise spreads over all of them; the ratios are taken per round and the median round is printed.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEVELS = ("native", "avx2", "portable")


def timed_grid(level: str, seeds: str, out: Path, options: tuple[str, ...] = ()) -> tuple[float, list[str], str]:
    """Seconds from the first image to the last, the fingerprints, and the kernels the record names."""
    command = [sys.executable, "-m", "seedlab", "grid", "--prompt", "a red circle on a blue background",
               "--seeds", seeds, "--cpu-isa", level, "--out", str(out), "--json", *options]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    stamps, lines = [], []
    for line in process.stdout:
        stamps.append(time.perf_counter())
        lines.append(json.loads(line))
    if process.wait() != 0 or len(lines) < 2:
        raise SystemExit(f"grid under {level} failed")
    # The first image's time includes warm-up; the span covers the other n - 1 images.
    per_image = (stamps[-1] - stamps[0]) / (len(lines) - 1)
    return per_image, [line["fingerprint"] for line in lines], lines[0]["environment"]["cpu_isa"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seeds", default="0-7")
    args = parser.parse_args()
    ratios: dict[str, list[float]] = {"avx2 / native": [], "portable / native": [], "portable / avx2": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_index in range(args.rounds):
            seconds, prints = {}, {}
            for level in LEVELS:
                seconds[level], prints[level], kernels = timed_grid(level, args.seeds, Path(folder) / level)
                print(f"round {round_index + 1}: {level:8s} {seconds[level] * 1000:6.0f} ms per image "
                      f"(record: {kernels})", flush=True)
            ratios["avx2 / native"].append(seconds["avx2"] / seconds["native"])
            ratios["portable / native"].append(seconds["portable"] / seconds["native"])
            ratios["portable / avx2"].append(seconds["portable"] / seconds["avx2"])
            same = sum(a == b for a, b in zip(prints["avx2"], prints["native"]))
            print(f"round {round_index + 1}: avx2 and native agree on {same} of {len(prints['avx2'])} images; "
                  f"avx2 and portable on {sum(a == b for a, b in zip(prints['avx2'], prints['portable']))}")
    for name, values in ratios.items():
        print(f"{name}: {statistics.median(values):.3f} [{min(values):.3f} to {max(values):.3f}]")


if __name__ == "__main__":
    main()
