"""Reproduction: regenerate an image from a link, a PNG or a recipe, and say how close it came.

An `Original` is what a regeneration is checked against: its recipe, the fingerprint it had, the
environment it was made in and, when they are here (a PNG, or a server's cache of recent
results), its pixels. A `Verdict` compares a regenerated Result with it: exact (same pixels),
or how far off, and which parts of the environment differ.
"""

from __future__ import annotations

import dataclasses
import io
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
from PIL import Image

from ..engine import cpu
from ..engine.environment import Environment
from ..engine.image import Result, fingerprint
from ..engine.recipe import Recipe
from ..files.chunks import UnreadableImage, read_bytes
from ..files.links import check_fingerprint, decode_link, decode_recipe_link, is_recipe_link
from ..files.metadata import MAX_PIXELS, partial_recipe, read_metadata
from ..scale.pool import Failed, Pool

CLOSE_LEVELS = 8  # at most this many levels at every pixel: rounding, invisible to the eye
FAR_LEVELS = 32  # a pixel this far off is visibly different
DIFFERENT_SHARE = 0.1  # a tenth of the pixels visibly off: another image, not a close one
# Words of the notes that name something the regeneration could not keep (a sampler, a model, an upscaler).
CONSEQUENCES = ("differs", "is not applied", "not supported", "no clear", "is used", "only the first pass",
                "does not run", "not available", "is off")

@dataclass(frozen=True, eq=False)
class Original:
    """The image a regeneration should match, and what is known about it."""

    recipe: Recipe
    fingerprint: str | None
    environment: Environment | None  # a link's leaves cublas_workspace_config unknown (None)
    pixels: np.ndarray | None = field(default=None, repr=False)  # (height, width, 3) uint8, when here
    notes: tuple[str, ...] = ()
    lossy: bool = False  # the pixels come from a JPEG or WebP: close at best, never identical
    # The file holds SeedLab's own chunk with its pixel fingerprint: the recipe as SeedLab ran it, which can be
    # regenerated as it is (another tool's recipe is mapped, and often needs adjusting first).
    own: bool = False

    def with_pixels(self, pixels: np.ndarray | None) -> Original:
        return dataclasses.replace(self, pixels=pixels)


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
    environment_unknown: tuple[str, ...] = ()  # parts that can change pixels and the original does not record
    pixels_far: int | None = None  # pixels with a channel more than FAR_LEVELS off, when the original pixels are here
    pixels_total: int | None = None
    anywhere: bool = False  # both made under the universal CPU baseline, whose pixels do not depend on the machine

    @property
    def summary(self) -> str:
        """One line for people; it says "exact" only for an exact match."""
        environment = "; ".join(self.environment_differences)
        if self.exact:
            how = "pixel for pixel" if self.max_difference == 0 else "same pixel fingerprint"
            same = f"; the environment differs: {environment}" if environment else ""
            return f"Exact match: the regenerated image is identical to the original ({how}){same}.{self._anywhere()}"
        if self.lossy_original and self.max_difference is not None:
            return (f"Compared with a lossy original (JPEG or WebP): max difference {self.max_difference} levels, "
                    f"{self.pixels_differing} pixels differ. A lossy file never keeps the exact pixels, so this "
                    "measures closeness; it is not a mismatch.")
        if self.original_fingerprint is None and self.max_difference is None:
            return "Regenerated, but there is no original fingerprint or image to compare it with."
        if self.max_difference is not None:
            how = (f"max difference {self.max_difference} levels, "
                   f"{self.pixels_differing} pixels differ{self._closeness()}")
        elif any(note.startswith("size differs") for note in self.notes):
            how = "the image size differs"
        else:
            how = "the fingerprint differs; the original pixels are not here to measure by how much"
        return f"Differs from the original: {how}.{self._cause()}"

    def _anywhere(self) -> str:
        """What an exact match under the universal baseline promises beyond this machine."""
        if not self.anywhere:
            return ""
        return (" Both were made under the universal CPU baseline, so this image is exact on any machine: x86-64 "
                "CPUs of every vendor and instruction set, ARM, any thread count (with the same torch and diffusers).")

    def _closeness(self) -> str:
        """How close: the same image to the eye, a different image, or between (measured on the pixels)."""
        if self.max_difference <= CLOSE_LEVELS:
            return f" (within {self.max_difference} levels at every pixel: the same image to the eye)"
        share = (self.pixels_far or 0) / max(1, self.pixels_total or 1)
        if share >= DIFFERENT_SHARE:
            return f" (a different image: {share:.0%} of the pixels are more than {FAR_LEVELS} levels off)"
        return f" (close: {share:.1%} of the pixels are more than {FAR_LEVELS} levels off)"

    def _cause(self) -> str:
        """What is known to differ, and what is not known: never "the same" where it is not recorded."""
        unknown = ", ".join(self.environment_unknown)
        causes = [note for note in self.notes if any(word in note for word in CONSEQUENCES)]
        if causes:  # what the recipe could not keep (a sampler, a model, an upscaler): said first
            known = f" Known causes: {'; '.join(causes)}."
            if self.environment_differences:
                known += f" Environment: {'; '.join(self.environment_differences)}."
            return known + (f" Not recorded by the original: {unknown}." if unknown else "")
        if self.environment_differences:
            known = f" Environment: {'; '.join(self.environment_differences)}."
            return known + (f" Not recorded by the original: {unknown}." if unknown else "")
        if unknown:
            return (f" Nothing the original records differs, but it does not record {unknown}, which can change "
                    "pixels.")
        return (" Every part of the environment is the same as the original's, so its recipe or its model differs: "
                "a link altered or mis-copied, or a model folder whose weights changed.")

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
            "environment_unknown": list(self.environment_unknown),
            "pixels_far": self.pixels_far,
            "pixels_total": self.pixels_total,
        }


