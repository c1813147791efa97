"""History with lineage: every grid, variation set, matrix and nudge set this browser made.

An entry keeps its cells' recipes, fingerprints and environments, not their pixels (they regenerate
exactly), and where it came from: variations and nudges name the anchor they started from and the
entry that anchor was picked in (grid -> anchor seed -> variations). The history lives in the
browser's localStorage (gr.BrowserState), so it survives a reload and a server restart; it is
bounded, and it is exported and imported as JSON. Each entry keeps a small thumbnail of its first image, shown
above the timeline; a click on one restores its entry as a click on its line does.

Whatever comes back from the browser or from an imported file is untrusted: every entry is checked
again (its shape and sizes, each recipe and fingerprint) before it is used, each recipe passes
admission before its cells are shown, and all of it is shown as plain text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from seedlab import Recipe
from seedlab.files.links import check_fingerprint, result_record
from seedlab.serving.admission import Admission
from webui import thumbnails
from webui.cells import anchor_updates
from webui.entries import (  # noqa: F401 - FORMAT: the history's file format, read by its users
    FORMAT,
    KINDS,
    MAX_CELLS,
    MAX_ENTRIES,
    Cell,
    Entry,
    add_entry,
    caption,
    export_file,
    label,
    merge,
    read_export,
    read_history,
    stored_text,
    summary,
    variation_text,
)
from webui.fields import restore, user_errors
from webui.files import CancelRegistry, PngStore, ResultRecord
from webui.history_words import phrase
from webui.i18n import HISTORY_NOTE, language, words
from webui.requests import base_url, visitor

SECRET = "seedlab-history"  # BrowserState encrypts with it; fixed, so a history outlives a server restart


def history_state() -> gr.BrowserState:
    """The browser-side store (localStorage) the history lives in: one JSON text (entries.stored_text)."""
    return gr.BrowserState([], storage_key="seedlab-history", secret=SECRET)


def to_store(handler: Callable) -> Callable:
    """A history handler as the page wires it: the history it returns goes to the browser's store as one JSON text
    (entries.stored_text); read_history reads that text, and the list an earlier version stored, back."""
    @functools.wraps(handler)
    def wired(*args, **kwargs):
        update = handler(*args, **kwargs)
        if isinstance(update, dict) and isinstance(update.get("history"), list):
            update = {**update, "history": stored_text(update["history"])}
        return update
    return wired


def history_panel(ui: dict) -> None:
    """The "History" accordion's components, added to `ui` by name."""
    with gr.Accordion(words("History"), open=False, elem_id="history-panel") as ui["history_panel"]:
        gr.Markdown(words(HISTORY_NOTE))
        # Newest first, one per entry (a grey square where none was kept), so the n-th picture is the n-th line.
        ui["history_thumbs"] = gr.Gallery(label=words("Pictures"), show_label=False, columns=10, object_fit="contain",
                                          type="filepath", interactive=False, allow_preview=False, height="auto",
                                          elem_id="history-thumbs", elem_classes=["pixelated"])
        ui["timeline"] = gr.Radio(choices=[], label=words("History"), show_label=False, elem_id="timeline")  # its name
        ui["history_note"] = gr.Textbox(show_label=False, interactive=False, visible=False, elem_id="history-note")
        ui["history_view"] = gr.Gallery(label=words("History entry"), columns=4, object_fit="contain", format="png",
                                        type="filepath", interactive=False, allow_preview=False, height="auto",
                                        elem_id="history-view", elem_classes=["pixelated", "cells"])
        with gr.Row():
            ui["history_regenerate"] = gr.Button(words("Regenerate this entry"), interactive=False,
                                                 elem_id="history-regenerate")
            ui["history_export"] = gr.DownloadButton(words("Export history (JSON)"), interactive=False,
                                                     elem_id="history-export")
            ui["history_import"] = gr.UploadButton(words("Import history (JSON)"), file_types=[".json"],
                                                   type="filepath", elem_id="history-import")
        with gr.Accordion(words("History entry results (JSON)"), open=False):
            ui["history_view_results"] = gr.JSON(label="History entry results")
    ui["history"] = history_state()
    ui["restored_entry"] = gr.State(None)  # the entry last restored, for "Regenerate this entry"


