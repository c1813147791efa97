"""Previews: a seed's composition for a fraction of its image, finished later to the full image's exact pixels.

A preview is its recipe with `preview_steps` set: the same prompt, noise and sampler run for that many steps (no
hires pass), and marked so in its recipe, link and PNG. Finishing is the full recipe (`preview_steps` 0), rendered
from the start: the pixels, fingerprint, link and PNG text are those of a full render, whatever process, machine or
link finishes it. There is nothing to cache: a short render shares no state with the full one (another schedule).

Why a short render: measured on the embedded model (bench/bench_preview.py, 64 seeds of "a red circle on a blue
background"), the red shape of a 5-step render from the same noise overlaps the 20-step image's with a mean IoU of
0.856 (another seed's: 0.067), at 0.30 of its cost in lanes and 0.33 through the API; 6 steps give 0.916 at 0.36.
Some shapes fade in the last steps (13 of those 64 seeds); the 5-step preview shows no shape for 12 of them, which
counts as agreeing (IoU 1). Over the finals that kept their shape the mean is 0.858; four other prompts give 0.85 to
0.88. The denoised prediction inside the 20-step run predicts less for its cost (0.59 at step 5, 0.80 at step 8: 0.40
of the cost, as measured for issue 43).

`composition` orders many previews so that the most different layouts come first: farthest-point picking over
small thumbnails, deterministic for the same images, for any model (no classifier).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

from .image import Result
from .recipe import Recipe

PREVIEW_STEPS = 5  # the default: a quarter of the embedded model's 20 steps (bench/bench_preview.py)
FIRST_SCREEN = 16  # groups a preview sweep shows first: one cell of each
THUMBNAIL = 8  # a composition is compared at 8x8 RGB: the layout, not the detail


def preview_steps(steps: int, wanted: int | None = None) -> int:
    """The steps a preview of a `steps`-step image takes: `wanted`, or PREVIEW_STEPS, below `steps`."""
    if steps < 2:
        raise ValueError(f"preview_steps: a {steps}-step image has no shorter preview (Steps must be at least 2); "
                         "generate it in full")
    chosen = PREVIEW_STEPS if wanted is None else int(wanted)
    return max(1, min(chosen, steps - 1))


def as_preview(recipe: Recipe, steps: int | None = None) -> Recipe:
    """`recipe`'s preview: `steps` (default PREVIEW_STEPS, below the recipe's own) marked in preview_steps."""
    if recipe.preview_steps and steps is None:
        return recipe
    return recipe.replace(preview_steps=preview_steps(recipe.num_inference_steps, steps))


def finished(recipe: Recipe) -> Recipe:
    """The full image's recipe a preview's recipe stands for."""
    return recipe.replace(preview_steps=0) if recipe.preview_steps else recipe


def preview(model, recipe: Recipe, *, steps: int | None = None, progress: Callable[[int, int], None] | None = None,
            cancel: threading.Event | None = None) -> Result:
    """A preview of `recipe`: `steps` steps (default PREVIEW_STEPS) from its noise; `.image`, `.recipe` say so."""
    from .generation import generate  # generation imports image and recipe, never this module

    return generate(model, as_preview(recipe, steps), progress=progress, cancel=cancel)


def finish(model, preview: Result | Recipe, *, progress: Callable[[int, int], None] | None = None,
           cancel: threading.Event | None = None) -> Result:
    """The full image of a preview (a Result or its recipe): bit for bit the full render of the same recipe."""
    from .generation import generate

    recipe = preview.recipe if isinstance(preview, Result) else preview
    if not isinstance(recipe, Recipe):
        raise ValueError(f"finish needs a preview (a Result or a Recipe), got {type(preview).__name__}")
    return generate(model, finished(recipe), progress=progress, cancel=cancel)


@dataclass(frozen=True)
class Composition:
    """Images grouped by layout: `order` shows one of each group first; `group[i]` is image i's group, numbered
    by its first image's place in `order`; `centres[g]` is group g's first image."""

    order: list[int]
    group: list[int]
    centres: list[int]


def thumbnail(image: Image.Image) -> np.ndarray:
    """A composition's fingerprint: the image at 8x8 RGB (box filter), values 0..1, flattened."""
    small = image.convert("RGB").resize((THUMBNAIL, THUMBNAIL), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float64).reshape(-1) / 255.0


def composition(images: Sequence[Image.Image | np.ndarray], groups: int = FIRST_SCREEN) -> Composition:
    """Farthest-point groups of `images` (or their thumbnails): the first centre is the image nearest the mean,
    each next one the image farthest from every centre so far (the lowest index on a tie); every image joins its
    nearest centre. `order`: the centres, then round by round the next image of each group, nearest first."""
    if not images:
        return Composition([], [], [])
    points = np.stack([thumbnail(x) if isinstance(x, Image.Image) else np.asarray(x, np.float64).reshape(-1)
                       for x in images])
    count = max(1, min(int(groups), len(points)))
    centres = [int(np.argmin(((points - points.mean(axis=0)) ** 2).sum(axis=1)))]
    nearest = ((points - points[centres[0]]) ** 2).sum(axis=1)
    owner = np.zeros(len(points), dtype=np.int64)
    while len(centres) < count and nearest.max() > 0:
        pick = int(np.argmax(nearest))
        distance = ((points - points[pick]) ** 2).sum(axis=1)
        owner = np.where(distance < nearest, len(centres), owner)
        nearest = np.minimum(nearest, distance)
        centres.append(pick)
    members = [sorted(np.flatnonzero(owner == g).tolist(), key=lambda i: (nearest[i], i)) for g in range(len(centres))]
    order = [index for rank in range(max(map(len, members))) for group in members if rank < len(group)
             for index in [group[rank]]]
    return Composition(order=order, group=owner.tolist(), centres=centres)
