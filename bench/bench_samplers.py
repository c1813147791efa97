"""Benchmark: A1111's samplers (engine/samplers/a1111.py) against the diffusers schedulers they replace.

    python bench/bench_samplers.py [--model embedded] [--seeds 4] [--steps 20] [--repeats 3]

Per image, same steps, measured in one run: each pair is timed through the real app's HTTP API
(/grid, as a user's client calls it) and in this process (seedlab.generate_grid at the app's one
thread per image), interleaved so that a noisy machine slows both sides alike; the median of the
repeats is printed with the ratio A1111 / diffusers. The goal: every ratio <= 1.0 (an A1111 sampler
costs no more than the diffusers scheduler it replaces). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
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

# (A1111 sampler, the diffusers scheduler SeedLab mapped it to before, extra recipe fields)
PAIRS = [
    ("Euler", "EulerDiscreteScheduler", {}),
    ("Euler a", "EulerAncestralDiscreteScheduler", {}),
    ("Heun", "HeunDiscreteScheduler", {}),
    ("DPM2", "KDPM2DiscreteScheduler", {}),
    ("DPM2 a", "KDPM2AncestralDiscreteScheduler", {}),
    ("LMS", "LMSDiscreteScheduler", {}),
    ("DPM++ 2M", "DPMSolverMultistepScheduler", {}),
    ("DPM++ SDE", "DPMSolverSDEScheduler", {}),
    # A1111's own samplers, ComfyUI's and stable-diffusion.cpp's, against the diffusers class of the same order
    ("DDIM (A1111)", "DDIMScheduler", {}),
    ("PLMS (A1111)", "PNDMScheduler", {}),
    ("UniPC (A1111)", "UniPCMultistepScheduler", {}),
    ("euler", "EulerDiscreteScheduler", {"schedule": "normal"}),
    ("dpmpp_2m", "DPMSolverMultistepScheduler", {"schedule": "karras"}),
    ("uni_pc", "UniPCMultistepScheduler", {"schedule": "normal"}),
    ("lcm", "LCMScheduler", {"schedule": "normal"}),
    ("euler (sd.cpp)", "EulerDiscreteScheduler", {}),
    ("dpm++2m (sd.cpp)", "DPMSolverMultistepScheduler", {}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--prompt", default="a red circle on a blue background")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from gradio_client import Client

    seedlab.configure_process(threads=1)  # the app's default on a CPU: one thread per image
    model = seedlab.load_model(args.model, torch.device("cpu"))
    offered = set(model.schedulers)
    pairs = [pair for pair in PAIRS if pair[1] in offered]
    seeds = list(range(args.seeds))
    base = seedlab.Recipe(prompt=args.prompt, model=model.name, num_inference_steps=args.steps,
                          guidance_scale=model.default_guidance, width=model.native_size[0],
                          height=model.native_size[1])
    folder = Path(tempfile.mkdtemp(prefix="bench-samplers-"))
    process, url = start_app(args.model, folder)
    try:
        client = Client(url, verbose=False)
        times: dict[tuple[str, str], list[float]] = {}
        for repeat in range(args.repeats + 1):  # the first round warms both sides up and is not counted
            for sampler, scheduler, extra in pairs:
                for name in (sampler, scheduler):
                    fields = extra if name == sampler else {}  # a schedule is the sampler's, not the class's
                    recipe = base.replace(scheduler=name, **fields)
                    start = time.perf_counter()
                    seedlab.generate_grid(model, recipe, seeds)
                    backend = time.perf_counter() - start
                    start = time.perf_counter()
                    call_http(client, url, "/grid", prompt=args.prompt, seeds=f"0-{args.seeds - 1}", scheduler=name,
                              num_inference_steps=args.steps, **fields)
                    web = time.perf_counter() - start
                    if repeat:
                        times.setdefault((name, "backend"), []).append(backend / len(seeds))
                        times.setdefault((name, "web"), []).append(web / len(seeds))
        print(f"model {args.model}, {args.seeds} seeds x {args.steps} steps, median of {args.repeats}; "
              "seconds per image")
        print(f"{'A1111 sampler':<14} {'diffusers scheduler':<34} {'route':<8} "
              f"{'A1111':>8} {'diffusers':>10} {'ratio':>7}")
        for sampler, scheduler, _ in pairs:
            for route in ("web", "backend"):
                mine = statistics.median(times[sampler, route])
                theirs = statistics.median(times[scheduler, route])
                print(f"{sampler:<14} {scheduler:<34} {route:<8} {mine:8.3f} {theirs:10.3f} {mine / theirs:7.2f}")
    finally:
        process.terminate()
        process.wait(timeout=60)


if __name__ == "__main__":
    main()