def with_results(entries: list[Entry], target: str, results, anchor, anchor_fingerprint,
                 asked: int | None = None, record: ResultRecord | None = None) -> list[Entry] | None:
    """The entries with `target`'s results added as a new entry, or None if there is nothing (valid) to add; its
    thumbnail is made from the first cell's PNG where `record` (this server's) still keeps it."""
    try:
        cells = [Cell.from_json(result) for result in results or []]
        start = None
        if KINDS[target] in ("variations", "nudges") and anchor:
            start = Cell(Recipe.from_dict(anchor), check_fingerprint("fingerprint", anchor_fingerprint), None)
    except (ValueError, TypeError):
        return None  # the page sent results it did not get from us: nothing to keep
    if not cells:
        return None
    columns = 1
    if KINDS[target] == "matrix":  # a row starts where the first cell's prompt comes again
        columns = next((i for i, c in enumerate(cells) if i and c.recipe.prompt == cells[0].recipe.prompt), len(cells))
    picture = thumbnails.made(record.kept(cells[0].recipe, cells[0].fingerprint)) if record is not None else None
    return add_entry(entries, KINDS[target], cells, start, columns, asked, picture)


def timeline(entries: list[Entry], lang: str = "en") -> gr.Radio:
    """The timeline's choices, newest first (values are entry ids as text), in the visitor's language."""
    numbers = {entry.id for entry in entries}
    return gr.Radio(choices=[(label(entry, numbers, lang), str(entry.id)) for entry in reversed(entries)], value=None)


