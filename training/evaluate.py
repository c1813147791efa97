"""Evaluate an exported embedded model through the plain diffusers pipeline.

    python -m training.evaluate --model seedlab/embedded_model --guidance 2 2.5 3 5 7.5

Prompts use only the held-out (colour, kind, background) triples, which never appear in training,
and seeds the training never used. Each generated image is classified by simple pixel rules:

- background colour: nearest palette colour to the median of the 2-pixel border;
- shape mask: pixels far (in RGB) from that border median;
- shape colour: nearest palette colour to the median of the mask pixels;
- shape kind: best IoU of the mask against each kind's template fitted to the mask's bounding box.

Composition: one seed under several background phrases should give the same shape mask (IoU),
and clearly more so than two different seeds.
"""

import argparse
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from seedlab.engine.weights.model_info import EMBEDDED_GUIDANCE
from training.shapes import KINDS, PALETTE, SIZES, held_out_triples, kind_mask

MASK_DISTANCE = 80.0  # RGB distance from the background above which a pixel belongs to the shape
FIRST_SEED = 100_000  # evaluation seeds start here; training never draws pipeline seeds


@dataclass(frozen=True)
class Reading:
    """What the classifier sees in one generated image."""

    background: str
    colour: str | None  # None when no shape was found
    kind: str | None
    width: int  # mask bounding-box width, 0 when empty
    mask: np.ndarray  # (64, 64) bool


