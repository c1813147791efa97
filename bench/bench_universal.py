"""Benchmark: what the universal CPU baseline (float64 models, engine/wide.py) costs per image against avx2.

    python bench/bench_universal.py [--rounds 1] [--seeds 0-5] [--steps 20]

Each baseline is a process setting, so each is a fresh `python -m seedlab grid` on the embedded model, as a
user runs it (traced UNet, images side by side at one thread each), timed from its first image to its last
so loading, tracing and the float64 copy are left out. The baselines take turns within a round; the ratio
universal / avx2 is taken per round (target: at most 1.8) and the median round printed, with how many
images the two baselines agree on (8-bit rounding often hides the float differences).
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
from bench_cpu_isa import timed_grid

TARGET = 1.8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seeds", default="0-5")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as folder:
        for round_index in range(args.rounds):
            seconds, prints = {}, {}
            for level in ("avx2", "universal"):
                seconds[level], prints[level], kernels = timed_grid(level, args.seeds, Path(folder) / level,
                                                                    ("--steps", str(args.steps)))
                print(f"round {round_index + 1}: {level:9s} {seconds[level] * 1000:6.0f} ms per image "
                      f"(record: {kernels})", flush=True)
            ratios.append(seconds["universal"] / seconds["avx2"])
            same = sum(a == b for a, b in zip(prints["avx2"], prints["universal"]))
            print(f"round {round_index + 1}: universal / avx2 {ratios[-1]:.2f}; the fingerprints agree on {same} "
                  f"of {len(prints['avx2'])} images")
    ratio = statistics.median(ratios)
    verdict = "met" if ratio <= TARGET else "missed"
    print(f"universal / avx2 per image: {ratio:.2f} (target at most {TARGET}: {verdict})")


if __name__ == "__main__":
    main()
