"""Reproduction: regenerate an image from a link, a PNG or a recipe, and say how close it came.

An `Original` is what a regeneration is checked against: its recipe, the fingerprint it had, the
environment it was made in and, when they are here (a PNG, or a server's cache of recent
results), its pixels. A `Verdict` compares a regenerated Result with it: exact (same pixels),
or how far off, and which parts of the environment differ.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
from PIL import Image

from .environment import Environment
from .generation import Result, fingerprint
from .links import check_fingerprint, decode_link
from .metadata import MAX_PIXELS, UnreadableImage, read_bytes, read_metadata, recipe_from_reading
from .recipe import Recipe


@dataclass(frozen=True, eq=False)
class Original:
    """The image a regeneration should match, and what is known about it."""

    recipe: Recipe
    fingerprint: str | None
    environment: Environment | None  # a link's leaves cublas_workspace_config unknown (None)
    pixels: np.ndarray | None = field(default=None, repr=False)  # (height, width, 3) uint8, when here
    notes: tuple[str, ...] = ()
    lossy: bool = False  # the pixels come from a JPEG or WebP: close at best, never identical

    def with_pixels(self, pixels: np.ndarray | None) -> Original:
        return Original(self.recipe, self.fingerprint, self.environment, pixels, self.notes, self.lossy)


@dataclass(frozen=True)
class Verdict:
    """How a regenerated image compares with its original."""

    exact: bool
    fingerprint: str  # of the regenerated image
    original_fingerprint: str | None
    max_difference: int | None  # largest per-channel difference in uint8 levels, when the original pixels are here
    pixels_differing: int | None  # pixels with any channel different, when the original pixels are here
    environment_differences: tuple[str, ...]  # "threads: 2 here, 1 there"
    notes: tuple[str, ...] = ()
    lossy_original: bool = False  # compared against a JPEG/WebP: the difference is measured, not judged

    @property
    def summary(self) -> str:
        """One line for people; it says "exact" only for an exact match."""
        environment = "; ".join(self.environment_differences)
        if self.exact:
            how = "pixel for pixel" if self.max_difference == 0 else "same pixel fingerprint"
            same = f"; the environment differs: {environment}" if environment else ""
            return f"Exact match: the regenerated image is identical to the original ({how}){same}."
        if self.lossy_original and self.max_difference is not None:
            return (f"Compared with a lossy original (JPEG or WebP): max difference {self.max_difference} levels, "
                    f"{self.pixels_differing} pixels differ. A lossy file never keeps the exact pixels, so this "
                    "measures closeness; it is not a mismatch.")
        if self.original_fingerprint is None and self.max_difference is None:
            return "Regenerated, but there is no original fingerprint or image to compare it with."
        if self.max_difference is not None:
            how = f"max difference {self.max_difference} levels, {self.pixels_differing} pixels differ"
        elif any(note.startswith("size differs") for note in self.notes):
            how = "the image size differs"
        else:
            how = "the fingerprint differs; the original pixels are not here to measure by how much"
        cause = f" Environment: {environment}." if environment else " The environment is the same as far as known."
        return f"Differs from the original: {how}.{cause}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "exact": self.exact,
            "max_difference": self.max_difference,
            "pixels_differing": self.pixels_differing,
            "environment_differences": list(self.environment_differences),
            "summary": self.summary,
            "fingerprint": self.fingerprint,
            "original_fingerprint": self.original_fingerprint,
            "notes": list(self.notes),
            "lossy_original": self.lossy_original,
        }


def compare(result: Result, original: Original) -> Verdict:
    """The verdict for `result`, regenerated from `original.recipe`."""
    notes = list(original.notes)
    max_difference = pixels_differing = None
    exact = original.fingerprint is not None and result.fingerprint == original.fingerprint
    if original.pixels is not None:
        mine = np.asarray(result.image.convert("RGB"))
        if mine.shape != original.pixels.shape:
            notes.append(f"size differs: the original is {_size(original.pixels)}, the regenerated image {_size(mine)}")
            exact = False
        else:
            difference = np.abs(mine.astype(np.int16) - original.pixels.astype(np.int16))
            max_difference = int(difference.max())
            pixels_differing = int(np.count_nonzero(difference.max(axis=2)))
            exact = max_difference == 0 and not original.lossy
    return Verdict(
        exact=exact,
        fingerprint=result.fingerprint,
        original_fingerprint=original.fingerprint,
        max_difference=max_difference,
        pixels_differing=pixels_differing,
        environment_differences=tuple(environment_differences(result.environment, original.environment)),
        notes=tuple(notes),
        lossy_original=original.lossy,
    )


def environment_differences(here: Environment, there: Environment | None) -> list[str]:
    """What differs between this environment and the original's, for the parts the original records."""
    return [] if there is None else here.differences(there)


