"""Seeds: parse what users type (`42`, `0-7`, `3, 17, 99`) and draw fresh ones.

Drawing is its own step, so generation stays a pure function of the recipe: the UI shows the
drawn seeds before anything is generated.
"""

from __future__ import annotations

import random
import re

from .recipe import MAX_SEED

MAX_SEEDS = 64  # a hard ceiling for one grid; a host can set a lower limit (see limits)
DICE_MAX = 2**32 - 1  # drawn seeds stay in the range every tool accepts (A1111, InvokeAI); typed ones may be 64-bit
_RANGE = re.compile(r"^([0-9]{1,20})\s*-\s*([0-9]{1,20})$")


def parse_seeds(spec: str, max_count: int = MAX_SEEDS, rng: random.Random | None = None,
                random_allowed: bool = False) -> list[int]:
    """Parse "42", "0-7", "3, 17, 99" or a mix ("1, 5-8") into a list of seeds, in order. With `random_allowed`,
    -1 draws a fresh seed (as in A1111 and on a plot's seed axis), from `rng` or the OS entropy pool."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError('seeds must be a number, a range or a list, such as "42", "0-7" or "3, 17, 99"')
    seeds: list[int] = []
    for part in spec.replace(";", ",").split(","):
        part = part.strip()
        match = _RANGE.match(part)
        if match:
            first, last = _check_seed(int(match[1])), _check_seed(int(match[2]))
            if last < first:
                raise ValueError(f"seeds: the range {part} goes backwards; write {last}-{first}")
            if len(seeds) + last - first + 1 > max_count:
                raise ValueError(f"seeds: at most {max_count} seeds at once, {spec.strip()!r} asks for more")
            seeds.extend(range(first, last + 1))
            continue
        for word in part.split():  # "3 17 99" works as well as "3, 17, 99"
            if word == "-1" and random_allowed:
                seeds.append(random_seeds(1, rng)[0])
                continue
            if not (word.isascii() and word.isdigit() and len(word) <= 20):
                raise ValueError(
                    f"seeds: {word!r} is not a seed; use whole numbers from 0 to {MAX_SEED}, "
                    'ranges like "0-7" and commas, such as "3, 17, 99"'
                )
            seeds.append(_check_seed(int(word)))
        if len(seeds) > max_count:
            raise ValueError(f"seeds: at most {max_count} seeds at once, {spec.strip()!r} asks for more")
    if not seeds:
        raise ValueError('seeds must be a number, a range or a list, such as "42", "0-7" or "3, 17, 99"')
    return seeds


def format_seeds(seeds: list[int]) -> str:
    """The inverse of parse_seeds: consecutive runs become ranges ("0-3, 9")."""
    parts: list[str] = []
    i = 0
    while i < len(seeds):
        j = i
        while j + 1 < len(seeds) and seeds[j + 1] == seeds[j] + 1:
            j += 1
        parts.append(str(seeds[i]) if j - i < 2 else f"{seeds[i]}-{seeds[j]}")
        if j - i == 1:
            parts.append(str(seeds[j]))
        i = j + 1
    return ", ".join(parts)


def random_seeds(count: int, rng: random.Random | None = None) -> list[int]:
    """Draw `count` distinct seeds in 0..DICE_MAX (from the OS entropy pool unless `rng` is given)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SEEDS:
        raise ValueError(f"Random seeds to draw must be a whole number from 1 to {MAX_SEEDS}, got {count!r}")
    rng = rng or random.SystemRandom()
    seeds: list[int] = []
    while len(seeds) < count:
        seed = rng.randint(0, DICE_MAX)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def _check_seed(seed: int) -> int:
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seeds: {seed} is out of range; seeds are whole numbers from 0 to {MAX_SEED}")
    return seed
