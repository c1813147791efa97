"""The app's server-side keeping: the PNG folder it serves and each session's cancel event, both bounded."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
from PIL import Image

from seedlab import Result, fingerprint
from seedlab import save_png as write_png

MAX_PNG_FILES = 1024  # our PNGs kept on disk (Gradio serves its own cached copies); the oldest go first
MAX_SESSIONS = 512  # cancel events kept at once; the least recently started are forgotten first


class PngStore:
    """A bounded folder of PNGs that carry their recipe, named by fingerprint so pixels can be found again."""

    def __init__(self, folder: Path, max_files: int = MAX_PNG_FILES):
        self.folder, self.max_files = folder, max_files

    def save(self, result: Result) -> str:
        """Save an image as a PNG that carries its recipe (lossless, so its fingerprint still holds)."""
        # Named by pixels and recipe: equal pixels from two recipes (determinism on and off) are two files.
        recipe_key = hashlib.sha256(json.dumps(result.recipe.to_json(), sort_keys=True).encode()).hexdigest()[:8]
        path = self.folder / f"seed{result.recipe.seed}-{result.fingerprint[:20]}-{recipe_key}.png"
        if not path.exists():
            write_png(result, path)
            self.prune()
        return str(path)

    def keep_pixels(self, pixels: np.ndarray, print_: str) -> None:
        """Keep an original's pixels on disk (not in session memory) until its regeneration compares them."""
        path = self.folder / f"original-{print_[:20]}-pixels.png"
        if not path.exists():
            Image.fromarray(pixels).save(path, format="PNG")
            self.prune()

    def pixels(self, print_: str) -> np.ndarray | None:
        """The pixels of a recent image with this fingerprint, if its PNG is still in the bounded folder."""
        for path in self.folder.glob(f"*-{print_[:20]}-*.png"):
            try:
                with Image.open(path) as image:
                    pixels = np.asarray(image.convert("RGB"))
            except OSError:  # pruned while reading
                continue
            if fingerprint(pixels) == print_:
                return pixels
        return None

    def prune(self) -> None:
        """Keep the folder bounded on a long-running server: delete the oldest files beyond the limit."""
        files = sorted(self.folder.glob("*.png"), key=lambda file: file.stat().st_mtime)
        for file in files[:-self.max_files]:
            file.unlink(missing_ok=True)


class CancelRegistry:
    """Each session's cancel event for its running generation; Stop sets it."""

    def __init__(self, max_sessions: int = MAX_SESSIONS):
        self.max_sessions = max_sessions
        self._events: OrderedDict[str, threading.Event] = OrderedDict()
        self._lock = threading.Lock()

    def new(self, session: str | None) -> threading.Event:
        """A fresh event for this session's new run (a stopped old run keeps its own)."""
        event = threading.Event()
        if session:  # sessionless calls cannot be stopped
            with self._lock:
                self._events.pop(session, None)
                self._events[session] = event  # most recent last
                while len(self._events) > self.max_sessions:
                    self._events.popitem(last=False)
        return event

    def stop(self, session: str | None) -> None:
        with self._lock:
            event = self._events.get(session)
        if event is not None:
            event.set()
