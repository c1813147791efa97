"""Small helpers shared by tests: a pinned torch thread count, and a clock tests move by hand."""

from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(count: int):
    """Run with `count` intra-op threads (they change low bits on CPU), then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Clock:
    """A monotonic clock that only moves when a test sets `now`."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now
