"""An image as every layer passes it: the pixels, the recipe that made them, their fingerprint, where made.

Plain values (numpy, PIL): reading and writing files needs them without torch, so `seedlab info` and
the metadata readers never import it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import numpy as np
from PIL import Image

from .environment import Environment
from .recipe import Recipe


@dataclass(frozen=True)
class Result:
    """One generated image, the recipe that made it and the environment it was made in."""

    recipe: Recipe
    image: Image.Image
    fingerprint: str
    environment: Environment


def fingerprint(image: Image.Image | np.ndarray) -> str:
    """sha256 of the uint8 RGB pixel array (not of a file's bytes, which depend on the encoder)."""
    pixels = np.ascontiguousarray(np.asarray(image.convert("RGB") if isinstance(image, Image.Image) else image))
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"fingerprint needs an RGB uint8 image, got {pixels.dtype} {pixels.shape}")
    return hashlib.sha256(pixels.tobytes()).hexdigest()


def as_asked(result: Result, asked: Recipe) -> Result:
    """A preview's short render (Recipe.rendered) under the recipe asked for: its own steps and hires fix, and the
    preview_steps that mark it; any other result as it is."""
    if not asked.preview_steps:
        return result
    recipe = result.recipe.replace(num_inference_steps=asked.num_inference_steps, hires_scale=asked.hires_scale,
                                   preview_steps=asked.preview_steps)
    return dataclasses.replace(result, recipe=recipe)
