"""Whether the universal CPU baseline gives the same pixels under every kernel setting and thread count.

Each setting runs in a fresh process (each library reads its setting once, when torch first computes):
MKL_CBWR AVX2 / COMPATIBLE, ATEN_CPU_CAPABILITY avx2 / default, ONEDNN_MAX_CPU_ISA AVX2 / SSE41, and 1, 2
and 4 threads, all under `--cpu-isa universal`. Each process makes the same recipes: the embedded model with
DPM++ 2M, Euler a, DPM++ 2M SDE (A1111's), euler_ancestral (ComfyUI's), hires fix and a variation seed,
and tiny SD 1.x, SDXL and SD3 pipelines (tests/tiny*.py, saved as folders and loaded as a user's folder)
with diffusers' DPM++ 2M and Euler a (SD3: its flow-matching Euler). It prints, per setting, the recipes
whose fingerprint or float output differs from the first setting's, then whether every fingerprint is equal.

    python bench/check_universal.py            # every setting
    python bench/check_universal.py --quick    # the first setting, MKL COMPATIBLE and 2 threads
    ARMLAB=/tmp/armlab ../shared/arm-lab/run.sh python bench/check_universal.py --only 0 --no-tiny --hashes
        # on aarch64 (the kernel caps mean nothing there): compare the hashes with an x86 run's
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: bench/ is not a package
BASE = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
SETTINGS = [  # (label, settings over BASE, threads)
    ("avx2 caps, 1 thread", {}, 1),
    ("MKL_CBWR=COMPATIBLE", {"MKL_CBWR": "COMPATIBLE"}, 1),
    ("ATEN_CPU_CAPABILITY=default", {"ATEN_CPU_CAPABILITY": "default"}, 1),
    ("ONEDNN_MAX_CPU_ISA=SSE41", {"ONEDNN_MAX_CPU_ISA": "SSE41"}, 1),
    ("2 threads", {}, 2),
    ("4 threads", {}, 4),
    ("all at once, 2 threads", {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default",
                                "ONEDNN_MAX_CPU_ISA": "SSE41"}, 2),
]
QUICK = (0, 1, 4)
EMBEDDED = {  # label: recipe fields over the defaults (20 steps, 64x64)
    "DPM++ 2M": {"scheduler": "DPM++ 2M"},
    "Euler a": {"scheduler": "Euler a"},
    "DPM++ 2M SDE": {"scheduler": "DPM++ 2M SDE"},
    "euler_ancestral (ComfyUI)": {"scheduler": "euler_ancestral"},
    "hires fix": {"scheduler": "DPM++ 2M", "hires_scale": 1.5, "hires_steps": 8, "denoising_strength": 0.5},
    "variation seed": {"scheduler": "DPM++ 2M", "variation_seed": 11, "variation_strength": 0.3},
    "diffusers DPMSolverMultistep": {"scheduler": "DPMSolverMultistepScheduler"},
}
TINY = {"DPMSolverMultistep": {"scheduler": "DPMSolverMultistepScheduler"},  # A1111's samplers run on SD 1.x/2.x only
        "EulerAncestral": {"scheduler": "EulerAncestralDiscreteScheduler"}}
TINY_FLOW = {"diffusers default": {}}  # SD3: a flow-matching model runs its own scheduler


def save_tiny_models(folder: Path, every_family: bool = False) -> dict[str, Path]:
    """The tiny pipelines as folders, made once (random fixed weights); with `every_family` Flux, PixArt-Sigma,
    SD 2.x v-prediction and unconditional DDIM too."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tests.tiny import save_tiny_pipeline
    from tests.tiny_families import (
        save_tiny_ddim,
        save_tiny_flux,
        save_tiny_pixart_sigma,
        save_tiny_sd2_vpred,
        save_tiny_sd3,
        save_tiny_sdxl,
    )

    savers = [("tiny-sd", save_tiny_pipeline), ("tiny-sdxl", save_tiny_sdxl), ("tiny-sd3", save_tiny_sd3)]
    if every_family:
        savers += [("tiny-flux", save_tiny_flux), ("tiny-pixart", save_tiny_pixart_sigma),
                   ("tiny-sd2-vpred", save_tiny_sd2_vpred), ("tiny-ddim", save_tiny_ddim)]
    made = {}
    for name, save in savers:
        path = folder / name
        if not (path / "model_index.json").exists():
            save(path)
        made[name] = path
    return made


