"""Every diffusers family x every SeedLab promise, checked on tiny pipelines: the family table in docs/models.md.

`check(family, folder)` runs each promise on a tiny pipeline of that family saved as a hub-style folder and
loaded as a user's `--model DIR`, and says for each feature "yes", what SeedLab does instead ("per image",
"eager") or the refusal SeedLab gives, in its own words. tests/test_families.py asserts the promises and
that the table in docs/models.md is exactly what these checks give now; after a change, rewrite the table with

    python -m tests.family_features --write docs/models.md
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from diffusers import DiffusionPipeline

from seedlab import Recipe, decode_link, encode_link, fingerprint, generate, generate_grid, load_model, save_png
from seedlab.engine.prompts.embeddings import Embeddings
from seedlab.serving.reproduction import compare, original_from_png
from tests.helpers import torch_threads
from tests.tiny import save_tiny_pipeline
from tests.tiny_families import (
    save_tiny_ddim,
    save_tiny_flux,
    save_tiny_pixart_sigma,
    save_tiny_sd2_vpred,
    save_tiny_sd3,
    save_tiny_sdxl,
    save_tiny_turbo,
)

BEGIN, END = "<!-- family-table -->", "<!-- /family-table -->"
YES = "yes"


@dataclass(frozen=True)
class Family:
    """A family's tiny pipeline and how plain diffusers is called for the same image."""

    title: str
    build: Callable[[Path], Path]
    size: int = 32  # the tiny pipeline's image side
    plain_options: dict = field(default_factory=dict)  # what SeedLab passes besides the recipe
    unconditional: bool = False  # no prompt, no guidance: plain diffusers is called without them


FAMILIES = {
    "sd1": Family("SD 1.x (epsilon)", save_tiny_pipeline, size=64),
    "sd2-v": Family("SD 2.x (v-prediction)", save_tiny_sd2_vpred, size=64),
    "sdxl": Family("SDXL", save_tiny_sdxl),
    "sd3": Family("SD3 (CLIP x2 + T5)", save_tiny_sd3),
    "flux": Family("Flux (packed latents)", save_tiny_flux),
    # PixArt would make the image at its nearest trained size and resize it; SeedLab makes it at the size asked.
    "pixart-sigma": Family("PixArt-Sigma", save_tiny_pixart_sigma, plain_options={"use_resolution_binning": False}),
    "turbo": Family("turbo (trailing timesteps)", save_tiny_turbo, size=64),
    "ddim": Family("DDIM, unconditional", save_tiny_ddim, unconditional=True),
    "ddpm": Family("DDPM, unconditional", lambda folder: save_tiny_ddim(folder, pipeline="DDPMPipeline"),
                   unconditional=True),
}
FEATURES = ("grid = plain diffusers", "cell = solo", "rng numpy-pcg64", "rng cuda-philox", "variation seed",
            "seed resize", "PNG and link reproduce", "prompt encoding", "denoiser calls", "its own defaults")
STEPS, GUIDANCE, PROMPT = 2, 3.0, "a red circle"


def check(name: str, folder: Path) -> dict[str, str]:
    """Each feature's outcome for the family `name` whose tiny pipeline is saved in `folder`."""
    family = FAMILIES[name]
    model = load_model(str(folder), torch.device("cpu"))
    model.lanes = 2  # two images at once, as the app runs them: each must still equal its solo run
    base = Recipe(prompt="" if family.unconditional else PROMPT, seed=1, model=str(folder), num_inference_steps=STEPS,
                  guidance_scale=GUIDANCE, width=family.size, height=family.size)
    prompted = {} if family.unconditional else {"prompt": PROMPT, "guidance_scale": GUIDANCE,
                                                "width": family.size, "height": family.size}
    outcomes: dict[str, str] = {}
    with torch_threads(1):
        plain = DiffusionPipeline.from_pretrained(folder)
        plain.set_progress_bar_config(disable=True)
        image = plain(num_inference_steps=STEPS, generator=torch.Generator("cpu").manual_seed(1), **prompted,
                      **family.plain_options)
        solo = generate(model, base)
        outcomes["grid = plain diffusers"] = _yes(fingerprint(image.images[0]) == solo.fingerprint, "differs")
        cells = generate_grid(model, base, [0, 1, 2])
        outcomes["cell = solo"] = _yes(cells[1].fingerprint == solo.fingerprint, "differs")
        for rng in ("numpy-pcg64", "cuda-philox"):
            outcomes[f"rng {rng}"] = _attempt(lambda rng=rng: _differs(generate(model, base.replace(rng=rng)), solo))
        outcomes["variation seed"] = _attempt(lambda: _varies(model, base, solo))
        outcomes["seed resize"] = _attempt(lambda: _differs(
            generate(model, base.replace(seed_resize_from=(family.size + 16, family.size))), solo))
        outcomes["PNG and link reproduce"] = _attempt(lambda: _reproduces(model, solo))
    embeddings = Embeddings(model)
    embeddings.arguments(base)
    encoding = "once per request" if embeddings.usable else "per image"
    outcomes["prompt encoding"] = "no prompt" if model.info.unconditional else encoding
    traced = model._traced_unet is not None and bool(model._traced_unet._traces)  # what the grid's lanes replayed
    outcomes["denoiser calls"] = "traced" if traced else "eager"
    steps, guided = model.default_steps, "guidance_scale" in model.call_parameters
    guidance = f"guidance {model.default_guidance:g}" if guided else "no guidance"
    outcomes["its own defaults"] = f"{steps} step{'' if steps == 1 else 's'}, {guidance}"
    return outcomes


