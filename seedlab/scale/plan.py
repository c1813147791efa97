"""A sweep's plan: which images it makes (its seeds, then each prompt per seed), numbered, and their paths.

The seeds are ranges and lists of up to a million, held as ranges rather than expanded; an image's
number gives its seed, its prompt and its file, and back, so a manifest line finds its image.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from dataclasses import dataclass

from ..engine.recipe import MAX_SEED, join_prompt

IMAGES = "images"  # the folder of a sweep's images
MAX_IMAGES = 1_000_000  # one sweep; a grid's seed list stays capped at seeds.MAX_SEEDS
SHEET_SEEDS = 64  # seeds per contact sheet without variations (8 x 8); with variations, 16 rows of seeds
_RANGE = re.compile(r"^([0-9]{1,20})\s*-\s*([0-9]{1,20})$")


class Seeds:
    """The seeds of a sweep as ranges in the order given: a million seeds without a list of a million."""

    def __init__(self, ranges: list[range]):
        self.ranges = tuple(ranges)
        self._starts = [0, *itertools.accumulate(len(r) for r in self.ranges)]  # position of each range's first seed
        self._by_seed = sorted((r.start, r.stop, start) for r, start in zip(self.ranges, self._starts))

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, position: int) -> int:
        which = bisect.bisect_right(self._starts, position) - 1
        return self.ranges[which][position - self._starts[which]]

    def position(self, seed: int) -> int | None:
        """Where `seed` stands in the sweep, or None if it is not one of its seeds."""
        which = bisect.bisect_right(self._by_seed, (seed, math.inf, 0)) - 1
        if which < 0 or not self._by_seed[which][0] <= seed < self._by_seed[which][1]:
            return None
        start, _, offset = self._by_seed[which]
        return offset + seed - start

    def __str__(self) -> str:
        return ", ".join(str(r.start) if len(r) == 1 else f"{r.start}-{r.stop - 1}" for r in self.ranges)


def parse_sweep_seeds(spec: str, max_count: int = MAX_IMAGES) -> Seeds:
    """Parse "0-9999", "3, 17, 99" or a mix into Seeds; a seed given twice is an error."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError('seeds must be a number, a range or a list, such as "0-9999" or "3, 17, 99"')
    ranges: list[range] = []
    for part in filter(None, (p.strip() for p in spec.replace(";", ",").split(","))):
        match = _RANGE.match(part)
        words = [(match[1], match[2])] if match else [(word, word) for word in part.split()]
        for first, last in words:
            if not (first.isascii() and first.isdigit() and len(first) <= 20 and int(first) <= MAX_SEED
                    and int(last) <= MAX_SEED):
                raise ValueError(f"seeds: {part!r} is not a seed or a range of seeds from 0 to {MAX_SEED}")
            if int(last) < int(first):
                raise ValueError(f"seeds: the range {part} goes backwards; write {last}-{first}")
            ranges.append(range(int(first), int(last) + 1))
            if sum(r.stop - r.start for r in ranges) > max_count:  # len() overflows past 2**63
                raise ValueError(f"seeds: a sweep makes at most {max_count} images, {spec.strip()!r} asks for more")
    ordered = sorted(ranges, key=lambda r: r.start)
    for before, after in zip(ordered, ordered[1:]):
        if after.start < before.stop:
            raise ValueError(f"seeds: {after.start} is given twice in {spec.strip()!r}")
    return Seeds(ranges)


@dataclass(frozen=True)
class Plan:
    """Every image of a sweep, numbered 0..len-1: seed by seed, the base prompt then each variation."""

    seeds: Seeds
    prompts: tuple[str, ...]  # the base prompt first, then each variation appended to it
    labels: tuple[str, ...]  # what heads each prompt's column on a contact sheet

    @classmethod
    def make(cls, seeds: Seeds, prompt: str, variations: list[str]) -> Plan:
        prompts = (prompt, *(join_prompt(prompt, v) for v in variations))
        if any(not v.strip() for v in variations) or len(set(prompts)) < len(prompts):
            raise ValueError("--variation must be non-empty and give a new prompt each time")
        if len(seeds) * len(prompts) > MAX_IMAGES:
            raise ValueError(f"seeds: a sweep makes at most {MAX_IMAGES} images; {len(seeds)} seeds x "
                             f"{len(prompts)} prompts asks for {len(seeds) * len(prompts)}")
        return cls(seeds, prompts, ("base", *variations))

    def __len__(self) -> int:
        return len(self.seeds) * len(self.prompts)

    def image(self, number: int) -> tuple[int, int]:
        """(seed, variation) of image `number`; variation 0 is the base prompt."""
        return self.seeds[number // len(self.prompts)], number % len(self.prompts)

    def number(self, seed: int, variation: int) -> int | None:
        """The number of the image of (seed, variation), or None if the sweep has no such image."""
        position = self.seeds.position(seed)
        ok = position is not None and 0 <= variation < len(self.prompts)
        return position * len(self.prompts) + variation if ok else None

    def path(self, number: int) -> str:
        """The image's file, relative to the sweep folder (a folder per thousand seeds keeps listings short)."""
        seed, variation = self.image(number)
        name = f"seed{seed}" + ("" if len(self.prompts) == 1 else "-base" if variation == 0 else f"-v{variation}")
        return f"{IMAGES}/{seed // 1000}k/{name}.png"

    @property
    def sheet_size(self) -> int:
        """Images per contact sheet."""
        return SHEET_SEEDS if len(self.prompts) == 1 else 16 * len(self.prompts)