def child(models: dict[str, str], seeds: list[int]) -> dict[str, list[str]]:
    """In this process (its settings in the environment): every recipe's fingerprint and float output's hash."""
    import numpy as np
    import torch

    import seedlab
    from seedlab.engine import generation, pixels
    from seedlab.engine import models as loading
    from seedlab.engine.recipe import Recipe

    seedlab.configure_process(torch.get_num_threads(), "universal")
    floats: list[str] = []
    to_rgb = pixels.to_rgb

    def recorded(image, step):  # the decoded floats, before they become 8-bit
        floats.append(hashlib.sha256(np.ascontiguousarray(image, dtype=np.float32).tobytes()).hexdigest()[:16])
        return to_rgb(image, step)

    pixels.to_rgb = recorded
    found = {}
    for name, source in models.items():
        model = loading.load_model(source, torch.device("cpu"))
        tiny = name != "embedded"
        recipes = (TINY_FLOW if name in ("tiny-sd3", "tiny-flux", "tiny-pixart", "tiny-ddim") else TINY if tiny
                   else EMBEDDED)
        for label, fields in recipes.items():
            for seed in seeds:
                prompt = "" if name == "tiny-ddim" else "a red circle"  # unconditional: no prompt
                recipe = Recipe(**{"prompt": prompt, "model": source, "seed": seed,
                                   "to_8bit": "truncate",
                                   "num_inference_steps": 8 if tiny else 20, "width": model.native_size[0],
                                   "height": model.native_size[1], **fields})
                result = generation.generate(model, recipe)
                found[f"{name}: {label}, seed {seed}"] = [result.fingerprint[:16], floats[-1]]
                assert result.environment.cpu_isa == "universal", result.environment.cpu_isa
    return found


def run_setting(settings: dict[str, str], threads: int, models: dict[str, Path], seeds: list[int]) -> dict:
    environment = {**os.environ, **BASE, **settings, "SEEDLAB_CPU_ISA": "universal", "OMP_NUM_THREADS": str(threads)}
    environment.pop("SEEDLAB_CPU_FOUND", None)  # a fresh process reads its own settings, as a user's shell gives them
    command = [sys.executable, __file__, "--child", json.dumps({k: str(v) for k, v in models.items()}),
               "--seeds", ",".join(map(str, seeds)), "--threads", str(threads)]
    done = subprocess.run(command, env=environment, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--seeds", default="0,7")
    parser.add_argument("--quick", action="store_true", help="three settings instead of all")
    parser.add_argument("--no-tiny", action="store_true", help="the embedded model only")
    parser.add_argument("--every-family", action="store_true", help="tiny Flux, PixArt, SD 2.x and DDIM too")
    parser.add_argument("--hashes", action="store_true",
                        help="print the first setting's fingerprints and float hashes, to compare with another machine")
    parser.add_argument("--only", default=None, help='the settings to run by number ("0,2"), the first the reference')
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    if args.child is not None:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(child(json.loads(args.child), seeds)))
        return
    models = {"embedded": "embedded"}
    if not args.no_tiny:
        models |= save_tiny_models(Path(tempfile.gettempdir()) / "seedlab-universal-models", args.every_family)
    numbers = [int(i) for i in args.only.split(",")] if args.only else QUICK if args.quick else range(len(SETTINGS))
    chosen = [SETTINGS[i] for i in numbers]
    first = None
    every_equal = True
    for label, settings, threads in chosen:
        started = time.perf_counter()
        found = run_setting(settings, threads, models, seeds)
        first = first or found
        prints = [key for key in found if found[key][0] != first[key][0]]
        values = [key for key in found if found[key][1] != first[key][1]]
        every_equal &= not prints
        print(f"{label:30s} {len(found)} images, {len(prints)} fingerprints and {len(values)} float outputs differ "
              f"({time.perf_counter() - started:.0f} s){': ' + '; '.join(values) if values else ''}", flush=True)
    print(f"every fingerprint equal: {'yes' if every_equal else 'no'}")
    if args.hashes:
        print(json.dumps(first, indent=1))


if __name__ == "__main__":
    main()