def compare(result: Result, original: Original) -> Verdict:
    """The verdict for `result`, regenerated from `original.recipe`."""
    notes = list(original.notes)
    max_difference = pixels_differing = pixels_far = pixels_total = None
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
            pixels_far = int(np.count_nonzero(difference.max(axis=2) > FAR_LEVELS))
            pixels_total = int(difference.shape[0] * difference.shape[1])
            exact = max_difference == 0 and not original.lossy
    there = original.environment.cpu_isa if original.environment is not None else None
    return Verdict(
        exact=exact,
        fingerprint=result.fingerprint,
        original_fingerprint=original.fingerprint,
        max_difference=max_difference,
        pixels_differing=pixels_differing,
        environment_differences=tuple(environment_differences(result.environment, original.environment)),
        notes=tuple(notes),
        lossy_original=original.lossy,
        environment_unknown=tuple(environment_unknown(result.environment, original.environment)),
        pixels_far=pixels_far,
        pixels_total=pixels_total,
        anywhere=exact and result.environment is not None and result.environment.cpu_isa == there == cpu.UNIVERSAL,
    )


def environment_differences(here: Environment, there: Environment | None) -> list[str]:
    """What differs between this environment and the original's, for the parts the original records."""
    return [] if there is None else here.differences(there)


def environment_unknown(here: Environment, there: Environment | None) -> list[str]:
    """The parts that can change pixels here and that the original does not record."""
    if there is None:
        return ["its environment (versions, device, thread count, CPU kernels)"]
    unknown = []
    if here.device.startswith("cpu") and there.cpu_isa is None:
        unknown.append("its CPU kernels (made before SeedLab recorded a CPU baseline)")
    if here.device.startswith("cuda") and there.cublas_workspace_config is None:
        unknown.append("its cuBLAS workspace setting")
    return unknown


def may_retry_natively(original: Original, device: str) -> bool:
    """Whether regenerating `original` here may need a retry with native kernels, should its pixels differ.

    An original that records an environment but no CPU baseline was made before SeedLab recorded one, so
    with native kernels on whatever CPU made it. The default baseline is tried first (it matches what an
    AVX2 host made); when it differs, native kernels match what this kind of CPU made. Only on x86-64 CPUs
    (elsewhere the caps mean nothing) and when this process is not running native kernels already.
    """
    environment = original.environment
    return (not original.lossy and device == "cpu" and cpu.is_x86()
            and environment is not None and environment.cpu_isa is None and environment.device.startswith("cpu")
            and (original.fingerprint is not None or original.pixels is not None)
            and not cpu.in_force().startswith("native"))


