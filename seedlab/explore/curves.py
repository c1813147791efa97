"""Seed travel's curves and its frame limit: plain math, so the command line's options need no torch."""

from __future__ import annotations

import math
from collections.abc import Callable

# How the variation strength runs from 0 to 1 along a segment.
CURVES: dict[str, Callable[[float], float]] = {
    "linear": lambda t: t,
    "ease-in": lambda t: 1 - math.cos(t * math.pi / 2),
    "ease-out": lambda t: math.sin(t * math.pi / 2),
    "ease-in-out": lambda t: (1 - math.cos(t * math.pi)) / 2,
}
MAX_FRAMES = 1000  # frames per segment