class History:
    """The history's handlers; the app object supplies admission, this server's record and the PNG folder."""

    def __init__(self, admission: Admission, record: ResultRecord, pngs: PngStore, run: Callable, exports: PngStore,
                 cancels: CancelRegistry | None = None):
        # run(recipes, captions, request, progress, target): the app's generation, streaming a gallery's updates
        self.admission, self.record, self.pngs, self.run, self.exports = admission, record, pngs, run, exports
        self.cancels = cancels or CancelRegistry()  # what a stopped run was asked for
        self.thumbs = thumbnails.thumbnail_store(pngs.folder / "thumbnails")  # the gallery's files, bounded apart

    def updates(self, entries: list[Entry], request, note: str = "") -> dict:
        """The stored history, the timeline and its pictures, the export file and a note (hidden when empty)."""
        export = gr.DownloadButton(interactive=False)
        if entries:
            path = export_file(entries, base_url(request), self.exports.folder)
            self.exports.added(path)
            export = gr.DownloadButton(value=str(path), interactive=True)
        lang = language(request)
        return {"history": [entry.to_json() for entry in entries], "timeline": timeline(entries, lang),
                "history_thumbs": self.pictures(entries, lang), "history_export": export,
                "history_note": gr.Textbox(value=note, visible=bool(note))}

    def pictures(self, entries: list[Entry], lang: str = "en") -> gr.Gallery:
        """The timeline's thumbnails, in its order (newest first), captioned with each entry's number and kind."""
        return gr.Gallery(value=[(thumbnails.thumbnail_file(entry.thumbnail, self.thumbs) if entry.thumbnail else
                                  str(self.placeholder()), summary(entry, lang)) for entry in reversed(entries)],
                          selected_index=None)

    def show(self, value, request: gr.Request) -> dict:
        """On page load: the stored history, checked, as the timeline."""
        entries, dropped = read_history(value)
        note = (phrase("{count} stored entries could not be read and were left out.", language(request), count=dropped)
                if dropped else "")
        return self.updates(entries, request, note)

    def remember(self, target: str):
        """A handler that adds the results a generation just showed in `target` to the history."""
        def remember(results, value, anchor, anchor_fingerprint, request: gr.Request) -> dict:
            entries, _ = read_history(value)
            added = with_results(entries, target, results, anchor, anchor_fingerprint, record=self.record)
            return {} if added is None else self.updates(added, request)
        remember.__name__ = f"remember_{target}"
        return remember

    def remember_stopped(self, value, anchor, anchor_fingerprint, grid, vary, matrix, nudges, plot, travel,
                         request: gr.Request) -> dict:
        """After Stop: the finished cells of a stopped generation, added like a finished one (once), with the number
        of images it was asked for, so History says "1 of 16" rather than "grid of 1"."""
        entries, _ = read_history(value)
        kept = {tuple(cell.fingerprint for cell in entry.cells) for entry in entries}
        changed, asked = False, self.cancels.asked(getattr(request, "session_hash", None))
        for target, results in (("grid", grid), ("vary", vary), ("matrix", matrix), ("nudges", nudges),
                                ("plot", plot), ("travel", travel)):
            prints = tuple(record.get("fingerprint") for record in results or [] if isinstance(record, dict))
            if not prints or prints in kept:  # nothing made, or already in the history
                continue
            added = with_results(entries, target, results, anchor, anchor_fingerprint, asked, self.record)
            if added is not None:
                entries, changed = added, True
                kept.add(prints)
        return self.updates(entries, request) if changed else {}

    def restore_picture(self, value, evt: gr.SelectData, request: gr.Request) -> dict:
        """A click on a thumbnail: what a click on its line of the timeline does (the n-th picture is the n-th line)."""
        entries, _ = read_history(value)
        newest_first = entries[::-1]
        index = evt.index if isinstance(evt.index, int) else -1
        choice = str(newest_first[index].id) if 0 <= index < len(newest_first) else None
        return {**self.restore(value, choice, request), "timeline": gr.Radio(value=choice)}

    def restore(self, value, choice, request: gr.Request) -> dict:
        """A timeline click: the entry's images from this server's record (not regenerated) and its controls."""
        entries, _ = read_history(value)
        entry = next((entry for entry in entries if str(entry.id) == str(choice)), None)
        lang = language(request)
        if entry is None:
            return {"history_note": gr.Textbox(value=phrase("That entry is no longer in the history.", lang),
                                               visible=True)}
        base = base_url(request)
        gallery, records, missing, refused = [], [], 0, []
        for index, cell in enumerate(entry.cells):
            try:
                recipe = self.admission.recipe(cell.recipe.to_dict())
            except ValueError as error:
                refused.append(f"cell {index + 1}: {error}")
                recipe = None
            found = self.record.find(recipe) if recipe is not None else None
            path = found[1].path if found is not None and found[0].fingerprint == cell.fingerprint else None
            if path is None:
                missing += 1
                path = str(self.placeholder())
            gallery.append((path, caption(entry, index, lang) + ("" if found else phrase(" (not kept here)", lang))))
            records.append(result_record(cell.recipe, cell.fingerprint, cell.environment, base))
        first = entry.cells[0].recipe
        controls = {}
        if entry.kind != "nudges":  # nudges carry variation seeds: the controls keep what they hold
            rows = entry.cells[::entry.columns] if entry.kind in ("matrix", "grid") else entry.cells[:1]
            lines = [variation_text(first.prompt, cell.recipe.prompt)
                     for cell in entry.cells[1:entry.columns if entry.kind == "matrix" else len(entry.cells)]]
            controls = {**restore(first),
                        "seeds": ", ".join(str(cell.recipe.seed) for cell in rows)}
            if entry.kind in ("variations", "matrix"):
                controls["variations"] = "\n".join(lines)
        note = [phrase("#{id}, {kind} made {made_at}: {shown} of {count} images shown from this server's record, "
                       "none regenerated.", lang, id=entry.id, kind=entry.kind, made_at=entry.made_at,
                       shown=len(entry.cells) - missing, count=len(entry.cells))]
        if missing:
            note.append(phrase("{missing} are no longer kept here (a restart or pruning drops them), shown grey: "
                               "\"Regenerate this entry\" makes them again, and each cell's link regenerates it.",
                               lang, missing=missing))
        if entry.anchor is not None:  # variations and nudges go on from their anchor, as when they were made
            anchor = entry.anchor
            controls.update(anchor_updates(result_record(anchor.recipe, anchor.fingerprint, anchor.environment, base)))
            note.append(phrase("Its anchor (seed {seed}) is the anchor again.", lang, seed=anchor.recipe.seed))
        if controls:
            note.append(phrase("The controls now hold its recipe.", lang))
        if refused:
            note.append(phrase("This server cannot make some of its recipes: {refused}", lang,
                               refused="; ".join(refused[:3])))
        return {**controls, "history_view": gr.Gallery(value=gallery, columns=min(entry.columns, 8) if
                                                       entry.kind == "matrix" else 4, selected_index=None),
                "history_view_results": records, "restored_entry": entry.to_json(),
                "history_regenerate": gr.Button(interactive=not refused),
                "history_note": gr.Textbox(value=" ".join(note), visible=True)}

    def regenerate(self, restored, request: gr.Request, progress=gr.Progress()):  # noqa: B008 - Gradio's way to report progress
        """"Regenerate this entry": its recipes made again, each compared with the fingerprint the history holds."""
        try:
            entry = Entry.from_json(restored)
        except (ValueError, TypeError):
            raise gr.Error("Click an entry of the history first", print_exception=False) from None
        with user_errors(request):
            recipes = [self.admission.recipe(cell.recipe.to_dict()) for cell in entry.cells]
            self.admission.limits.check_count(len(recipes), "seeds")
            self.admission.charge(recipes, visitor(request))
        lang = language(request)
        captions = [caption(entry, index, lang) for index in range(len(entry.cells))]
        last: dict = {}
        for update in self.run(recipes, captions, request, progress, "history_view"):
            last = {**last, **update}
            yield update
        made = last.get("history_view_results") or []
        same = sum(record["fingerprint"] == cell.fingerprint for record, cell in zip(made, entry.cells))
        verdict = (phrase("Regenerated {made} of {count} images: {same} identical to the history", lang,
                          made=len(made), count=len(entry.cells), same=same)
                   + ("." if same == len(made) else phrase(", {differ} differ (the history's were made in another "
                                                           "environment, or the model changed).", lang,
                                                           differ=len(made) - same)))
        yield {"history_note": gr.Textbox(value=verdict, visible=True)}

    def import_(self, path: str | None, value, request: gr.Request) -> dict:
        """An exported history file, checked entry by entry and added after the current entries."""
        entries, _ = read_history(value)
        if not path:
            return {}
        lang = language(request)
        try:
            raw = read_export(path)
        except ValueError as error:
            return self.updates(entries, request, phrase("This file cannot be imported: {error}.", lang, error=error))
        imported, dropped = read_history(raw)
        admitted = []
        for entry in imported:
            try:
                for cell in entry.cells:
                    self.admission.recipe(cell.recipe.to_dict())
            except ValueError:
                dropped += 1
                continue
            admitted.append(entry)
        merged, added = merge(entries, admitted)
        note = phrase("Imported {count} entries ({images} images).", lang, count=len(added),
                      images=sum(len(e.cells) for e in added))
        if len(added) < len(admitted):
            note += phrase(" {count} entries were already in the history and were not added again.", lang,
                           count=len(admitted) - len(added))
        if dropped:
            note += phrase(" {count} entries were left out: malformed, over the bounds, or not makeable on this "
                           "server.", lang, count=dropped)
        if len(merged) < len(entries) + len(added):
            note += phrase(" The history keeps the newest {entries} entries and {images} images: older ones went.",
                           lang, entries=MAX_ENTRIES, images=MAX_CELLS)
        return self.updates(merged, request, note)

    def placeholder(self) -> Path:
        """A grey square for an image this server no longer keeps."""
        path = self.pngs.folder / "not-kept.png"
        if not path.exists():
            from PIL import Image
            Image.new("RGB", (64, 64), (150, 150, 150)).save(path)
        return path