def wants_native_retry(original: Original, verdict: Verdict, device: str) -> bool:
    """Whether a differing regeneration should be made again with native kernels (see may_retry_natively)."""
    return not verdict.exact and may_retry_natively(original, device)


NOT_RETRIED_NATIVELY = (
    "the original records no CPU baseline, so it was made with native kernels (before SeedLab recorded one): this "
    "server does not retry with them for its visitors (each retry starts a process of its own); SeedLab's "
    "reproduce command on your own computer does")


def unretried_verdict(verdict: Verdict, original: Original, device: str) -> Verdict:
    """`verdict`, saying where a retry with native kernels was wanted but is not offered here."""
    if not wants_native_retry(original, verdict, device):
        return verdict
    return dataclasses.replace(verdict, notes=(*verdict.notes, NOT_RETRIED_NATIVELY))


def regenerate_natively(recipe: Recipe, *, threads: int, dtype: str = "float32") -> Result:
    """The recipe made again in a fresh worker process that runs native kernels.

    A process keeps the CPU baseline it started with (each library reads its setting once), so the retry
    needs a process of its own; it loads the model, makes the one image and stops.
    """
    with Pool(recipe.model, workers=1, threads=threads, dtype=dtype, cpu_isa="native") as pool:
        item = next(iter(pool.map([recipe])))
    if isinstance(item, Failed):
        raise ValueError(f"the retry with native CPU kernels failed: {item.error}")
    return item.result()


def retry_natively(result: Result, verdict: Verdict, original: Original, *, device: str, threads: int,
                   dtype: str) -> tuple[Result, Verdict]:
    """The result and verdict to show: these, or (see wants_native_retry) those of a retry with native kernels."""
    if not wants_native_retry(original, verdict, device):
        return result, verdict
    retried = regenerate_natively(original.recipe, threads=threads, dtype=dtype)
    return retried, native_verdict(result, retried, original)


def native_verdict(first: Result, retried: Result, original: Original) -> Verdict:
    """The verdict of the native retry, saying which CPU kernels matched and which did not."""
    verdict = compare(retried, original)
    default = cpu.describe(first.environment.cpu_isa or cpu.DEFAULT)
    native = cpu.describe(retried.environment.cpu_isa or "native:")
    if verdict.exact:
        note = (f"the original records no CPU baseline, so it was made with native kernels (before SeedLab recorded "
                f"one): {default} gave other pixels, and {native} here match it exactly")
    else:
        note = (f"the original records no CPU baseline, so it was made with native kernels on a CPU it does not name: "
                f"neither {default} nor {native} here reproduce it, which is expected when it was made on another "
                "kind of CPU (AVX-512 kernels, or another vendor's MKL); on such a CPU, --cpu-isa native matches it")
    return dataclasses.replace(verdict, notes=(*verdict.notes, note))


def original_from_link(link: str) -> Original:
    """The original named by a link (a URL or its query string); one written by hand, with no fingerprint, is a recipe
    with nothing to compare (as recipe JSON is)."""
    if is_recipe_link(link):
        return Original(decode_recipe_link(link), None, None)
    recipe, print_, environment = decode_link(link)
    return Original(recipe, print_, environment)


def original_from_png(path_or_file: str | Path | IO[bytes]) -> Original:
    """The original in an image (PNG, or a lossy JPEG/WebP): its recipe and its pixels, decoded once."""
    data = read_bytes(path_or_file)
    reading = read_metadata(data)  # header and chunks only: a file without a recipe costs no decoding
    recipe, unusable = partial_recipe(reading)  # another tool's odd value: named, the rest restored
    pixels = decode_pixels(data)
    notes = list(reading.notes) + unusable
    own = reading.format == "SeedLab" and reading.fingerprint is not None
    if reading.lossy:
        notes.append(f"the original is a {reading.image_format} file, whose compression changed its pixels: the "
                     "regenerated image is compared with it for closeness, not for an exact match")
        return Original(recipe, reading.fingerprint, reading.environment, pixels, tuple(notes), lossy=True, own=own)
    actual = fingerprint(pixels)
    if reading.fingerprint is not None and reading.fingerprint != actual:
        notes.append("the PNG's pixels do not match the fingerprint it records: the file was edited or re-encoded")
    return Original(recipe, actual, reading.environment, pixels, tuple(notes), own=own)




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
