"""Benchmark: every speed ratio SeedLab promises, measured in one run on this machine.

    python bench/bench_speed.py [--model embedded] [--seeds 8] [--steps 20] [--repeats 3] [--no-sweep]

It starts the real app (`python app.py` with the machine's defaults: one thread per image, images
side by side in lanes, or in worker processes when the model's UNet is not traced) and measures what a user
experiences through the app's HTTP API, both
with gradio_client and as a plain HTTP client (curl) calls it, interleaved with the same work done
in this process, so a noisy machine slows every side alike:
- exact grid / batched: an N-seed grid via /grid against ONE plain batched diffusers call of the
  same N images (a generator list, torch's default thread count): the goal is <= 1.0;
- web / backend: /grid against the backend doing the same in this process by the app's route
  (lanes, or seedlab.scale.workers: the same worker processes and threads as the app): the goal is
  <= 1.10; the other route is timed too;
- seedlab / plain: SeedLab's per-image path against plain per-seed diffusers calls, one lane at
  the same thread count (goal <= 1.05), with identical pixels;
- link re-open / generation: /reproduce of a link the server made (served from its record) against
  /reverify of the same link (regenerated): the goal is <= 0.05;
- a 4x4 seeds x variations matrix through /matrix (seconds);
- SeedLab's traced UNet calls against the same path untraced (one lane), with identical pixels;
- a single image at 1 thread against 2 threads: what the app's default costs one image;
- sweep throughput with 1 and 2 workers, the scaling ratio and peak memory per worker
  (bench_sweep.py's measurement).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_grid import batched_grid, direct_grid  # noqa: E402

import seedlab  # noqa: E402
from seedlab.engine.models import default_lanes  # noqa: E402
from seedlab.scale.workers import Workers  # noqa: E402


def start_app(model: str, folder: Path) -> tuple[subprocess.Popen, str]:
    """`python app.py` on a free local port, with the machine's default threads and lanes."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port), "TMPDIR": str(folder),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "SEEDLAB_VISITOR_SECONDS": "100000"}
    for name in ("SEEDLAB_THREADS", "SEEDLAB_LANES", "OMP_NUM_THREADS"):
        env.pop(name, None)
    with open(folder / "app.log", "wb") as log:  # the app writes to its own copy of the handle
        process = subprocess.Popen([sys.executable, "app.py", "--model", model, "--device", "cpu"], cwd=ROOT, env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the app exited: see {folder / 'app.log'}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return process, url
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError("the app did not start within 300 s")


def call_http(client, url: str, api_name: str, session: str | None = None, **values) -> list:
    """One call of the app's HTTP API as `curl` makes it (POST, then read the event stream to its end).

    gradio_client adds its own cost on top (a background thread, and it downloads every file of every
    streamed update again); both are measured.
    """
    parameters = client.view_api(return_format="dict", print_info=False)["named_endpoints"][api_name]["parameters"]
    data = [values.get(p["parameter_name"], p.get("parameter_default")) for p in parameters]
    body = {"data": data} if session is None else {"data": data, "session_hash": session}
    request = urllib.request.Request(f"{url}gradio_api/call{api_name}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    event = json.load(urllib.request.urlopen(request))["event_id"]
    stream = urllib.request.urlopen(f"{url}gradio_api/call{api_name}/{event}").read().decode()
    kind, last = None, None
    for line in stream.splitlines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: ") and kind == "complete":
            last = json.loads(line[6:])
        elif line.startswith("data: ") and kind == "error":
            raise RuntimeError(f"{api_name}: {line[6:]}")
    return last


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def with_threads(count: int, fn):
    """Run `fn` at `count` torch threads (the bench process switches between the app's and torch's default)."""
    def run():
        before = torch.get_num_threads()
        torch.set_num_threads(count)
        try:
            return fn()
        finally:
            torch.set_num_threads(before)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--prompt", default="a red circle on a blue background")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweep throughput part")
    args = parser.parse_args()

    from gradio_client import Client

    seedlab.configure_process()
    cores = torch.get_num_threads()  # torch's default: one per core
    model = seedlab.load_model(args.model, torch.device("cpu"))
    lanes = default_lanes(torch.device("cpu"), 1)
    width, height = model.native_size
    recipe = seedlab.Recipe(prompt=args.prompt, model=model.name, num_inference_steps=args.steps,
                            guidance_scale=model.default_guidance, width=width, height=height)
    seeds = list(range(args.seeds))
    seeds_text = f"0-{args.seeds - 1}"
    grid_recipes = seedlab.grid_recipes(recipe, seeds)

    folder = Path(tempfile.mkdtemp(prefix="seedlab-bench-"))
    server, url = start_app(args.model, folder)
    workers = Workers(args.model, workers=lanes, threads=1)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # the app says how it generates; its workers (if any) must be ready
            log = (folder / "app.log").read_text()
            if "worker processes ready" in log or ("side by side" in log and "worker processes starting" not in log):
                break
            time.sleep(0.5)
        app_route = "backend grid" if "worker processes starting" in log else "lanes grid"
        if not workers.wait_ready(300):
            raise RuntimeError(f"the bench's workers did not start: {workers.error}")
        client = Client(url, verbose=False)
        grid_args = {"prompt": args.prompt, "seeds": seeds_text, "num_inference_steps": args.steps,
                     "guidance_scale": model.default_guidance, "api_name": "/grid"}

        def backend(count: int):
            model.lanes = count
            try:
                return seedlab.generate_grid(model, recipe, seeds)
            finally:
                model.lanes = 1

        one = recipe.replace(seed=12345)
        eager = dataclasses.replace(model, traced=False, _lane_copies=[], _traced_unet=None)
        runs = {
            "web grid": lambda: client.predict(**grid_args),
            "batched": with_threads(cores, lambda: batched_grid(model, recipe, seeds)),
            "backend grid": lambda: [e for e in workers.stream(grid_recipes) if isinstance(e, seedlab.Result)],
            "lanes grid": with_threads(1, lambda: backend(lanes)),
            "seedlab 1 lane": with_threads(1, lambda: backend(1)),
            "untraced 1 lane": with_threads(1, lambda: seedlab.generate_grid(eager, recipe, seeds)),
            "plain per seed": with_threads(1, lambda: direct_grid(model, recipe, seeds)),
            "image 1 thread": with_threads(1, lambda: seedlab.generate(model, one)),
            "image 2 threads": with_threads(2, lambda: seedlab.generate(model, one)),
        }
        for fn in runs.values():  # warm-up: first calls pay for allocations and lazy imports
            fn()
        _, results = runs["web grid"]()
        link = results[0]["link"]
        http_grid = {k: v for k, v in grid_args.items() if k != "api_name"}
        added = {
            "web grid (HTTP)": lambda: call_http(client, url, "/grid", **http_grid),
            "link from record": lambda: client.predict(link_or_recipe=link, api_name="/reproduce"),
            "link regenerated": lambda: client.predict(link_or_recipe=link, api_name="/reverify"),
            "record (HTTP)": lambda: call_http(client, url, "/reproduce", link_or_recipe=link),
            "regenerated (HTTP)": lambda: call_http(client, url, "/reverify", link_or_recipe=link),
            # As a page (or a client that keeps its session_hash) calls: Gradio builds a new session's state
            # once, not per call (about 13 ms for this UI's components).
            "record (session)": lambda: call_http(client, url, "/reproduce", "bench", link_or_recipe=link),
            "regenerated (session)": lambda: call_http(client, url, "/reverify", "bench", link_or_recipe=link),
            # Issue 12's figure: a 4x4 seeds x variations matrix (16 images) through the public /matrix.
            "4x4 matrix (HTTP)": lambda: call_http(client, url, "/matrix", **{
                **http_grid, "seeds": "0-3", "variations": ", at night\n, artsy\n, highly realistic"}),
        }
        for name, fn in added.items():
            runs[name] = fn
            fn()

        times: dict[str, list[float]] = {name: [] for name in runs}
        outputs: dict[str, object] = {}
        for _ in range(args.repeats):
            for name, fn in runs.items():
                seconds, outputs[name] = timed(fn)
                times[name].append(seconds)
    finally:
        workers.close()
        server.terminate()
        server.wait(timeout=30)
    median = {name: statistics.median(values) for name, values in times.items()}

    web = [record["fingerprint"] for record in outputs["web grid"][1]]
    backend_prints = [result.fingerprint for result in outputs["backend grid"]]
    lane_prints = [result.fingerprint for result in outputs["lanes grid"]]
    http_prints = [record["fingerprint"] for record in outputs["web grid (HTTP)"][1]]
    ours = [np.asarray(r.image) for r in outputs["seedlab 1 lane"]]
    untraced = [np.asarray(r.image) for r in outputs["untraced 1 lane"]]
    plain = [np.asarray(i.convert("RGB")) for i in outputs["plain per seed"]]
    record_verdict, fresh_verdict = outputs["link from record"][1], outputs["link regenerated"][1]

    print(f"model {model.name}, {args.seeds} seeds, {args.steps} steps, {width}x{height}, guidance "
          f"{recipe.guidance_scale:g}; {cores} cores; app: 1 thread per image, "
          f"{'worker processes' if app_route == 'backend grid' else 'lanes'} ({lanes}); "
          f"{args.repeats} interleaved repeats (medians)")
    for name in runs:
        print(f"  {name:17s} median {median[name]:.3f} s  (min {min(times[name]):.3f}, max {max(times[name]):.3f})")
    print(f"exact grid via /grid / one batched call    = {median['web grid'] / median['batched']:.3f}  (goal <= 1.0)")
    print(f"web /grid / backend ({app_route})       = {median['web grid'] / median[app_route]:.3f}  "
          "(goal <= 1.10)")
    print(f"exact grid via HTTP /grid / batched call   = {median['web grid (HTTP)'] / median['batched']:.3f}  "
          "(the same, as curl calls it: no gradio_client on top)")
    print(f"web HTTP /grid / backend ({app_route})  = {median['web grid (HTTP)'] / median[app_route]:.3f}")
    print(f"worker processes grid / batched call       = {median['backend grid'] / median['batched']:.3f}")
    print(f"lanes (threads) grid / batched call        = {median['lanes grid'] / median['batched']:.3f}")
    print(f"seedlab / plain diffusers (1 lane)         = {median['seedlab 1 lane'] / median['plain per seed']:.3f}  "
          "(goal <= 1.05)")
    print(f"link re-open via gradio_client: record / regeneration = "
          f"{median['link from record'] / median['link regenerated']:.3f}")
    print(f"link re-open, HTTP: record / regeneration = {median['record (HTTP)'] / median['regenerated (HTTP)']:.3f}  "
          "(goal <= 0.05)")
    print(f"link re-open, HTTP in one session: record / regeneration = "
          f"{median['record (session)'] / median['regenerated (session)']:.3f}")
    print(f"4x4 matrix via HTTP /matrix: {median['4x4 matrix (HTTP)']:.2f} s "
          f"({len(outputs['4x4 matrix (HTTP)'][1])} cells)")
    print(f"traced / untraced UNet calls (1 lane)      = {median['seedlab 1 lane'] / median['untraced 1 lane']:.3f}")
    print(f"one image at 1 thread / at 2 threads       = {median['image 1 thread'] / median['image 2 threads']:.3f}  "
          "(what the app's default costs a single image)")
    print(f"web grid == HTTP grid == workers == lanes fingerprints: "
          f"{web == http_prints == backend_prints == lane_prints}; "
          f"seedlab == plain pixels: {all(np.array_equal(a, b) for a, b in zip(ours, plain))}; "
          f"traced == untraced pixels: {all(np.array_equal(a, b) for a, b in zip(ours, untraced))}; "
          f"record verdict exact {record_verdict['exact']} "
          f"(served from record {record_verdict['served_from_record']}), "
          f"regenerated exact {fresh_verdict['exact']}")

    if not args.no_sweep:
        from bench_sweep import measure, report

        sweep_args = argparse.Namespace(model=args.model, prompt=args.prompt, steps=args.steps, images=24)
        sweeps = [measure(sweep_args, workers, max(1, cores // workers)) for workers in (1, 2)]
        report(sweeps, prefix="sweep ")


if __name__ == "__main__":
    main()
