"""Budget: what a request costs in seconds on this hardware, and how much each visitor may spend.

Independent caps (images, steps, size) allow requests of a day on a CPU: 16 images x 50 steps at
1024x1024. So every request is also priced: seconds per step, measured on the loaded model at two
sizes and fitted as `a * pixels + b * pixels**2` (convolutions grow with the pixels, attention with
their square), times steps and images. A request over `max_request_seconds` is refused, and so is one
that would take a visitor over `visitor_seconds` in any ten minutes; the message says what to reduce.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from .limits import Limits
from .recipe import Recipe

WINDOW_SECONDS = 600  # the per-visitor window
MAX_VISITORS = 4096  # visitors remembered at once; the least recently seen are forgotten first


@dataclass(frozen=True)
class Speed:
    """Seconds for one denoising step of one image with `pixels` pixels: a * pixels + b * pixels**2."""

    a: float
    b: float

    @classmethod
    def fit(cls, small: tuple[int, float], large: tuple[int, float]) -> Speed:
        """From two measurements (pixels, seconds per step); never negative, never cheaper than measured."""
        (p1, t1), (p2, t2) = small, large
        b = max(0.0, (t2 / p2 - t1 / p1) / (p2 - p1))
        a = max(0.0, t1 / p1 - b * p1)
        return cls(a, b)

    def seconds(self, recipe: Recipe) -> float:
        """Estimated seconds for one image of `recipe` (the steps; text encoding and decoding are small)."""
        pixels = recipe.width * recipe.height
        return recipe.num_inference_steps * (self.a * pixels + self.b * pixels * pixels)


def measure(step_seconds: Callable[[int, int], float], native: tuple[int, int]) -> Speed:
    """Fit a Speed from `step_seconds(width, height)` at the native size and at twice it."""
    width, height = native
    small = (width * height, step_seconds(width, height))
    large = (4 * width * height, step_seconds(2 * width, 2 * height))
    return Speed.fit(small, large)


class Ledger:
    """What each visitor spent in the last WINDOW_SECONDS, bounded in visitors."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic):
        self.limits, self.clock = limits, clock
        self._spent: OrderedDict[str, deque[tuple[float, float]]] = OrderedDict()
        self._lock = threading.Lock()

    def charge(self, visitor: str | None, seconds: float) -> None:
        """Admit a request estimated at `seconds` for `visitor`, or raise ValueError saying what to reduce."""
        limit = self.limits.max_request_seconds
        if seconds > limit:
            raise ValueError(f"this request would take about {_duration(seconds)} here; one request may take at most "
                             f"{_duration(limit)} ({Limits.setting('max_request_seconds')}): "
                             "ask for fewer images, fewer steps or a smaller size")
        if visitor is None:
            return
        with self._lock:
            now = self.clock()
            spent = self._spent.pop(visitor, deque())
            while spent and spent[0][0] < now - WINDOW_SECONDS:
                spent.popleft()
            used = sum(cost for _, cost in spent)
            share = self.limits.visitor_seconds
            if used + seconds > share:
                self._spent[visitor] = spent
                raise ValueError(f"you have used about {_duration(used)} of generation time in the last "
                                 f"{WINDOW_SECONDS // 60} minutes; each visitor may use {_duration(share)} "
                                 f"({Limits.setting('visitor_seconds')}): wait a few minutes or ask for less")
            spent.append((now, seconds))
            self._spent[visitor] = spent
            while len(self._spent) > MAX_VISITORS:
                self._spent.popitem(last=False)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
