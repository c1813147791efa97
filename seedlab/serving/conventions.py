"""Conventions another tool's file does not record, found by its pixels: which ComfyUI made it, which A1111 noise.

A file names its sampler and seed but not every convention its tool ran: ComfyUI's ancestral noise changed in PR
11528 (a generator seeded with seed + 1, with the seed before it), and an A1111 text written without "RNG:" does not
say whether its noise came from the GPU (A1111's default) or the CPU (its RNG setting CPU, a Mac). Where the
regenerated pixels differ from a dropped file's, the other convention is run too, and the one the pixels match is
kept and named; where neither matches, the verdict says both were tried. Only for files of other tools that carry
their pixels (a SeedLab file records its own conventions).
"""

from __future__ import annotations

import dataclasses

from ..engine.image import Result
from ..engine.samplers.names import COMFY_BROWNIAN, COMFY_SAMPLERS
from ..files.infotext import NO_RNG
from .reproduction import Original, Verdict, compare


def draws_seeded(name: str) -> bool:
    """Whether ComfyUI's sampler `name` draws from default_noise_sampler (the generator PR 11528 re-seeded)."""
    return name in COMFY_SAMPLERS and COMFY_SAMPLERS[name][1] and name.removesuffix("_gpu") not in COMFY_BROWNIAN


@dataclasses.dataclass(frozen=True)
class Convention:
    """The other convention a file's pixels may need: the recipe's changes, and what the verdict says either way."""

    changes: dict
    matched: str
    neither: str


def other_convention(original: Original) -> Convention | None:
    """The convention to try when `original`'s regenerated pixels differ, known before anything is rendered (a
    server prices its render with the first, before it starts); None where there is none to try."""
    if original.lossy or original.environment is not None or (original.fingerprint is None
                                                               and original.pixels is None):
        return None
    recipe = original.recipe
    if recipe.comfyui_noise == "seed+1" and (draws_seeded(recipe.scheduler)
                                             or (recipe.hires_scale and draws_seeded(recipe.hires_sampler))):
        return Convention({"comfyui_noise": "seed"}, (
            "made by a ComfyUI from before PR 11528: its ancestral sampler drew from a generator seeded with the "
            "seed (today's ComfyUI: seed + 1); SeedLab ran that convention (ComfyUI noise: seed) and it matches"), (
            "the file does not say which ComfyUI made it: its ancestral noise under both ComfyUI conventions (seed + 1 "
            "since PR 11528, the seed before) differs from the original"))
    if recipe.rng == "cuda-philox" and any(NO_RNG in note for note in original.notes):
        return Convention({"rng": "cpu"}, (
            "made with A1111's CPU noise (its RNG setting CPU, or a Mac), not its default GPU noise: the file does "
            "not say, and rng cpu matches"), (
            "the file does not say where its noise came from: A1111's GPU noise (rng cuda-philox) and its CPU noise "
            "(rng cpu) both differ from the original"))
    return None


def renders(original: Original) -> list:
    """The recipes reproducing `original` may render: its own, then the other convention's (what a server charges)."""
    convention = other_convention(original)
    return [original.recipe] + ([original.recipe.replace(**convention.changes)] if convention else [])


def retry_conventions(result: Result, verdict: Verdict, original: Original, model) -> tuple[Result, Verdict]:
    """The result and verdict to show: these, or those of the convention the original's pixels match."""
    convention = other_convention(original)
    if verdict.exact or convention is None:
        return result, verdict
    return _retry(result, verdict, original, model, convention)


def _retry(result: Result, verdict: Verdict, original: Original, model,
           convention: Convention) -> tuple[Result, Verdict]:
    """`original.recipe` under `convention`, regenerated: kept and named where it matches, else both said tried."""
    from ..engine.generation import generate  # torch: only when a retry runs

    retried = generate(model, original.recipe.replace(**convention.changes))
    again = compare(retried, dataclasses.replace(original, recipe=retried.recipe))
    if again.exact:
        return retried, dataclasses.replace(again, notes=(*again.notes, convention.matched))
    return result, dataclasses.replace(verdict, notes=(*verdict.notes, convention.neither))
