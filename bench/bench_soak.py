"""Soak run against the real app: many requests from new sessions, the server's memory per 100.

    python bench/bench_soak.py [--model embedded] [--requests 400] [--threads 1] [--sessions 50]

Starts `python app.py` (bench_load's start-up) keeping at most SESSIONS sessions' state (SEEDLAB_SESSIONS; the
default server keeps 512, each a few hundred KB: a bounded store, filled by the first SESSIONS visitors), sends
REQUESTS small grid requests, each from a new gradio_client session (what anonymous visitors do), and prints the
server's resident memory (RSS) after every 100, the growth per 100 requests, and whether it stayed flat (< 5 MiB
per 100 once the sessions' store is full: the first SESSIONS visitors fill it and warm caches). Round 4 of the
hostile visitors (issue 52), 1,000 visitors with the default 512 sessions: 610 MiB at start, 828 after 500, then
837, 840, 846, 844, 841 (+1.0 MiB per 100 from 600 on). Every tenth visitor also
reproduces a link, and every tenth (another one) makes a preview and finishes it.
"""

from __future__ import annotations

import argparse
import os
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
    parser.add_argument("--sessions", type=int, default=50, help="sessions whose state the server keeps")
    args = parser.parse_args()
    os.environ["SEEDLAB_SESSIONS"] = str(args.sessions)  # the app's environment (bench_load.start_app)

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
            if index % 10 == 5:
                _, previews = client.predict(prompt=f"a red square {index}", seeds=str(index),
                                             num_inference_steps=args.steps + 1, api_name="/preview")
                client.predict(previews[0]["link"], api_name="/finish")
            if index % 100 == 0:
                marks.append(rss_mib(process))
                print(f"after {index} requests: {marks[-1]:.0f} MiB ({marks[-1] - marks[-2]:+.1f} MiB per 100)")
        # The session store fills with the first SESSIONS visitors (a few hundred KB each): growth counts from the
        # first hundred past it, where a leak would show.
        full = max(1, -(-args.sessions // 100))  # the mark at or past SESSIONS requests
        growth = [b - a for a, b in zip(marks[full:], marks[full + 1:])]
        per_100 = sum(growth) / len(growth) if growth else float("nan")
        print(f"growth once the {args.sessions} sessions' store is full (after {100 * full} requests): "
              f"{per_100:+.1f} MiB per 100 requests ({'flat' if per_100 < FLAT_MIB_PER_100 else 'GROWING'})")
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
