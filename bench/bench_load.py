"""Load run against the real app: concurrent clients, a cancel, and the server's memory.

    python bench/bench_load.py [--model embedded] [--clients 4] [--requests 5] [--threads 2]

Starts `python app.py` on 127.0.0.1 (a free port), then in one run:
1. measures the server's resident memory (RSS) once it is up and warm;
2. runs CLIENTS gradio_client clients at once, REQUESTS grid requests each, and checks that
   every image equals the one the same request gets when sent alone (serially, afterwards);
3. starts a long grid, cancels it after its first progress update, and times how long until a
   short request completes (that time is the cancel's effect plus the short request itself);
4. measures RSS again after the load, and prints everything.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from gradio_client import Client

ROOT = Path(__file__).resolve().parents[1]


def start_app(model: str, threads: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "TMPDIR": tempfile.mkdtemp()}
    process = subprocess.Popen([sys.executable, "app.py", "--model", model, "--threads", str(threads)],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if process.poll() is not None:
            raise SystemExit(f"app.py exited with {process.returncode}")
        try:
            urllib.request.urlopen(url + "/gradio_api/info", timeout=2).close()
            return process, url
        except OSError:
            time.sleep(0.5)
    raise SystemExit("app.py did not start")


def rss_mib(process: subprocess.Popen) -> float:
    return psutil.Process(process.pid).memory_info().rss / 2**20


def grid(url: str, prompt: str, seeds: str, steps: int) -> list[str]:
    _, results = Client(url, verbose=False).predict(prompt=prompt, seeds=seeds, num_inference_steps=steps,
                                                   api_name="/grid")
    return [r["fingerprint"] for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="the app's torch threads (1 on a shared machine)")
    args = parser.parse_args()

    process, url = start_app(args.model, threads=args.threads)
    try:
        grid(url, "warm up", "0-3", args.steps)
        before = rss_mib(process)

        # 1. Concurrent clients, each with its own prompts and seeds.
        def client_run(index: int) -> list[tuple[tuple, list[str]]]:
            out = []
            for r in range(args.requests):
                request = (f"a red circle, load {index}-{r}", f"{100 * index + 4 * r}-{100 * index + 4 * r + 3}")
                out.append((request, grid(url, *request, args.steps)))
            return out

        start = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            answers = [a for f in [pool.submit(client_run, i) for i in range(args.clients)] for a in f.result()]
        concurrent_s = time.perf_counter() - start
        differing = sum(fps != grid(url, *request, args.steps) for request, fps in answers)

        # 2. Cancel a long grid after its first progress update; time until a short request is served.
        client = Client(url, verbose=False)
        job = client.submit(prompt="a blue star", seeds="0-15", num_inference_steps=args.steps, api_name="/grid")
        while not job.status().progress_data and not job.done():
            time.sleep(0.05)
        cancelled_at = time.perf_counter()
        job.cancel()
        grid(url, "a red circle", "1", 1)
        after_cancel_s = time.perf_counter() - cancelled_at
        start = time.perf_counter()
        grid(url, "a red circle", "1", 1)
        short_s = time.perf_counter() - start

        after = rss_mib(process)
        print(f"model {args.model}, {args.threads} torch threads: "
              f"{args.clients} concurrent clients x {args.requests} grid requests "
              f"(4 images, {args.steps} steps) in {concurrent_s:.1f} s")
        print(f"requests whose images differed from the same request sent alone: {differing} of {len(answers)}")
        print(f"cancel -> short request served: {after_cancel_s:.2f} s (the short request alone: {short_s:.2f} s)")
        print(f"server RSS before the load {before:.0f} MiB, after {after:.0f} MiB ({after - before:+.0f} MiB)")
    finally:
        process.terminate()
        process.wait(timeout=30)


if __name__ == "__main__":
    main()
