"""The history's entries: what each grid, variation set, matrix, nudge set, plot and travel keeps, checked and bounded.

An entry keeps its cells' recipes, fingerprints and environments, not their pixels (they regenerate
exactly), and where it came from (the anchor it started from, and the entry that anchor was picked in); its one
picture is a small thumbnail of its first image (webui/thumbnails.py), to recognise it by.
Everything read back (from the browser's storage or an imported file) is untrusted: from_json checks it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from seedlab import Recipe
from seedlab.engine.environment import Environment
from seedlab.engine.recipe import SPECS
from seedlab.files.links import check_fingerprint, result_record
from webui import thumbnails
from webui.history_words import phrase

FORMAT = "seedlab-history"  # an exported file's "format", with "version"
VERSION = 1
MAX_ENTRIES = 40  # entries kept; the oldest go first
MAX_CELLS = 400  # images in all entries together (about 1.5 kB each in localStorage)
# The browser's stored text (stored_text) read back: a full history is about 0.6 MB; its 40 thumbnails add at most
# 40 x thumbnails.MAX_CHARS = 0.48 MB (the embedded model's, about 4,500 characters each, 0.18 MB). Encrypted by
# gr.BrowserState, a full history with the largest thumbnails takes about 1.2 M of localStorage's 5 M characters.
MAX_STORED_CHARS = 4 * 2**20
MAX_ENTRY_CELLS = 256  # images in one entry (a matrix at the largest limits a host would set)
KINDS = {"grid": "grid", "vary": "variations", "matrix": "matrix", "nudges": "nudges", "plot": "plot",
         "travel": "travel"}  # results target -> kind
_MADE_AT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")


@dataclass(frozen=True)
class Cell:
    """One image of an entry: its recipe, fingerprint and environment (no pixels)."""

    recipe: Recipe
    fingerprint: str
    environment: Environment | None

    def to_json(self) -> dict:
        return {"recipe": self.recipe.to_json(), "fingerprint": self.fingerprint,
                "environment": None if self.environment is None else self.environment.to_dict()}

    @classmethod
    def from_json(cls, data) -> Cell:
        """A cell from untrusted JSON: ValueError if any part is malformed."""
        if not isinstance(data, dict):
            raise ValueError(f"a cell must be a JSON object, got {type(data).__name__}")
        environment = data.get("environment")
        return cls(Recipe.from_dict(data.get("recipe")), check_fingerprint("fingerprint", data.get("fingerprint")),
                   None if environment is None else Environment.from_dict(environment))


@dataclass(frozen=True)
class Entry:
    """One grid, variation set, matrix, nudge set, plot or travel, and the anchor it started from."""

    id: int
    kind: str  # one of KINDS' values
    made_at: str  # "YYYY-MM-DD HH:MM:SS UTC"
    cells: tuple[Cell, ...]
    anchor: Cell | None = None  # variations and nudges: the image they started from
    parent: int | None = None  # the entry the anchor was picked in, when it is in the history
    columns: int = 1  # a matrix's cells per row
    asked: int | None = None  # a stopped generation: the images it was asked for (its cells are those it finished)
    thumbnail: str | None = None  # its first image, small: a PNG data URL (thumbnails.made), None where none was kept

    def to_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "made_at": self.made_at, "parent": self.parent,
                "columns": self.columns, "anchor": None if self.anchor is None else self.anchor.to_json(),
                "cells": [cell.to_json() for cell in self.cells], "asked": self.asked, "thumbnail": self.thumbnail}

    @classmethod
    def from_json(cls, data) -> Entry:
        """An entry from untrusted JSON (the browser's storage, an imported file): ValueError if malformed."""
        if not isinstance(data, dict):
            raise ValueError(f"an entry must be a JSON object, got {type(data).__name__}")
        kind, made_at, cells = data.get("kind"), data.get("made_at"), data.get("cells")
        if kind not in KINDS.values():
            raise ValueError(f"kind must be one of {', '.join(KINDS.values())}")
        if not isinstance(made_at, str) or not _MADE_AT.match(made_at):
            raise ValueError("made_at must read YYYY-MM-DD HH:MM:SS UTC")
        if not isinstance(cells, list) or not 1 <= len(cells) <= MAX_ENTRY_CELLS:
            raise ValueError(f"cells must be a list of 1 to {MAX_ENTRY_CELLS} images")
        number, parent, columns, asked = data.get("id"), data.get("parent"), data.get("columns", 1), data.get("asked")
        for name, value, allowed in (("id", number, False), ("parent", parent, True), ("columns", columns, False),
                                     ("asked", asked, True)):
            if not (allowed and value is None) and (isinstance(value, bool) or not isinstance(value, int)
                                                    or not 1 <= value <= 10**9):
                raise ValueError(f"{name} must be a whole number from 1 to 1000000000")
        anchor = data.get("anchor")
        # A thumbnail that is not a small PNG is dropped, the entry kept: it is only a picture to recognise it by.
        return cls(number, kind, made_at, tuple(Cell.from_json(cell) for cell in cells),
                   None if anchor is None else Cell.from_json(anchor), parent, min(columns, MAX_ENTRY_CELLS), asked,
                   thumbnails.checked(data.get("thumbnail")))


def read_history(value) -> tuple[list[Entry], int]:
    """The valid entries of an untrusted history (oldest first, ids unique, within the bounds), and how many were
    dropped.

    Read from the newest end and only as far as the bounds reach: a tampered store or file of any
    size costs at most 4 * MAX_ENTRIES items and MAX_ENTRY_CELLS cells each of checking.
    """
    if isinstance(value, str) and value and len(value) <= MAX_STORED_CHARS:  # the browser's store: stored_text
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return [], 1
    if not isinstance(value, list):
        return [], 0 if value in (None, "") else 1
    kept: list[Entry] = []
    seen: set[int] = set()
    cells = 0
    for item in reversed(value[-MAX_ENTRIES * 4:]):  # we never write more: a longer list was made elsewhere
        if len(kept) == MAX_ENTRIES:
            break
        try:
            entry = Entry.from_json(item)
        except (ValueError, TypeError, RecursionError):
            continue
        if entry.id in seen:
            continue
        if cells + len(entry.cells) > MAX_CELLS:
            break
        seen.add(entry.id)
        kept.append(entry)
        cells += len(entry.cells)
    return kept[::-1], len(value) - len(kept)


def stored_text(history: list) -> str:
    """The history as the browser's store keeps it: one JSON text (read back by read_history).

    Gradio's page copies the value of every output it tracks at each message of a run, object by object (Svelte's
    $state.snapshot). A full history stored as objects made a 16-image preview grid take 2.0 s instead of 1.4 s, the
    browser spending 1.7 s of CPU on it instead of 0.75 (bench/bench_preview.py --history 30); one text is copied
    at once. A list stored by an earlier version is read as before.
    """
    return json.dumps(history, separators=(",", ":"))


def bounded(entries: list[Entry]) -> list[Entry]:
    """The newest entries within MAX_ENTRIES and MAX_CELLS (oldest first)."""
    kept: list[Entry] = []
    cells = 0
    for entry in reversed(entries):
        if len(kept) == MAX_ENTRIES or cells + len(entry.cells) > MAX_CELLS:
            break
        kept.append(entry)
        cells += len(entry.cells)
    return kept[::-1]


def parent_of(entries: list[Entry], anchor: Cell | None) -> int | None:
    """The entry the anchor was picked in: the newest that made its image (recipe and pixels), not counting the
    variation and nudge sets that only made it again as their own anchor's base cell (variations of an anchor
    picked in #1 would otherwise say "from #4", the newest variation set of that anchor); failing that, the newest
    holding it."""
    if anchor is None:
        return None
    holding = [entry for entry in entries if any(cell.recipe == anchor.recipe and cell.fingerprint == anchor.fingerprint
                                                 for cell in entry.cells)]
    made = [entry for entry in holding if entry.anchor is None or entry.anchor.recipe != anchor.recipe
            or entry.anchor.fingerprint != anchor.fingerprint]
    return (made or holding)[-1].id if holding else None


def add_entry(entries: list[Entry], kind: str, cells: list[Cell], anchor: Cell | None = None,
              columns: int = 1, asked: int | None = None, thumbnail: str | None = None) -> list[Entry]:
    """The history with a new entry at its end (its id one past the largest), within the bounds; `thumbnail`: its
    first image's (thumbnails.made)."""
    number = max((entry.id for entry in entries), default=0) + 1
    made_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    asked = asked if asked is not None and asked > len(cells) else None  # a stopped run: what it was asked for
    entry = Entry(number, kind, made_at, tuple(cells[:MAX_ENTRY_CELLS]), anchor, parent_of(entries, anchor), columns,
                  asked, thumbnail)
    return bounded([*entries, entry])


def merge(entries: list[Entry], imported: list[Entry]) -> tuple[list[Entry], list[Entry]]:
    """Imported entries after the current ones, renumbered past them (their lineage renumbered alike), and the
    ones added: an entry the history holds (same kind, time and images) is not added twice."""
    known = {identity(entry): entry.id for entry in entries}
    numbers: dict[int, int] = {}
    fresh: list[Entry] = []
    last = max((entry.id for entry in entries), default=0)
    for entry in imported:
        key = identity(entry)
        if key not in known:
            last += 1
            known[key] = last
            fresh.append(entry)
        numbers[entry.id] = known[key]  # a duplicate's children point at the entry already there
    # Only the numbers change: everything else an entry holds (a stopped run's count among it) is kept.
    renumbered = [dataclasses.replace(e, id=numbers[e.id], parent=numbers.get(e.parent)) for e in fresh]
    return bounded([*entries, *renumbered]), renumbered


def identity(entry: Entry) -> tuple:
    """What makes two entries the same: kind, time, and each image's recipe and fingerprint."""
    cells = tuple((cell.fingerprint, json.dumps(cell.recipe.to_json(), sort_keys=True)) for cell in entry.cells)
    return entry.kind, entry.made_at, cells


def caption(entry: Entry, index: int, lang: str = "en") -> str:
    """A cell's caption, derived from its recipe (never stored text): the seed, variation or nudge it shows."""
    recipe = entry.cells[index].recipe
    if entry.kind == "grid":
        return phrase("seed {seed}", lang, seed=recipe.seed)
    if entry.kind == "nudges":
        return phrase("variation seed {seed} · strength {strength}", lang, seed=recipe.variation_seed,
                      strength=f"{recipe.variation_strength:g}")
    if entry.kind in ("plot", "travel"):  # what sets the cell apart: the fields its entry's cells vary over
        first = entry.cells[0].recipe
        varied = [name for name in SPECS
                  if any(getattr(cell.recipe, name) != getattr(first, name) for cell in entry.cells)]
        shown = " · ".join(f"{SPECS[name].label} {SPECS[name].to_text(getattr(recipe, name))}" for name in varied[:3])
        return shown or phrase("seed {seed}", lang, seed=recipe.seed)
    row_start = index - index % entry.columns if entry.kind == "matrix" else 0
    base = entry.cells[row_start].recipe.prompt
    column = phrase("base prompt", lang) if index == row_start else variation_text(base, recipe.prompt).strip()
    return phrase("seed {seed} · {column}", lang, seed=recipe.seed, column=column) if entry.kind == "matrix" else column


def _what(entry: Entry, lang: str) -> str:
    """An entry's kind and size: "previews of 8", "grid of 8", "matrix 2 x 3", "nudges (4)"."""
    count = len(entry.cells)
    if entry.kind == "grid":  # previews and finished ones read apart (a preview's recipe says it is one)
        previews = sum(cell.recipe.preview_steps > 0 for cell in entry.cells)
        return phrase("previews of {count}" if previews == count else "grid of {count}", lang, count=count)
    if entry.kind == "matrix":
        return phrase("matrix {rows} x {columns}", lang, rows=count // entry.columns, columns=entry.columns)
    return phrase("{kind} ({count})", lang, kind=entry.kind, count=count)


def summary(entry: Entry, lang: str = "en") -> str:
    """What an entry is, in a few words, after its number: its thumbnail's caption ("#9 · previews of 8")."""
    return f"#{entry.id} · {_what(entry, lang)}"


def variation_text(base: str, prompt: str) -> str:
    """What a variation line appended to the base prompt, as written (joined again, it gives the same prompt)."""
    return prompt[len(base):] if prompt.startswith(base) and prompt != base else prompt


def label(entry: Entry, numbers: set[int], lang: str = "en") -> str:
    """One line of the timeline: number, time, what it is, and where it came from (plain text)."""
    first = entry.cells[0].recipe
    count = len(entry.cells)
    prompt = repr(first.prompt if len(first.prompt) <= 40 else first.prompt[:40] + "…")
    # not "grid of 1" for 1 of 16
    stopped = phrase(" (stopped: {count} of {asked})", lang, count=count, asked=entry.asked) if entry.asked else ""
    if entry.kind == "grid":
        seeds = [str(cell.recipe.seed) for cell in entry.cells]
        previews = sum(cell.recipe.preview_steps > 0 for cell in entry.cells)
        still = (phrase(", {finished} finished, {previews} still previews", lang, finished=count - previews,
                        previews=previews) if 0 < previews < count else "")
        what = phrase("{what}: seeds {seeds} · {prompt}", lang, what=_what(entry, lang) + stopped + still,
                      seeds=", ".join(seeds[:4]) + ("…" if count > 4 else ""), prompt=prompt)
    elif entry.kind == "matrix":
        what = phrase("matrix {rows} seeds x {columns} columns · {prompt}", lang, rows=count // entry.columns,
                      columns=entry.columns, prompt=prompt)
    else:
        what = phrase("{what} · {prompt}", lang, what=_what(entry, lang) + stopped, prompt=prompt)
    line = f"#{entry.id} · {entry.made_at[11:16]} · {what}"
    if entry.anchor is not None:
        source = f"#{entry.parent}" if entry.parent in numbers else phrase("an image outside this history", lang)
        line += phrase(" ← anchor seed {seed} from {source}", lang, seed=entry.anchor.recipe.seed, source=source)
    return line


def export_json(entries: list[Entry], base_url: str) -> dict:
    """The exported file: every entry with its cells' recipes, fingerprints, environments and links."""
    def cell(entry: Entry, index: int) -> dict:
        one = entry.cells[index]
        return {**result_record(one.recipe, one.fingerprint, one.environment, base_url),
                "caption": caption(entry, index)}

    return {"format": FORMAT, "version": VERSION, "exported_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "entries": [{**entry.to_json(), "cells": [cell(entry, i) for i in range(len(entry.cells))]}
                        for entry in entries]}


def read_export(path: str | Path) -> list:
    """The entries list of an exported file, before each entry is checked: ValueError saying what is wrong."""
    try:
        data = json.loads(Path(path).read_bytes())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"the file is not JSON ({type(error).__name__})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f'the file is not a SeedLab history (its "format" must be "{FORMAT}")')
    if data.get("version") != VERSION:
        raise ValueError(f"the file's version must be {VERSION}")
    if not isinstance(data.get("entries"), list):
        raise ValueError('the file\'s "entries" must be a list')
    # Only what an export holds: a cell's link, seed, prompt and caption are derived again from its recipe.
    return data["entries"]


def export_file(entries: list[Entry], base_url: str, folder: Path) -> Path:
    """The history as a JSON file in `folder`, named by its content."""
    text = json.dumps(export_json(entries, base_url), indent=1, ensure_ascii=False)
    path = folder / f"seedlab-history-{hashlib.sha256(text.encode()).hexdigest()[:12]}.json"
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return path