def _yes(ok: bool, otherwise: str) -> str:
    return YES if ok else f"NO: {otherwise}"


def _attempt(run: Callable[[], str]) -> str:
    """The outcome of `run`, or SeedLab's refusal (a ValueError's message) as the outcome."""
    try:
        return run()
    except ValueError as error:
        return f"refused: {str(error).splitlines()[0]}"


def _differs(result, solo) -> str:
    return _yes(result.fingerprint != solo.fingerprint, "the same image as without it")


def _varies(model, base: Recipe, solo) -> str:
    """Strength 0.3 changes the image; strength 1 is the variation seed's own image, exactly."""
    partly = generate(model, base.replace(variation_seed=5, variation_strength=0.3))
    fully = generate(model, base.replace(variation_seed=5, variation_strength=1.0))
    other = generate(model, base.replace(seed=5))
    return _yes(partly.fingerprint != solo.fingerprint and fully.fingerprint == other.fingerprint,
                "strength 1 is not the variation seed's image")


def _reproduces(model, solo) -> str:
    with tempfile.TemporaryDirectory() as folder:
        original = original_from_png(save_png(solo, Path(folder) / "image.png"))
    again = generate(model, original.recipe)
    recipe, print_, _ = decode_link(encode_link(solo.recipe, solo.fingerprint, solo.environment, "http://x/"))
    return _yes(compare(again, original).exact and recipe == solo.recipe and print_ == solo.fingerprint,
                "not exact")


def table(outcomes: dict[str, dict[str, str]]) -> str:
    """The family table (docs/models.md): a row per family, a column per feature; refusals as numbered notes."""
    notes: list[str] = []

    def cell(text: str) -> str:
        if not text.startswith("refused: "):
            return text
        reason = text.removeprefix("refused: ")
        if reason not in notes:
            notes.append(reason)
        return f"refused ({notes.index(reason) + 1})"

    lines = ["| family | " + " | ".join(FEATURES) + " |", "|---" * (len(FEATURES) + 1) + "|"]
    for name, results in outcomes.items():
        lines.append(f"| {FAMILIES[name].title} | " + " | ".join(cell(results[f]) for f in FEATURES) + " |")
    lines += [""] + [f"{number}. {_markdown(reason)}" for number, reason in enumerate(notes, 1)]
    return "\n".join(lines).rstrip() + "\n"


def _markdown(text: str) -> str:
    return re.sub(r"([|*_`])", r"\\\1", text)


def all_outcomes() -> dict[str, dict[str, str]]:
    with tempfile.TemporaryDirectory() as root:
        return {name: check(name, family.build(Path(root) / name)) for name, family in FAMILIES.items()}


def documented_table(text: str) -> str:
    """The table between the markers in a document's text (docs/models.md)."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="FILE", help="replace the table between the markers in this file "
                        "(docs/models.md)")
    args = parser.parse_args(argv)
    text = table(all_outcomes())
    if not args.write:
        sys.stdout.write(text)
        return 0
    path = Path(args.write)
    readme = path.read_text()
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    path.write_text(readme[:start] + "\n" + text + readme[end:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