def wire_history(wiring, app, demo, made: dict) -> tuple[list[str], object]:
    """History's events: shown at load, each finished run in `made` (its target name -> event) remembered, an entry
    restored, imported or regenerated. Returns (the outputs that show History, by name; the regenerating event)."""
    from webui.cells import ANCHOR, CELL
    from webui.fields import RESTORED
    from webui.wiring import PRIVATE, by_name

    ui, event, guarded, shows_cell = wiring.ui, wiring.event, wiring.guarded, wiring.shows_cell
    # History: kept in this browser; every finished grid, variation set, matrix, nudge set, plot and travel.
    kept = ["history", "timeline", "history_thumbs", "history_export", "history_note"]
    event(demo.load, to_store(app.history.show), [ui["history"]], kept, queue=False, **PRIVATE)
    for target, finished in made.items():
        finished.success(by_name(to_store(app.history.remember(target)), ui, [ui[name] for name in kept]),
                     [ui[f"{target}_results"], ui["history"], ui["anchor"], ui["anchor_fingerprint"]],
                     [ui[name] for name in kept], queue=False, **PRIVATE)
    # Queued (one at a time, and within each visitor's cap on waiting requests): a restore checks every cell the
    # browser sends, so unqueued, parallel restores could take every worker thread from the other visitors.
    restored = [*RESTORED, "variations", *ANCHOR, "history_view", "history_view_results", "restored_entry",
                "history_regenerate", "history_note"]
    event(ui["timeline"].select, app.history.restore, [ui["history"], ui["timeline"]], restored,
          concurrency_id="history", show_progress="hidden", **PRIVATE)
    # A thumbnail's click restores the same way, and marks its line (a value set by the server fires no .select).
    event(ui["history_thumbs"].select, app.history.restore_picture, [ui["history"]], [*restored, "timeline"],
          concurrency_id="history", show_progress="hidden", **PRIVATE)
    shows_cell(ui["history_view"].select, app.select_history, [ui["history_view_results"]], list(CELL), floating=True)
    event(ui["history_import"].upload, to_store(app.history.import_), [ui["history_import"], ui["history"]], kept,
          **PRIVATE)
    regenerate = event(guarded([ui["history_regenerate"].click]), app.history.regenerate, [ui["restored_entry"]],
                       ["history_view", "history_view_results", "history_note"], concurrency_id="generation",
                       show_progress="minimal", **PRIVATE)

    return kept, regenerate
