"""Benchmark: a grid with a LoRA against the same grid without it (issue 29: a LoRA costs its merge, once per set).

    python bench/bench_lora.py [--model embedded] [--seeds 4] [--steps 20] [--repeats 3]

A kohya LoRA on every attention and MLP layer (tests/reference/a1111_lora.py writes it, rank 16) is put in a
models folder given to the app by SEEDLAB_MODELS_DIR. Per image, same steps, measured in one run: each pair
is timed through the real app's HTTP API (/grid, as a user's client calls it) and in this process
(seedlab.generate_grid at the app's one thread per image), interleaved so that a noisy machine slows both
sides alike; the median of the repeats is printed with the ratio LoRA / none. Each round uses a new LoRA
weight, so every LoRA grid also pays for its merge (the worst case: a user changing the weight each time);
a second grid at the same weight shows the kept merge. The goal: ratios near 1.0. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_speed import call_http, start_app  # noqa: E402

import seedlab  # noqa: E402
from seedlab.engine.weights import library  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--prompt", default="a red circle on a blue background")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from gradio_client import Client

    from tests.reference.a1111_lora import write_kohya_lora

    folder = Path(tempfile.mkdtemp(prefix="bench-lora-"))
    (folder / "models" / "Lora").mkdir(parents=True)
    os.environ[library.ENV] = str(folder / "models")  # the app started below inherits it
    os.environ["SEEDLAB_CACHE_DIR"] = str(folder / "cache")
    seedlab.configure_process(threads=1)  # the app's default on a CPU: one thread per image
    model = seedlab.load_model(args.model, torch.device("cpu"))
    write_kohya_lora(folder / "models" / "Lora" / "bench.safetensors", model.pipeline.unet, model.pipeline.text_encoder,
                     rank=16, alpha=8.0)
    seeds = list(range(args.seeds))
    base = seedlab.Recipe(prompt=args.prompt, model=model.name, num_inference_steps=args.steps, scheduler="Euler",
                          guidance_scale=model.default_guidance, width=model.native_size[0],
                          height=model.native_size[1], prompt_syntax="a1111")
    process, url = start_app(args.model, folder)
    try:
        client = Client(url, verbose=False)
        times: dict[tuple[str, str], list[float]] = {}
        for repeat in range(args.repeats + 1):  # the first round warms both sides up and is not counted
            weight = 0.5 + 0.01 * repeat  # a new LoRA set each round: its merge is paid in "new weight"
            for case, prompt in (("none", args.prompt), ("new weight", f"{args.prompt} <lora:bench:{weight}>"),
                                 ("same weight", f"{args.prompt} <lora:bench:{weight}>")):
                start = time.perf_counter()
                seedlab.generate_grid(model, base.replace(prompt=prompt), seeds)
                backend = time.perf_counter() - start
                start = time.perf_counter()
                call_http(client, url, "/grid", prompt=prompt, seeds=f"0-{args.seeds - 1}", scheduler="Euler",
                          num_inference_steps=args.steps, prompt_syntax="a1111")
                web = time.perf_counter() - start
                if repeat:
                    times.setdefault((case, "backend"), []).append(backend / len(seeds))
                    times.setdefault((case, "web"), []).append(web / len(seeds))
        print(f"model {args.model}, {args.seeds} seeds x {args.steps} steps, LoRA rank 16 on every attention and MLP "
              f"layer, median of {args.repeats}; seconds per image")
        print(f"{'case':<12} {'route':<8} {'LoRA':>8} {'none':>8} {'ratio':>7}")
        for case in ("new weight", "same weight"):
            for route in ("web", "backend"):
                mine, theirs = statistics.median(times[case, route]), statistics.median(times["none", route])
                print(f"{case:<12} {route:<8} {mine:8.3f} {theirs:8.3f} {mine / theirs:7.2f}")
    finally:
        process.terminate()
        process.wait(timeout=60)


if __name__ == "__main__":
    main()
