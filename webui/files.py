"""The app's server-side keeping, all bounded: the PNG folder, this server's result record, the cancel events."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from seedlab import Recipe, Result, fingerprint
from seedlab import save_png as write_png
from seedlab.engine.environment import Environment

MAX_PNG_FILES = 1024  # our PNGs kept on disk (Gradio serves its own cached copies); the oldest go first
MAX_PNG_BYTES = 512 * 2**20  # and at most this much of them
MAX_EXPORTS, MAX_EXPORT_BYTES = 256, 64 * 2**20  # history exports, in a folder of their own
MAX_RECORD = 4096  # recipes in the result record (a few hundred bytes each); the least recently used go first
MAX_SESSIONS = 512  # cancel events kept at once; the least recently started are forgotten first


class PngStore:
    """A bounded folder of PNGs that carry their recipe, named by fingerprint so pixels can be found again.

    The folder is this store's own (a fresh temporary folder per server): it counts what it wrote
    instead of listing the folder, so saving an image costs no directory scan.
    """

    def __init__(self, folder: Path, max_files: int = MAX_PNG_FILES, max_bytes: int = MAX_PNG_BYTES):
        self.folder, self.max_files, self.max_bytes = folder, max_files, max_bytes
        self._files: OrderedDict[Path, int] = OrderedDict()  # path -> size, oldest first
        self._bytes = 0
        self._lock = threading.Lock()

    def save(self, result: Result) -> str:
        """Save an image as a PNG that carries its recipe (lossless, so its fingerprint still holds)."""
        # Named by pixels and recipe: equal pixels from two recipes (determinism on and off) are two files.
        recipe_key = hashlib.sha256(json.dumps(result.recipe.to_json(), sort_keys=True).encode()).hexdigest()[:8]
        path = self.folder / f"seed{result.recipe.seed}-{result.fingerprint[:20]}-{recipe_key}.png"
        if not path.exists():
            write_png(result, path)
            self.added(path)
        return str(path)

    def keep_pixels(self, pixels: np.ndarray, print_: str) -> None:
        """Keep an original's pixels on disk (not in session memory) until its regeneration compares them."""
        path = self.folder / f"original-{print_[:20]}-pixels.png"
        if not path.exists():
            Image.fromarray(pixels).save(path, format="PNG")
            self.added(path)

    def pixels(self, print_: str) -> np.ndarray | None:
        """The pixels of a recent image with this fingerprint, if its PNG is still in the bounded folder."""
        for path in self.folder.glob(f"*-{print_[:20]}-*.png"):
            pixels = read_pixels(path)
            if pixels is not None and fingerprint(pixels) == print_:
                return pixels
        return None

    def added(self, path: Path) -> None:
        """Count a new file and delete the oldest beyond the limits (a long-running server stays bounded)."""
        with self._lock:
            size = path.stat().st_size
            self._files[path] = size
            self._bytes += size
            while len(self._files) > 1 and (len(self._files) > self.max_files or self._bytes > self.max_bytes):
                old, old_size = self._files.popitem(last=False)
                self._bytes -= old_size
                old.unlink(missing_ok=True)


def read_pixels(path: str | Path) -> np.ndarray | None:
    """A PNG's RGB pixels, or None when it is gone (pruned) or unreadable."""
    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB"))
    except OSError:
        return None


@dataclass(frozen=True)
class Recorded:
    """An image this server made: where its PNG is, its fingerprint and environment, and when."""

    path: str
    fingerprint: str
    environment: Environment
    made_at: float  # time.time()


class ResultRecord:
    """This server's record of the images it made, keyed by recipe, so a link it rendered opens at once.

    Bounded in memory (`max_entries` recipes, least recently used dropped) and on disk (the PNGs are
    the PngStore's, which prunes its own). An entry whose PNG is gone, or whose pixels no longer
    match the fingerprint, is dropped and the link regenerates. Nothing survives a restart: every
    image then regenerates, as links always could. The environment is this process's, so the same
    recipe here always means the same switches, thread count and versions.
    """

    def __init__(self, max_entries: int = MAX_RECORD):
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Recorded] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(recipe: Recipe) -> str:
        return json.dumps(recipe.to_json(), sort_keys=True)

    def add(self, result: Result, path: str) -> None:
        entry = Recorded(path, result.fingerprint, result.environment, time.time())
        with self._lock:
            self._entries.pop(self.key(result.recipe), None)
            self._entries[self.key(result.recipe)] = entry
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def find(self, recipe: Recipe) -> tuple[Result, Recorded] | None:
        """The recorded image for `recipe` (pixels read back and checked), or None."""
        key = self.key(recipe)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            return None
        pixels = read_pixels(entry.path)
        if pixels is None or fingerprint(pixels) != entry.fingerprint:
            with self._lock:
                self._entries.pop(key, None)
            return None
        return Result(recipe, Image.fromarray(pixels), entry.fingerprint, entry.environment), entry

    def kept(self, recipe: Recipe, print_: str) -> str | None:
        """The PNG's path this record keeps for `recipe` when it was made with fingerprint `print_`, else None; its
        pixels are not read back (a gallery shown again as it is: `find` checks them where the image is used)."""
        with self._lock:
            entry = self._entries.get(self.key(recipe))
        return entry.path if entry is not None and entry.fingerprint == print_ else None

    def __len__(self) -> int:
        return len(self._entries)


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

    def stop(self, session: str | None) -> tuple[int, int] | None:
        """Stop this session's run; how far it got (images done, images asked), where its run says so."""
        with self._lock:
            event = self._events.get(session)
        if event is None or event.is_set():
            return None
        event.set()
        return getattr(event, "progress", None)

    def asked(self, session: str | None) -> int | None:
        """How many images this session's last run was asked for, if it was stopped (None otherwise)."""
        with self._lock:
            event = self._events.get(session)
        progress = getattr(event, "progress", None) if event is not None and event.is_set() else None
        return None if progress is None else progress[1]