def nearest_colour(rgb: np.ndarray, palette: dict[str, tuple[int, int, int]] = PALETTE) -> str:
    """Name of the palette colour closest (Euclidean RGB) to one (3,) colour; embedded's palette by default."""
    names = list(palette)
    distances = [np.linalg.norm(rgb - np.array(palette[name], dtype=float)) for name in names]
    return names[int(np.argmin(distances))]


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two bool masks (1.0 when both are empty)."""
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


def classify(image: np.ndarray) -> Reading:
    """Read background, shape colour, kind and mask from a (64, 64, 3) uint8 image."""
    pixels = image.astype(float)
    border = np.concatenate([pixels[:2].reshape(-1, 3), pixels[-2:].reshape(-1, 3),
                             pixels[:, :2].reshape(-1, 3), pixels[:, -2:].reshape(-1, 3)])
    border_colour = np.median(border, axis=0)  # (3,)
    mask = np.linalg.norm(pixels - border_colour, axis=-1) > MASK_DISTANCE  # (64, 64)
    background = nearest_colour(border_colour)
    if mask.sum() < 12:  # a few stray pixels are noise, not a shape
        return Reading(background, None, None, 0, mask)
    colour = nearest_colour(np.median(pixels[mask], axis=0))
    ys, xs = np.nonzero(mask)
    x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
    scores = {kind: iou(mask, kind_mask(kind, x0, y0, x1 - x0, y1 - y0)) for kind in KINDS}
    return Reading(background, colour, max(scores, key=scores.get), int(x1 - x0), mask)


def size_of(width: int) -> str:
    """'small' or 'large' by the midpoint between the training size ranges."""
    midpoint = (SIZES["small"][1] + SIZES["large"][0]) / 2
    return "small" if width < midpoint else "large"


def generate(pipe, prompt: str, seed: int, guidance: float, steps: int) -> np.ndarray:
    """One image as (64, 64, 3) uint8, with its own seeded CPU generator."""
    generator = torch.Generator("cpu").manual_seed(seed)
    image = pipe(prompt, num_inference_steps=steps, guidance_scale=guidance, generator=generator).images[0]
    return np.asarray(image.convert("RGB"))


def attribute_prompts(seeds_per_triple: int) -> list[tuple[str, tuple, str | None, int]]:
    """(prompt, (colour, kind, background), size word or None, seed) over the held-out triples."""
    forms = [
        ("a {c} {k} on a {b} background", None),
        ("a {c} {k}, on a {b} background", None),
        ("a small {c} {k} on a {b} background", "small"),
        ("a {c} {k} on a {b} background, large", "large"),
    ]
    cases, seed = [], FIRST_SEED
    for triple in held_out_triples():
        for i in range(seeds_per_triple):
            form, size = forms[i % len(forms)]
            c, k, b = triple
            article_fixed = form.replace("a {c}", "an {c}") if c[0] in "aeiou" and form.startswith("a {c}") else form
            cases.append((article_fixed.format(c=c, k=k, b=b), triple, size, seed))
            seed += 1
    return cases


def evaluate_attributes(pipe, guidance: float, steps: int, seeds_per_triple: int) -> dict:
    """Accuracy of background, shape colour, kind (and size when asked) on held-out prompts."""
    hits = {"background": [], "colour": [], "kind": [], "size": []}
    for prompt, (colour, kind, background), size, seed in attribute_prompts(seeds_per_triple):
        reading = classify(generate(pipe, prompt, seed, guidance, steps))
        hits["background"].append(reading.background == background)
        hits["colour"].append(reading.colour == colour)
        hits["kind"].append(reading.kind == kind)
        if size is not None:
            hits["size"].append(reading.colour is not None and size_of(reading.width) == size)
    return {name: float(np.mean(values)) for name, values in hits.items()}


def evaluate_composition(pipe, guidance: float, steps: int, seeds: int) -> dict:
    """Mean mask IoU across background variations of one seed, and across different seeds."""
    same_seed, other_seed = [], []
    for colour, kind, _ in held_out_triples()[:12:3]:  # 4 base prompts: one of each kind, 4 colours
        backgrounds = [b for b in ("blue", "white", "black", "yellow", "green") if b != colour][:4]
        masks = {}  # (seed, background) -> mask
        for s, background in itertools.product(range(seeds), backgrounds):
            article = "an" if colour[0] in "aeiou" else "a"
            prompt = f"{article} {colour} {kind}, on a {background} background"
            masks[s, background] = classify(generate(pipe, prompt, FIRST_SEED + 5000 + s, guidance, steps)).mask
        for s in range(seeds):
            same_seed += [iou(masks[s, a], masks[s, b]) for a, b in itertools.combinations(backgrounds, 2)]
        for a, b in itertools.combinations(range(seeds), 2):
            other_seed += [iou(masks[a, g], masks[b, g]) for g in backgrounds]
    return {"iou_same_seed": float(np.mean(same_seed)), "iou_other_seeds": float(np.mean(other_seed))}


def passes(row: dict) -> bool:
    """The quality targets of the embedded model."""
    return (row["colour"] >= 0.9 and row["background"] >= 0.95 and row["kind"] >= 0.8
            and row["iou_same_seed"] >= 0.6 and row["iou_same_seed"] > 2 * row["iou_other_seeds"])


def print_table(rows: list[dict]) -> None:
    """One line per (guidance, steps) setting."""
    columns = ["guidance", "steps", "colour", "background", "kind", "size", "iou_same_seed", "iou_other_seeds", "pass"]
    print(" | ".join(f"{c:>15}" for c in columns))
    for row in rows:
        print(" | ".join(f"{row[c]:>15.3f}" if isinstance(row[c], float) else f"{str(row[c]):>15}" for c in columns))


def save_samples(pipe, path: Path, guidance: float, steps: int) -> None:
    """A 6x8 sheet of held-out prompts (rows: triples of every kind, columns: seeds) for looking at."""
    from PIL import Image

    rows = []
    for colour, kind, background in held_out_triples()[::3]:
        prompt = f"a {colour} {kind} on a {background} background"
        rows.append(np.concatenate([generate(pipe, prompt, FIRST_SEED + 9000 + s, guidance, steps)
                                    for s in range(8)], 1))
    Image.fromarray(np.concatenate(rows, 0)).resize((1024, 768), Image.NEAREST).save(path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="seedlab/embedded_model")
    parser.add_argument("--guidance", type=float, nargs="+", default=[EMBEDDED_GUIDANCE],
                        help=f"guidance scales to evaluate (default: {EMBEDDED_GUIDANCE}, "
                             "the embedded model's shipped default)")
    parser.add_argument("--steps", type=int, nargs="+", default=[20])
    parser.add_argument("--seeds-per-triple", type=int, default=4)
    parser.add_argument("--composition-seeds", type=int, default=6)
    parser.add_argument("--json", type=Path, default=Path("training/runs/eval.json"))
    parser.add_argument("--samples", type=Path, default=None, help="also save a sample sheet PNG (first setting)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--scheduler", choices=["shipped", "dpm"], default="shipped",
                        help="the folder's scheduler, or DPM-Solver++ 2M built from its config")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()

    from diffusers import DPMSolverMultistepScheduler, StableDiffusionPipeline

    torch.set_num_threads(args.threads)
    pipe = StableDiffusionPipeline.from_pretrained(args.model)
    pipe.set_progress_bar_config(disable=True)
    if args.scheduler == "dpm":
        pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
    rows = []
    for steps, guidance in itertools.product(args.steps, args.guidance):
        start = time.time()
        row = {"scheduler": type(pipe.scheduler).__name__, "guidance": guidance, "steps": steps}
        row |= evaluate_attributes(pipe, guidance, steps, args.seeds_per_triple)
        row |= evaluate_composition(pipe, guidance, steps, args.composition_seeds)
        row["pass"] = passes(row)
        rows.append(row)
        print(f"guidance {guidance} steps {steps}: {row} ({time.time() - start:.0f}s)", flush=True)
    print_table(rows)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"model": str(args.model), "held_out": held_out_triples(), "results": rows},
                                    indent=2))
    if args.samples is not None:
        save_samples(pipe, args.samples, args.guidance[0], args.steps[0])


if __name__ == "__main__":
    main()
