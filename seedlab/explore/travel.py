"""Seed travel: from seed A to seed B through the variation strength, an animation whose frames are exact.

    python -m seedlab travel --prompt "a red circle" --seeds 3,7 --frames 5 --out travel/

Between consecutive seeds A and B, frame k of N is seed A with variation seed B at strength t_k,
t running from 0 to 1 along a curve. The first frame of a segment is A's own recipe (strength 0 keeps
A's noise bit for bit) and the last is B's own recipe, so every seed of the list appears exactly as
its solo image; with more seeds the segments chain (B ends one and starts the next, once). Every
frame is a recipe, so it is exact and has a link.

Schedulers that draw noise while stepping (ancestral, SDE) take that noise from the main seed's
generator: every frame but the last has A's step noise and the last has B's, so the animation jumps
at the end of each segment. They are refused unless asked for (`--allow-ancestral`, with a warning).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from ..engine.noise import draws_noise
from ..engine.recipe import Recipe
from ..engine.samplers import a1111
from ..engine.samplers.names import draws_each_step, is_comfy_sampler, is_ksampler, is_sdcpp, split_sampler
from ..engine.seeds import parse_seeds
from ..files.links import encode_link
from ..serving.admission import Admission
from .curves import CURVES, MAX_FRAMES
from .plot import make_folder, workers_from
from .render import render

MAX_CLI_FRAMES = 10_000  # frames in all, from the command line
FRAMES = "frames"


def strengths(frames: int, curve: str = "linear") -> list[float]:
    """The variation strength of each frame of one segment, 0 first and 1 last (rounded to 6 decimals)."""
    if curve not in CURVES:
        raise ValueError(f"curve must be one of {', '.join(CURVES)}, got {curve!r:.40}")
    if isinstance(frames, bool) or not isinstance(frames, int) or not 2 <= frames <= MAX_FRAMES:
        raise ValueError(f"frames must be a whole number from 2 to {MAX_FRAMES}, got {frames!r:.40}")
    return [0.0] + [round(CURVES[curve](k / (frames - 1)), 6) for k in range(1, frames - 1)] + [1.0]


def travel_recipes(admission: Admission, values: Mapping[str, Any], seeds: list[int], frames: int,
                   curve: str = "linear", *, max_frames: int | None = None) -> list[Recipe]:
    """Every frame of a travel through `seeds` as a validated Recipe: `frames` per segment, shared ends once.

    `values` are the untrusted base fields (as for Admission.recipe), without seed and variation fields.
    The frame count is bounded by `max_frames` (default: the server's max_images); the compute budget is
    the caller's to charge (admission.charge(recipes, visitor)).
    """
    given = [name for name in ("seed", "variation_seed", "variation_strength") if values.get(name) not in (None, "")]
    if given:
        raise ValueError(f"travel sets {', '.join(given)} itself: leave it out")
    if len(seeds) < 2:
        raise ValueError("seeds: travel needs at least two seeds, such as 3, 7")
    for a, b in zip(seeds, seeds[1:]):
        if a == b:
            raise ValueError(f"seeds: {a} follows itself; a segment needs two different seeds")
    steps = strengths(frames, curve)
    limit = admission.limits.max_images if max_frames is None else max_frames
    count = (len(seeds) - 1) * (frames - 1) + 1
    if count > limit:
        raise ValueError(f"frames: a travel here makes at most {limit} images, and {len(seeds)} seeds at {frames} "
                         f"frames per segment make {count}")
    base = admission.recipe({**values, "seed": seeds[0]})
    base = base.replace(scheduler=admission.store.info(base.model).scheduler_name(base.scheduler))  # as recorded
    recipes = []
    for a, b in zip(seeds, seeds[1:]):
        recipes.append(base.replace(seed=a))
        recipes += [base.replace(seed=a, variation_seed=b, variation_strength=t) for t in steps[1:-1]]
    return recipes + [base.replace(seed=seeds[-1])]


def steps_draw_noise(admission: Admission, recipe: Recipe) -> bool:
    """Does the recipe's scheduler draw noise while stepping (ancestral, SDE)? From its config, no weights."""
    if is_ksampler(recipe.scheduler):
        passes = [recipe.scheduler, *([recipe.hires_sampler or recipe.scheduler] if recipe.hires_scale else [])]
        return any(_pass_draws(name, recipe) for name in passes)
    return draws_noise(admission.store.info(recipe.model).make_scheduler(recipe.scheduler))


def _pass_draws(name: str, recipe: Recipe) -> bool:
    """One pass's sampler: A1111's as the recipe's Eta, Sigma churn and Eta DDIM set it; another tool's by its name."""
    found = None if is_comfy_sampler(name) or is_sdcpp(name) else split_sampler(name)
    if found is not None:
        return a1111.draws_while_stepping(found[0], recipe)
    return draws_each_step(name) or recipe.s_churn > 0


def animation_name(recipes: list[Recipe]) -> str:
    """A file name (without suffix) that says what a travel is, in safe characters only: "travel-seed-2-to-0-24-
    frames", "travel-seed-2-to-5-to-0-9-frames" (the seeds are the frames at variation strength 0)."""
    seeds = [str(recipe.seed) for recipe in recipes if not recipe.variation_strength]
    if len(seeds) > 4:  # a name stays short: the ends and how many seeds
        return f"travel-{len(seeds)}-seeds-{seeds[0]}-to-{seeds[-1]}-{len(recipes)}-frames"
    return f"travel-seed-{'-to-'.join(seeds)}-{len(recipes)}-frames"


def save_animation(frames: list[Path], out: Path, duration: int, name: str = "travel") -> dict[str, Path]:
    """An animated WebP (lossless) and a GIF of the frame PNGs, `duration` ms a frame, looping, named `name`."""
    images = []
    for path in frames:
        with Image.open(path) as image:
            images.append(image.convert("RGB"))
    webp, gif = out / f"{name}.webp", out / f"{name}.gif"
    images[0].save(webp, format="WEBP", save_all=True, append_images=images[1:], duration=duration, loop=0,
                   lossless=True)
    images[0].save(gif, format="GIF", save_all=True, append_images=images[1:], duration=duration, loop=0,
                   disposal=1)  # disposal 1: GIF would otherwise merge frames that repeat pixels
    return {"webp": webp, "gif": gif}


# The command line: python -m seedlab travel ...


def run(args: argparse.Namespace, admission: Admission, values: dict[str, Any], threads: int | None) -> int:
    """`python -m seedlab travel`: frame PNGs, an animated WebP and a GIF; exit 1 if some frame failed."""
    import torch

    threads = threads or torch.get_num_threads()  # None: torch's own count (a GPU), recorded with each image
    # 1. Frames, all checked before a model loads.
    try:
        seeds = parse_seeds(args.seeds, max_count=MAX_CLI_FRAMES)
    except ValueError as error:
        raise ValueError(f"--seeds{str(error).removeprefix('seeds')}") from None
    if not 1 <= args.duration <= 60_000:
        raise ValueError(f"--duration must be from 1 to 60000 milliseconds, got {args.duration}")
    try:
        recipes = travel_recipes(admission, values, seeds, args.frames, args.curve, max_frames=MAX_CLI_FRAMES)
    except ValueError as error:
        message = str(error)
        for word, option in (("seeds:", "--seeds:"), ("frames", "--frames"), ("curve", "--curve")):
            message = option + message.removeprefix(word) if message.startswith(word) else message
        raise ValueError(message) from None
    if steps_draw_noise(admission, recipes[0]):
        note = (f"--scheduler {recipes[0].scheduler} draws noise at every step from the main seed's generator: "
                "the frames change seed only at the end of each segment, so the animation jumps there")
        if not args.allow_ancestral:
            raise ValueError(f"{note}; pick a scheduler that draws nothing while stepping (Euler, DDIM, DPM++ 2M), "
                             "or pass --allow-ancestral")
        print(f"seedlab: note: {note}", file=sys.stderr)
    admission.charge(recipes, None)
    workers = workers_from(args)
    make_folder(args.out)

    # 2. Every frame alone, then the animation.
    paths = [args.out / FRAMES / f"frame-{number:04d}.png" for number in range(len(recipes))]
    failed, lines, printed = [], {}, 0
    for number, item, _ in render(admission.store, recipes, paths, threads=threads, workers=workers):
        if isinstance(item, str):
            failed.append(item)
            continue
        recipe = item.recipe
        lines[number] = {"frame": number, "seed": str(recipe.seed), "variation_seed": str(recipe.variation_seed),
                         "strength": recipe.variation_strength, "path": str(paths[number]),
                         "fingerprint": item.fingerprint,
                         "link": encode_link(recipe, item.fingerprint, item.environment, args.base_url),
                         "recipe": recipe.to_json()}
        while args.json and printed in lines:  # in frame order, whatever order workers finish in
            print(json.dumps(lines.pop(printed)), flush=True)
            printed += 1
    if failed:
        print(f"travel: {len(failed)} frames failed ({failed[0]}); run the same command to make them",
              file=sys.stderr)
        return 1
    animations = save_animation(paths, args.out, args.duration)
    if args.json:
        print(json.dumps({"frames": len(paths), "animations": {k: str(v) for k, v in animations.items()}}), flush=True)
    print(f"travel: {len(paths)} frames in {args.out / FRAMES}, animations {animations['webp']} and "
          f"{animations['gif']}", file=sys.stderr)
    return 0
