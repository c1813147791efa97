"""Soak run against the real app: many requests from new sessions, the server's memory per 100.

    python bench/bench_soak.py [--model embedded] [--requests 400] [--threads 1]

Starts `python app.py` (bench_load's start-up), sends REQUESTS small grid requests, each from a new
gradio_client session (what anonymous visitors do), and prints the server's resident memory (RSS)
after every 100, the growth per 100 requests, and whether it stayed flat (< 5 MiB per 100 after the
first hundred, which warms caches). Every tenth visitor also reproduces a link.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradio_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import rss_mib, start_app

FLAT_MIB_PER_100 = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    process, url = start_app(args.model, threads=args.threads)
    try:
        _, results = Client(url, verbose=False).predict(prompt="warm up", seeds="0", num_inference_steps=args.steps,
                                                        api_name="/grid")
        marks = [rss_mib(process)]
        print(f"start: {marks[0]:.0f} MiB")
        for index in range(1, args.requests + 1):
            client = Client(url, verbose=False)  # a new session, as a new visitor would bring
            client.predict(prompt=f"a red circle {index}", seeds=str(index), num_inference_steps=args.steps,
                           api_name="/grid")
            if index % 10 == 0:
                client.predict(link_or_recipe=results[0]["link"], api_name="/reproduce")
            if index % 100 == 0:
                marks.append(rss_mib(process))
                print(f"after {index} requests: {marks[-1]:.0f} MiB ({marks[-1] - marks[-2]:+.1f} MiB per 100)")
        growth = [b - a for a, b in zip(marks[1:], marks[2:])]
        per_100 = sum(growth) / len(growth) if growth else float("nan")
        print(f"growth after the first 100: {per_100:+.1f} MiB per 100 requests "
              f"({'flat' if per_100 < FLAT_MIB_PER_100 else 'GROWING'})")
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