def original_from_link(link: str) -> Original:
    """The original named by a link (a URL or its query string)."""
    recipe, print_, environment = decode_link(link)
    return Original(recipe, print_, environment)


def original_from_png(path_or_file: str | Path | IO[bytes]) -> Original:
    """The original in an image (PNG, or a lossy JPEG/WebP): its recipe and its pixels, decoded once."""
    data = read_bytes(path_or_file)
    reading = read_metadata(data)  # header and chunks only: a file without a recipe costs no decoding
    recipe = recipe_from_reading(reading)
    pixels = decode_pixels(data)
    notes = list(reading.notes)
    if reading.lossy:
        notes.append(f"the original is a {reading.image_format} file, whose compression changed its pixels: the "
                     "regenerated image is compared with it for closeness, not for an exact match")
        return Original(recipe, reading.fingerprint, reading.environment, pixels, tuple(notes), lossy=True)
    actual = fingerprint(pixels)
    if reading.fingerprint is not None and reading.fingerprint != actual:
        notes.append("the PNG's pixels do not match the fingerprint it records: the file was edited or re-encoded")
    return Original(recipe, actual, reading.environment, pixels, tuple(notes))


original_from_image = original_from_png  # the name for what it reads now


def decode_pixels(data: bytes) -> np.ndarray:
    """The first frame as (height, width, 3) uint8; the size is checked from the header before decoding."""
    if data[12:16] == b"IHDR":  # a PNG states its size in its first chunk: refuse before Pillow reads further
        _check_size(*struct.unpack(">II", data[16:24]))
    try:
        with Image.open(io.BytesIO(data)) as image:
            _check_size(*image.size)  # a 13000x13000 PNG is a few hundred KB on disk and 676 MB decoded
            return np.asarray(image.convert("RGB"))  # an animated file: its first frame only
    except Image.DecompressionBombError:
        raise UnreadableImage(f"image has more than {MAX_PIXELS:,} pixels, the most that are decoded") from None
    except (OSError, SyntaxError, ValueError, struct.error) as error:
        if isinstance(error, UnreadableImage):
            raise
        raise UnreadableImage("file's pixels cannot be read (truncated or corrupt image data)") from None


def _check_size(width: int, height: int) -> None:
    if width * height > MAX_PIXELS:
        raise UnreadableImage(f"image is {width}x{height} pixels; at most {MAX_PIXELS:,} pixels are decoded")


def original_from_text(text: str) -> Original:
    """A link, or recipe JSON: a bare recipe, or a result record {"recipe", "fingerprint", "environment"}."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("link_or_recipe is empty: paste a SeedLab link or a recipe as JSON")
    if not text.lstrip().startswith("{"):
        return original_from_link(text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"recipe JSON is not valid ({error.msg} at character {error.pos})") from None
    if not isinstance(data, dict) or not isinstance(data.get("recipe", data), dict):
        raise ValueError("recipe JSON must be an object: a recipe, or {recipe, fingerprint, environment}")
    if "recipe" not in data:
        return Original(Recipe.from_dict(data), None, None)
    unknown = sorted(set(data) - {"recipe", "fingerprint", "environment", "seed", "prompt", "link", "path"})
    if unknown:
        raise ValueError(f"recipe JSON: unknown key {unknown[0]!r}; expected recipe, fingerprint, environment")
    print_ = data.get("fingerprint")
    if print_ is not None:
        check_fingerprint("fingerprint", print_)
    environment = None
    if data.get("environment") is not None:
        environment = Environment.from_dict(data["environment"])
    return Original(Recipe.from_dict(data["recipe"]), print_, environment)


def _size(pixels: np.ndarray) -> str:
    return f"{pixels.shape[1]}x{pixels.shape[0]}"
