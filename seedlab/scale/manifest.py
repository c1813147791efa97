"""The sweep manifest: a header line with the sweep's parameters, then one JSON line per finished image.

The order of writes makes it safe to stop at any moment: an image is saved under a temporary name,
renamed into place, and only then listed (and flushed). On start the manifest is read back: a line
cut short, a line whose file is gone or a repeated image is dropped (the file rewritten without
them), and everything listed is skipped. A folder made by a sweep with other parameters is refused; a recipe field
added since its header was written is read there as its default (its images were made that way).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..engine.recipe import SPECS
from ..files.links import DEFAULTS, encode_link
from ..files.metadata import save_png
from .plan import Plan
from .pool import Done

FORMAT = 1  # the header's version
MANIFEST, PARTIAL = "manifest.jsonl", ".partial"


class Manifest:
    """The sweep's record on disk: a header line, then one JSON line per finished image."""

    def __init__(self, folder: Path, plan: Plan, parameters: dict):
        self.folder, self.plan = folder, plan
        self.done: set[int] = set()  # image numbers (see Plan) listed and present
        path = folder / MANIFEST
        # A new manifest is written with its first image: a run that fails to start leaves no folder to refuse.
        started = path.exists() and path.stat().st_size > 0  # empty: stopped before its first line was flushed
        self._header = None if started else json.dumps({"seedlab_sweep": FORMAT, "parameters": parameters})
        if self._header is None:
            self._read(path, json.loads(json.dumps(parameters)))  # as it reads back: tuples become lists
        shutil.rmtree(folder / PARTIAL, ignore_errors=True)  # images that were being written when stopped
        (folder / PARTIAL).mkdir()
        self._path, self._file = path, None

    def _read(self, path: Path, parameters: dict) -> None:
        """Collect the finished images, refusing another sweep's folder; drop lines whose file is gone."""
        keep: list[int] = []  # line numbers kept, when some must go
        seen = 0
        with open(path, encoding="utf-8") as lines:
            first = lines.readline()
            header = _json(first)
            if not isinstance(header, dict) or header.get("seedlab_sweep") != FORMAT:
                raise ValueError(f"--out: {path} is not a SeedLab sweep manifest; choose another folder")
            theirs = _with_new_fields(header.get("parameters"), parameters)
            if theirs != parameters:
                differences = _differences(theirs, parameters)
                raise ValueError(f"--out: {self.folder} holds another sweep ({differences}); "
                                 "repeat its command to continue it, or choose another folder")
            for line_number, line in enumerate(lines, start=1):
                seen += 1
                entry = _json(line) if line.endswith("\n") else None  # a last line cut short by a crash
                number = self._number(entry)
                if number is not None and number not in self.done and (self.folder / self.plan.path(number)).is_file():
                    self.done.add(number)
                    keep.append(line_number)
        if len(keep) < seen:
            self._rewrite(path, set(keep))

    def _number(self, entry) -> int | None:
        """The image a manifest line lists, or None for a line that lists none of this plan's."""
        if not isinstance(entry, dict):
            return None
        seed, variation = entry.get("seed"), entry.get("variation")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (seed, variation)):
            return None
        return self.plan.number(seed, variation)

    def _rewrite(self, path: Path, keep: set[int]) -> None:
        partial = path.with_name(MANIFEST + ".tmp")
        with open(path, encoding="utf-8") as lines, open(partial, "w", encoding="utf-8") as out:
            for line_number, line in enumerate(lines):
                if line_number == 0 or line_number in keep:
                    out.write(line)
        os.replace(partial, path)

    def add(self, number: int, done: Done, base_url: str) -> dict:
        """Write the image under a temporary name, rename it into place, then list it (flushed)."""
        relative = self.plan.path(number)
        final, partial = self.folder / relative, self.folder / PARTIAL / f"{number}.png"
        save_png(done.result(), partial)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, final)
        seed, variation = self.plan.image(number)
        entry = {"seed": seed, "variation": variation, "prompt": done.recipe.prompt, "path": relative,
                 "fingerprint": done.fingerprint,
                 "link": encode_link(done.recipe, done.fingerprint, done.environment, base_url),
                 "recipe": done.recipe.to_dict(), "environment": done.environment.to_dict()}
        if self._file is None:
            self._file = open(self._path, "a" if self._header is None else "w", encoding="utf-8")  # noqa: SIM115 - open across calls until close()
            if self._header is not None:
                self._file.write(self._header + "\n")
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()
        self.done.add(number)
        return entry

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _json(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return None


def _with_new_fields(theirs, ours: dict):
    """An older header as this SeedLab writes it: a recipe field it does not name (added since) is that field's
    default, the value its images were made with, where this sweep asks for the default too."""
    if not isinstance(theirs, dict):
        return theirs
    added = {name: ours[name] for name in SPECS if name not in theirs and name in ours and name in DEFAULTS
             and ours[name] == SPECS[name].to_json(DEFAULTS[name])}
    return {**theirs, **added}


def _differences(theirs, ours: dict) -> str:
    if not isinstance(theirs, dict):
        return "its header is damaged"
    keys = [k for k in ours if theirs.get(k) != ours[k]] or sorted(set(theirs) - set(ours))
    return "; ".join(f"{k}: {theirs.get(k)!r} there, {ours.get(k)!r} now" for k in keys)
