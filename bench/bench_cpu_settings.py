"""Benchmark: which of the three CPU-baseline settings (seedlab/engine/cpu.py) change pixels, per model family.

    python bench/bench_cpu_settings.py [--seeds 0,1] [--steps 4]

Each configuration of ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA and MKL_CBWR (none set; each one alone;
MKL_CBWR=COMPATIBLE alone; the avx2 and portable baselines) runs in a fresh Python process, since each
library reads its setting once per process. The child starts with those variables removed from the
environment and only the configuration's own put back, plus SEEDLAB_CPU_ISA (the baseline's name, else
"native", which leaves the environment as found), and checks after importing seedlab that the variables
hold exactly the intended values. In it, at one thread, SeedLab's `generate` (traced UNet where SeedLab
traces, as the app runs it) makes a few images per family: the embedded model and the tests' tiny SD 1.x,
SDXL, SD3, Flux and PixArt-Sigma pipelines (built once here, saved to a temp folder, loaded by each child)
at their native small size. Probe rows hash an SGEMM (MKL), a conv2d as the models call it (at one thread
and batch 1 ATen takes its im2col + SGEMM path, not oneDNN) and a convolution forced through oneDNN.
The table says, per family and configuration, whether the fingerprints equal the native column's and the
avx2 baseline column's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETTINGS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}
# Column name: (the variables set, SEEDLAB_CPU_ISA). Must agree with cpu.BASELINES (checked in main).
CONFIGS = {
    "native": ({}, "native"),
    "aten=avx2": ({"ATEN_CPU_CAPABILITY": "avx2"}, "native"),
    "onednn=AVX2": ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "native"),
    "mkl=AVX2": ({"MKL_CBWR": "AVX2"}, "native"),
    "mkl=COMPAT": ({"MKL_CBWR": "COMPATIBLE"}, "native"),
    "avx2": (AVX2, "avx2"),
    "portable": ({**AVX2, "MKL_CBWR": "COMPATIBLE"}, "portable"),
}
TINY = ("sd1", "sdxl", "sd3", "flux", "pixart-sigma")  # keys of tests.family_features.FAMILIES
PROBES = ("probe: sgemm", "probe: conv2d", "probe: onednn conv")


def cpu_line() -> str:
    info = {}
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as text:
        for line in text:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    avx512 = "avx512f" in info.get("flags", "").split()
    return f"CPU: {info.get('vendor_id', '?')} / {info.get('model name', '?')} / avx512f: {'yes' if avx512 else 'no'}" \
           f" / {os.cpu_count()} cores / {platform.machine()}"


def child(jobs_path: str, out_path: str, config: str) -> None:
    """In a fresh process: check the environment, make the images, write fingerprints as JSON."""
    # Importing seedlab runs cpu.apply(SEEDLAB_CPU_ISA); nothing here computes before the check below.
    import diffusers
    import torch
    import transformers

    from seedlab import Recipe, generate, load_model

    wanted = CONFIGS[config][0]
    found = {name: os.environ.get(name) for name in SETTINGS}
    if found != {name: wanted.get(name) for name in SETTINGS}:
        raise SystemExit(f"{config}: environment after import is {found}, wanted {wanted}")
    torch.set_num_threads(1)
    for library in (diffusers, transformers):  # what configure_process quiets, without its cpu.apply
        library.utils.logging.disable_progress_bar()
        library.utils.logging.set_verbosity_error()
    jobs = json.loads(Path(jobs_path).read_text())
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(77, 320, generator=generator), torch.randn(320, 640, generator=generator)
    image, kernel = torch.randn(1, 16, 32, 32, generator=generator), torch.randn(32, 16, 3, 3, generator=generator)
    probes = {"probe: sgemm": torch.mm(a, b), "probe: conv2d": torch.nn.functional.conv2d(image, kernel, padding=1),
              "probe: onednn conv": torch.mkldnn_convolution(image, kernel, None, (1, 1), (1, 1), (1, 1), 1)}
    prints = {name: [hashlib.sha256(out.numpy().tobytes()).hexdigest()] for name, out in probes.items()}
    for family, source, size in jobs["families"]:
        model = load_model(source, torch.device("cpu"))
        size = size or model.info.native_size[0]
        recipe = Recipe(prompt="a red circle", model=source, num_inference_steps=jobs["steps"], guidance_scale=3.0,
                        width=size, height=size)
        prints[family] = [generate(model, recipe.replace(seed=seed)).fingerprint for seed in jobs["seeds"]]
    after = {name: os.environ.get(name) for name in SETTINGS}
    if after != found:
        raise SystemExit(f"{config}: environment changed during generation: {after}")
    Path(out_path).write_text(json.dumps({"env": found, "seedlab_cpu_isa": os.environ.get("SEEDLAB_CPU_ISA"),
                                          "aten": torch.backends.cpu.get_cpu_capability(),
                                          "torch": torch.__version__, "prints": prints}))


def run_config(config: str, jobs_path: Path, folder: Path) -> dict:
    settings, level = CONFIGS[config]
    # Also drops SEEDLAB_CPU_FOUND: seedlab passes the caps its first importer found on to its children
    # (cpu.py), and `native` would put this process's avx2 caps back from it.
    env = {key: value for key, value in os.environ.items() if key not in SETTINGS and not key.startswith("SEEDLAB_CPU")}
    env.update(settings, SEEDLAB_CPU_ISA=level)
    out = folder / f"{config}.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--child", config, str(jobs_path), str(out)]
    subprocess.run(command, cwd=ROOT, env=env, check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        config, jobs_path, out_path = args.child
        return child(jobs_path, out_path, config)
    started = time.perf_counter()
    from seedlab.engine import cpu
    from tests.family_features import FAMILIES

    assert CONFIGS["avx2"][0] == cpu.BASELINES["avx2"] and CONFIGS["portable"][0] == cpu.BASELINES["portable"]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_cpu_settings_") as temp:
        folder = Path(temp)
        families = [["embedded", "embedded", 0]]
        for name in TINY:  # built once, here; each child loads the saved folder
            families.append([name, str(FAMILIES[name].build(folder / name)), FAMILIES[name].size])
        jobs = folder / "jobs.json"
        jobs.write_text(json.dumps({"families": families, "steps": args.steps,
                                    "seeds": [int(seed) for seed in args.seeds.split(",")]}))
        print(f"built {len(TINY)} tiny pipelines in {time.perf_counter() - started:.0f} s", flush=True)
        for config in CONFIGS:
            begun = time.perf_counter()
            results[config] = run_config(config, jobs, folder)
            print(f"  {config:12s} {time.perf_counter() - begun:5.1f} s  env {results[config]['env']}  "
                  f"SEEDLAB_CPU_ISA={results[config]['seedlab_cpu_isa']}  ATen {results[config]['aten']}",
                  flush=True)
    print()
    print(cpu_line())
    print(f"torch {results['native']['torch']}; ATen capability under native: {results['native']['aten']}; "
          f"seeds {args.seeds}, {args.steps} steps, 1 thread, seedlab.generate")
    rows = [family for family, _, _ in families] + list(PROBES)
    width = max(len(row) for row in rows) + len(" vs native") + 1
    print("".join([f"{'family':{width}s}"] + [f"{config:>13s}" for config in CONFIGS]))
    for row in rows:
        for base in ("native", "avx2"):
            label = row if base == "native" else ""
            cells = ["=" if results[config]["prints"][row] == results[base]["prints"][row] else "differs"
                     for config in CONFIGS]
            print("".join([f"{label + ' vs ' + base:{width}s}"] + [f"{cell:>13s}" for cell in cells]))
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
