"""The app's worker processes: a request's images side by side on several cores, without the GIL.

Lanes (threads in one process, generation.py) already run images at once, but a small model spends
much of each step in Python, so two threads share one interpreter lock and reach about 1.7x, not
2x. Worker processes (pool.py, the sweep's own pool) each hold the model and run one image at a
time at a pinned thread count, the same count the app's own process uses, so an image is the same
bit for bit whichever of them makes it.

The workers start in the background after the app is up; until they have loaded the model, and
for single images (no IPC to pay), the app's own process generates.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..engine.generation import Cancelled, Progress, Result
from ..engine.recipe import Recipe
from .pool import Done, Failed, Pool


@contextmanager
def _main_not_reimported():
    """Spawned children re-run the parent's main script (`python app.py` imports gradio: seconds and
    ~150 MB per worker) when `__main__` has a `__file__`; a worker needs only seedlab."""
    main = sys.modules["__main__"]
    path = main.__dict__.pop("__file__", None) if getattr(main, "__spec__", None) is None else None
    try:
        yield
    finally:
        if path is not None:
            main.__file__ = path


class Workers:
    """A Pool for one model that becomes usable once every worker has loaded it."""

    def __init__(self, model: str, *, workers: int, threads: int, device: str = "cpu", dtype: str = "float32"):
        self.model = model
        with _main_not_reimported():
            self.pool = Pool(model, workers=workers, threads=threads, device=device, dtype=dtype)
        self._ready = threading.Event()
        self.error: str | None = None
        threading.Thread(target=self._wait_ready, name="seedlab-workers-start", daemon=True).start()

    def _wait_ready(self) -> None:
        try:
            self.pool.model_info()  # the first worker has loaded the model (the others follow)
        except Exception as error:  # noqa: BLE001 - the app keeps generating in its own process
            self.error = str(error)
            print(f"seedlab: the worker processes failed ({error}); images are made in this process", flush=True)
            return
        self._ready.set()
        print(f"seedlab: {self.pool.size} worker processes ready for multi-image requests", flush=True)

    def serves(self, recipes: list[Recipe]) -> bool:
        """Whether these recipes go to the workers: several images of this model, workers loaded."""
        return self._ready.is_set() and len(recipes) > 1 and all(r.model == self.model for r in recipes)

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._ready.wait(timeout)

    def stream(self, recipes: list[Recipe], *, cancel: threading.Event | None = None) -> Iterator[Progress | Result]:
        """As generation.stream: a Progress after every step, each Result in order; Cancelled when stopped."""
        for item in self.pool.map(recipes, ordered=True, progress=True):
            if cancel is not None and cancel.is_set():
                self.pool.cancel()  # the workers stop at their next step; map then raises Cancelled
            if isinstance(item, Failed):
                if item.error == "cancelled":
                    raise Cancelled("generation cancelled")
                raise ValueError(item.error)
            yield item.result() if isinstance(item, Done) else item

    def close(self) -> None:
        self.pool.close()
