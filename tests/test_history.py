"""History with lineage: kept in the browser, restored without regenerating, exported and imported safely."""

import json
import re
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest
import torch
from PIL import Image

import webui.handlers
import webui.streaming
from seedlab import ModelStore, fingerprint, join_prompt
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from webui.entries import MAX_STORED_CHARS
from webui.history import (
    FORMAT,
    MAX_CELLS,
    MAX_ENTRIES,
    Cell,
    Entry,
    read_history,
    stored_text,
    to_store,
    variation_text,
)

STEPS = 2


def new_app(model, folder):
    from webui.handlers import WebApp

    store = ModelStore([model.name], device=torch.device("cpu"))
    store.add(model)
    folder.mkdir(parents=True, exist_ok=True)
    return WebApp(Admission(store, Limits()), folder)


@pytest.fixture()
def app(reference_model, tmp_path):
    return new_app(reference_model, tmp_path / "png")


def final(updates) -> dict:
    merged: dict = {}
    for update in updates:
        merged.update(update)
    return merged


def generated(app, handler, values: dict, target: str) -> list[dict]:
    update = final(getattr(app, handler)({"num_inference_steps": STEPS, **values}, None, None))
    return update[f"{target}_results"]


def explored(app) -> tuple[list, list, list]:
    """A grid of seeds 3 and 4, then variations of its second cell: the history, and both results."""
    grid = generated(app, "grid", {"prompt": "a circle", "seeds": "3, 4"}, "grid")
    history = app.history.remember("grid")(grid, [], None, "", None)["history"]
    anchor = grid[1]
    vary = generated(app, "vary", {**anchor["recipe"], "variations": ", red\nblue\n at night"}, "vary")
    history = app.history.remember("vary")(vary, history, anchor["recipe"], anchor["fingerprint"], None)["history"]
    return json.loads(json.dumps(history)), grid, vary  # as the browser stores it


def shown_pixels(gallery) -> list[str]:
    return [fingerprint(np.asarray(Image.open(item["image"]["path"]).convert("RGB"))) for item in gallery.value]


def captions(gallery) -> list[str]:
    return [item["caption"] for item in gallery.value]


def test_entries_say_where_they_came_from(app):
    history, grid, vary = explored(app)
    assert [entry["kind"] for entry in history] == ["grid", "variations"]
    assert history[1]["parent"] == history[0]["id"]
    assert [cell["fingerprint"] for cell in history[0]["cells"]] == [record["fingerprint"] for record in grid]
    labels = [label for label, _ in app.history.show(history, None)["timeline"].choices]
    assert labels[0].startswith("#2 ·") and labels[0].endswith("← anchor seed 4 from #1")  # newest first
    assert "grid of 2: seeds 3, 4 · 'a circle'" in labels[1]


def test_a_chinese_browser_reads_history_in_chinese_with_its_numbers_and_words_kept(app):
    history, grid, vary = explored(app)
    chinese = SimpleNamespace(headers={"accept-language": "zh-CN,zh;q=0.9"}, session_hash="zh")
    shown = app.history.show(history, chinese)
    labels = [label for label, _ in shown["timeline"].choices]
    assert labels[0].endswith("← 锚点种子 4，来自 #1") and "变体（4）" in labels[0]
    assert "2 张网格：种子 3, 4 · 'a circle'" in labels[1]  # the prompt as written
    assert captions(shown["history_thumbs"]) == ["#2 · 变体（4）", "#1 · 2 张网格"]
    restored = app.history.restore(history, "2", chinese)
    assert captions(restored["history_view"]) == ["基础提示词", ", red", ", blue", "at night"]  # a visitor's lines kept
    note = restored["history_note"].value
    assert note.startswith("#2，变体，生成于 ") and "锚点（种子 4）" in note
    english = app.history.show(history, SimpleNamespace(headers={"accept-language": "en-GB"}, session_hash="en"))
    assert captions(english["history_thumbs"]) == ["#2 · variations (4)", "#1 · grid of 2"]
    assert not any(re.search("[\u4e00-\u9fff]", text) for text in
                   [label for label, _ in english["timeline"].choices] + captions(english["history_thumbs"]))


def test_a_timeline_click_restores_the_entry_from_the_record_without_regenerating(app, monkeypatch):
    history, grid, vary = explored(app)
    monkeypatch.setattr(webui.streaming, "stream_on_gpu", lambda *a, **k: pytest.fail("regenerated"))
    update = app.history.restore(history, "2", None)
    assert shown_pixels(update["history_view"]) == [record["fingerprint"] for record in vary]
    assert captions(update["history_view"]) == ["base prompt", ", red", ", blue", "at night"]
    assert update["history_view_results"][2]["link"] == vary[2]["link"]
    # The controls hold its recipe again: the variation lines join to the same prompts.
    assert update["prompt"] == "a circle" and update["seeds"] == "4"
    lines = update["variations"].splitlines()
    assert [join_prompt("a circle", line) for line in lines] == [record["prompt"] for record in vary[1:]]
    grid_update = app.history.restore(history, "1", None)
    assert grid_update["seeds"] == "3, 4" and shown_pixels(grid_update["history_view"]) == [
        record["fingerprint"] for record in grid]


def test_after_a_restart_an_entry_shows_what_is_missing_and_regenerates_exactly(app, reference_model, tmp_path):
    history, grid, _ = explored(app)
    restarted = new_app(reference_model, tmp_path / "png-after-restart")  # nothing on record
    update = restarted.history.restore(history, "1", None)
    assert "2 are no longer kept here" in update["history_note"].value
    assert all(caption.endswith("(not kept here)") for caption in captions(update["history_view"]))
    made = final(restarted.history.regenerate(update["restored_entry"], None, None))
    assert [record["fingerprint"] for record in made["history_view_results"]] == [r["fingerprint"] for r in grid]
    assert made["history_note"].value == "Regenerated 2 of 2 images: 2 identical to the history."
    again = restarted.history.restore(history, "1", None)  # now on this server's record
    assert shown_pixels(again["history_view"]) == [record["fingerprint"] for record in grid]


def test_export_then_import_keeps_recipes_fingerprints_and_lineage(app, reference_model, tmp_path):
    history, _, _ = explored(app)
    exported = app.history.show(history, None)["history_export"].value["path"]
    with open(exported, encoding="utf-8") as file:
        data = json.loads(file.read())
    assert data["format"] == FORMAT and all(cell["link"].startswith("http") for cell in data["entries"][0]["cells"])
    other = new_app(reference_model, tmp_path / "elsewhere")
    mine = other.history.remember("grid")(generated(other, "grid", {"prompt": "x", "seeds": "9"}, "grid"), [], None,
                                          "", None)["history"]
    update = other.history.import_(exported, mine, None)
    assert update["history_note"].value == "Imported 2 entries (6 images)."
    imported = update["history"][1:]
    assert [entry["id"] for entry in imported] == [2, 3] and imported[1]["parent"] == 2  # renumbered past mine
    assert [[c["fingerprint"] for c in e["cells"]] for e in imported] == [
        [c["fingerprint"] for c in e["cells"]] for e in history]
    # The same file again adds nothing, and says so; the history is unchanged.
    again = other.history.import_(exported, update["history"], None)
    assert again["history_note"].value == ("Imported 0 entries (0 images). 2 entries were already in the history "
                                           "and were not added again.")
    assert again["history"] == update["history"]


def hostile_files(tmp_path, history) -> dict:
    good = {"format": FORMAT, "version": 1, "entries": history}
    entry = history[0]

    def with_cell(**change):
        return {**good, "entries": [{**entry, "cells": [{**entry["cells"][0], **change}]}]}

    cases = {
        "not json": b"\x89PNG not json",
        "deep nesting": b"[" * 100_000 + b"]" * 100_000,
        "a huge number": b'{"format": "seedlab-history", "version": 1, "entries": [' + b"9" * 100_000 + b"]}",
        "another format": json.dumps({**good, "format": "other"}).encode(),
        "a bad fingerprint": json.dumps(with_cell(fingerprint="<img src=x onerror=alert(1)>")).encode(),
        "an unknown recipe field": json.dumps(with_cell(recipe={**entry["cells"][0]["recipe"], "x": 1})).encode(),
        "a model not served here": json.dumps(with_cell(recipe={**entry["cells"][0]["recipe"],
                                                                 "model": "evil/model"})).encode(),
        "too many steps": json.dumps(with_cell(recipe={**entry["cells"][0]["recipe"],
                                                        "num_inference_steps": 10**6})).encode(),
        "a bad made_at": json.dumps({**good, "entries": [{**entry, "made_at": "\n<script>"}]}).encode(),
    }
    paths = {}
    for name, content in cases.items():
        path = tmp_path / (name.replace(" ", "-") + ".json")
        path.write_bytes(content)
        paths[name] = str(path)
    return paths


def test_a_hostile_import_is_refused_with_a_message_and_changes_nothing(app, tmp_path):
    history, _, _ = explored(app)
    for name, path in hostile_files(tmp_path, history).items():
        update = app.history.import_(path, history, None)
        note = update["history_note"].value
        assert update["history"] == history, name
        assert note.startswith(("This file cannot be imported", "Imported 0 entries")), (name, note)


def test_a_hostile_prompt_is_kept_as_text(app):
    html = "<img src=x onerror=alert(1)>"
    grid = generated(app, "grid", {"prompt": html, "seeds": "1"}, "grid")
    history = app.history.remember("grid")(grid, [], None, "", None)["history"]
    label = app.history.show(history, None)["timeline"].choices[0][0]
    assert repr(html) in label  # the Radio shows it as text (checked in the browser test)


def test_a_tampered_browser_store_is_read_as_far_as_it_is_valid(app, monkeypatch):
    history, _, _ = explored(app)
    for value in (None, "x", 5, {"a": 1}):
        assert read_history(value)[0] == []
    tampered = [*history, {"id": 9}, "junk", {**history[0], "id": 2}, {**history[0], "cells": []}]
    entries, dropped = read_history(tampered)
    assert [entry.id for entry in entries] == [1, 2] and dropped == 4
    update = app.history.show(tampered, None)
    assert update["history_note"].value == "4 stored entries could not be read and were left out."
    flood = [history[0]] + [{**history[1], "cells": [*history[1]["cells"][:-1], "junk"]}] * 100_000 + [history[1]]
    checked = []
    monkeypatch.setattr(Cell, "from_json", classmethod(lambda cls, data, parse=Cell.from_json: (
        checked.append(1), parse(data))[1]))
    entries, dropped = read_history(flood)  # only its newest end is looked at
    assert [entry.id for entry in entries] == [2] and dropped == 100_001
    assert len(checked) <= MAX_ENTRIES * 4 * (len(history[1]["cells"]) + 1)  # the cells and the anchor


def test_the_browser_stores_the_history_as_one_text_and_reads_what_earlier_versions_stored(app):
    history, _, _ = explored(app)
    update = to_store(app.history.show)(history, None)  # as the page wires it
    stored = update["history"]
    assert isinstance(stored, str) and json.loads(stored) == history  # one value, not thousands of objects to copy
    assert stored == stored_text(history) and update["timeline"].choices == app.history.show(history, None)[
        "timeline"].choices
    assert [entry.to_json() for entry in read_history(stored)[0]] == history
    assert [entry.to_json() for entry in read_history(history)[0]] == history  # a list, as stored before
    again = to_store(app.history.remember("grid"))(history[0]["cells"], stored, None, "", None)["history"]
    assert json.loads(again)[:-1] == history  # the text read back, the new entry added
    for hostile in ("[" * 100_000, "[" + "1," * MAX_STORED_CHARS + "1]", "{not json", "[1, 2"):
        assert read_history(hostile) == ([], 1)  # too deep, too long, not JSON: dropped like a tampered store
    assert read_history("") == ([], 0)


def test_the_history_is_bounded(app):
    history, _, _ = explored(app)
    grid = history[0]
    many = [{**grid, "id": number} for number in range(1, 100)]
    entries, dropped = read_history(many)
    assert len(entries) == MAX_ENTRIES and entries[-1].id == 99 and dropped == 99 - MAX_ENTRIES
    big = [{**grid, "id": number, "cells": grid["cells"] * 64} for number in range(1, 10)]  # 128 images each
    entries, _ = read_history(big)
    assert sum(len(entry.cells) for entry in entries) <= MAX_CELLS and entries[-1].id == 9
    added = app.history.remember("grid")([{**cell, "recipe": cell["recipe"]} for cell in grid["cells"]],
                                         many, None, "", None)["history"]
    assert len(added) == MAX_ENTRIES and added[-1]["id"] == 100


def test_variation_lines_are_restored_as_written():
    for base in ("a cat", ""):
        for line in (", red", "blue", " at night", ";x", "a, b"):
            prompt = join_prompt(base, line)
            assert join_prompt(base, variation_text(base, prompt)) == prompt


def test_a_cell_the_page_sends_back_is_checked(app):
    history, grid, _ = explored(app)
    bad = [{**grid[0], "fingerprint": "not hex"}, {**grid[0], "recipe": {"prompt": "p", "steps": 1}},
           {**grid[0], "link": "javascript:alert(1)"}, "junk"]
    for index in range(len(bad)):
        with pytest.raises(gr.Error, match="this cell's result cannot be used"):
            app.select(bad, SimpleNamespace(index=index))
    assert app.select(grid, SimpleNamespace(index=0))["anchor_fingerprint"] == grid[0]["fingerprint"]
    assert Entry.from_json(history[0]).cells[0].fingerprint == grid[0]["fingerprint"]


def test_a_matrix_and_nudges_are_kept_with_their_rows_and_anchor(app):
    history, grid, _ = explored(app)
    matrix = generated(app, "matrix", {"prompt": "a circle", "seeds": "1, 2", "variations": ", red\n, blue"}, "matrix")
    history = app.history.remember("matrix")(matrix, history, None, "", None)["history"]
    assert history[-1]["columns"] == 3 and len(history[-1]["cells"]) == 6
    update = app.history.restore(history, str(history[-1]["id"]), None)
    assert update["seeds"] == "1, 2" and update["variations"] == ", red\n, blue"
    assert captions(update["history_view"])[3:] == ["seed 2 · base prompt", "seed 2 · , red", "seed 2 · , blue"]
    assert shown_pixels(update["history_view"]) == [record["fingerprint"] for record in matrix]

    anchor = grid[0]
    nudges = final(app.nudge(anchor["recipe"], 2, 0.2, None, None))["nudges_results"]
    history = app.history.remember("nudges")(nudges, history, anchor["recipe"], anchor["fingerprint"], None)["history"]
    assert history[-1]["kind"] == "nudges" and history[-1]["parent"] == history[0]["id"]
    label = app.history.show(history, None)["timeline"].choices[0][0]
    assert "nudges (2)" in label and label.endswith("← anchor seed 3 from #1")
    update = app.history.restore(history, str(history[-1]["id"]), None)
    assert "prompt" not in update  # nudges carry variation seeds: the controls keep what they hold
    assert captions(update["history_view"])[0].startswith("variation seed ") and "strength 0.2" in captions(
        update["history_view"])[0]


def test_restoring_variations_makes_their_anchor_the_anchor_again_and_a_grid_leaves_it(app):
    history, grid, _ = explored(app)
    update = app.history.restore(history, str(history[1]["id"]), None)
    assert update["anchor"] == grid[1]["recipe"] and update["anchor_fingerprint"] == grid[1]["fingerprint"]
    assert update["anchor_text"].startswith("Anchor seed: 4 · prompt: a circle")
    assert "Its anchor (seed 4) is the anchor again." in update["history_note"].value
    assert "anchor" not in app.history.restore(history, str(history[0]["id"]), None)


def test_a_stopped_generation_is_remembered_once_with_its_finished_cells(app):
    grid = generated(app, "grid", {"prompt": "a circle", "seeds": "3, 4"}, "grid")
    stopped = grid[:1]  # what the page shows after a Stop: the cells finished so far
    update = app.history.remember_stopped([], None, "", stopped, [], None, None, None, None, None)
    [entry] = update["history"]
    assert entry["kind"] == "grid" and [cell["fingerprint"] for cell in entry["cells"]] == [grid[0]["fingerprint"]]
    assert app.history.remember_stopped(update["history"], None, "", stopped, [], None, None, None, None, None) == {}
    assert app.history.remember_stopped([], None, "", [], [], None, None, None, None, None) == {}  # nothing finished


def test_a_stopped_grid_is_listed_with_how_many_it_was_asked_for(app):
    """Issue 33: History listed a stopped 16-image grid as "grid of 1"."""
    grid = generated(app, "grid", {"prompt": "a circle", "seeds": "3, 4"}, "grid")
    session = SimpleNamespace(session_hash="stopped")
    app.cancels.new("stopped").progress = (1, 16)  # what run() records as it goes: 1 of 16 done when Stop came
    assert app.cancels.stop("stopped") == (1, 16)
    update = app.history.remember_stopped([], None, "", grid[:1], [], None, None, None, None, session)
    assert update["history"][0]["asked"] == 16
    label = update["timeline"].choices[0][0]
    assert "grid of 1 (stopped: 1 of 16): seeds 3 · 'a circle'" in label, label
    assert read_history(json.loads(json.dumps(update["history"])))[0][0].asked == 16  # kept in the browser's store
    finished = app.history.remember("grid")(grid, [], None, "", None)
    assert finished["history"][0]["asked"] is None and "stopped" not in finished["timeline"].choices[0][0]
    bad = {**update["history"][0], "asked": -3}
    assert read_history([bad]) == ([], 1)  # a tampered count is checked like every other number
    # Exported and imported (issue 47: the import renumbered the entry and lost its count).
    exported = app.history.show(update["history"], None)["history_export"].value["path"]
    imported = app.history.import_(exported, [], None)
    assert imported["history"][0]["asked"] == 16
    assert "(stopped: 1 of 16)" in imported["timeline"].choices[0][0]


def test_plots_and_travels_are_kept_with_captions_that_tell_their_cells_apart(app):
    """Issue 33: plots and travels were not in History, though they are the most expensive to redo."""
    plot = generated(app, "plot", {"prompt": "a circle", "x": "seed: 5, 6", "y": "steps: 1, 2", "z": ""}, "plot")
    history = app.history.remember("plot")(plot, [], None, "", None)["history"]
    travel = generated(app, "travel", {"prompt": "a circle", "seeds": "3, 7", "frames": 3, "curve": "linear"},
                       "travel")
    history = app.history.remember("travel")(travel, history, None, "", None)["history"]
    assert [entry["kind"] for entry in history] == ["plot", "travel"]
    labels = [label for label, _ in app.history.show(history, None)["timeline"].choices]
    assert "plot (4) · 'a circle'" in labels[1] and "travel (3) · 'a circle'" in labels[0]
    update = app.history.restore(history, str(history[0]["id"]), None)
    assert captions(update["history_view"]) == ["Seed 5 · Steps 1", "Seed 6 · Steps 1", "Seed 5 · Steps 2",
                                                "Seed 6 · Steps 2"]
    assert shown_pixels(update["history_view"]) == [record["fingerprint"] for record in plot]
    frames = captions(app.history.restore(history, str(history[1]["id"]), None)["history_view"])
    assert len(set(frames)) == 3, frames


def test_variations_name_the_entry_their_anchor_was_picked_in(app):
    """Issue 33: variations of an anchor picked in #1 say "from #1", not the newest variation set of that anchor."""
    history, grid, _ = explored(app)  # #1 a grid, #2 variations of its second cell
    anchor = grid[1]
    again = generated(app, "vary", {**anchor["recipe"], "variations": ", green"}, "vary")
    history = app.history.remember("vary")(again, history, anchor["recipe"], anchor["fingerprint"], None)["history"]
    assert history[-1]["parent"] == history[0]["id"] == 1  # not #2, which made the anchor again as its base cell
    assert app.history.show(history, None)["timeline"].choices[0][0].endswith("← anchor seed 4 from #1")


def test_history_exports_never_push_anyones_pngs_out(app):
    # Issue 34: every page load with a new history wrote an export into the PNG folder, so 1,030 loads of ~1 KB
    # evicted every visitor's PNGs. Scaled down: the PNG folder holds one file more than it has now.
    history, grid, _ = explored(app)
    pngs = sorted(app.pngs.folder.glob("*.png"))
    app.pngs.max_files = len(list(app.pngs.folder.iterdir())) + 1
    for made_at in range(10):  # ten different histories: ten export files
        changed = [{**entry, "made_at": f"2026-01-01 00:00:{made_at:02d} UTC"} for entry in history]
        app.history.show(changed, None)
    assert pngs and all(path.exists() for path in pngs)
    assert 10 <= len(list(app.exports.folder.glob("*.json"))) <= app.exports.max_files  # a bounded folder of their own


def test_previews_a_finished_cell_and_a_finished_grid_read_apart_in_the_timeline():
    """Preview, Finish and Finish all each add a grid to History: their lines say which is which."""
    from seedlab import Recipe
    from seedlab.engine.previews import as_preview
    from webui.entries import Cell, add_entry, label

    recipes = [Recipe(prompt="a red circle", seed=seed) for seed in range(3)]
    def cells(previews: int) -> list[Cell]:
        return [Cell(as_preview(recipe) if index < previews else recipe, f"{index:064x}", None)
                for index, recipe in enumerate(recipes)]
    entries: list = []
    for previews in (3, 2, 0):
        entries = add_entry(entries, "grid", cells(previews))
    lines = [label(entry, set()) for entry in entries]
    assert lines[0].split(" · ")[2].startswith("previews of 3: seeds 0, 1, 2")
    assert lines[1].split(" · ")[2].startswith("grid of 3, 1 finished, 2 still previews: seeds 0, 1, 2")
    assert lines[2].split(" · ")[2].startswith("grid of 3: seeds 0, 1, 2")



def pixels_of(url: str) -> np.ndarray:
    import base64
    import io

    assert url.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as image:
        assert image.format == "PNG"
        return np.asarray(image.convert("RGB"))


def test_an_entry_keeps_a_small_thumbnail_of_its_first_image_through_the_store_and_an_export(app, reference_model,
                                                                                              tmp_path):
    history, grid, vary = explored(app)
    for entry, first in zip(history, (grid[0], vary[0])):
        shown = pixels_of(entry["thumbnail"])
        assert max(shown.shape[:2]) <= 64
        with Image.open(app.record.kept(Cell.from_json(first).recipe, first["fingerprint"])) as image:
            expected = image.convert("RGB")
        expected.thumbnail((64, 64))
        assert np.array_equal(shown, np.asarray(expected))  # the first cell's image, made small
    assert history[0]["thumbnail"] != history[1]["thumbnail"]
    # Kept in the browser's store and in an export, as they were.
    assert [entry.thumbnail for entry in read_history(stored_text(history))[0]] == [e["thumbnail"] for e in history]
    exported = app.history.show(history, None)["history_export"].value["path"]
    other = new_app(reference_model, tmp_path / "elsewhere")
    imported = other.history.import_(exported, [], None)["history"]
    assert [entry["thumbnail"] for entry in imported] == [entry["thumbnail"] for entry in history]


def test_the_thumbnails_are_shown_newest_first_with_a_grey_square_where_none_was_kept(app, reference_model, tmp_path):
    history, _, _ = explored(app)
    other = new_app(reference_model, tmp_path / "elsewhere")  # it keeps none of these images
    history = other.history.remember("grid")(history[0]["cells"], history, None, "", None)["history"]
    assert history[-1]["thumbnail"] is None and all(entry["thumbnail"] for entry in history[:-1])
    pictures = other.history.show(history, None)["history_thumbs"]
    assert captions(pictures) == ["#3 · grid of 2", "#2 · variations (4)", "#1 · grid of 2"]
    shown = [np.asarray(Image.open(item["image"]["path"]).convert("RGB")) for item in pictures.value]
    assert np.array_equal(shown[0], np.full((64, 64, 3), 150, np.uint8))  # the grey square
    assert [np.array_equal(picture, pixels_of(entry["thumbnail"])) for picture, entry in
            zip(shown[1:], history[1::-1])] == [True, True]


def test_a_click_on_a_thumbnail_restores_its_entry_as_its_timeline_line_does(app):
    history, _, _ = explored(app)
    update = app.history.restore_picture(history, SimpleNamespace(index=1), None)  # the second: the older grid
    line = app.history.restore(history, "1", None)
    assert update["timeline"].value == "1" and update["seeds"] == line["seeds"] == "3, 4"
    assert shown_pixels(update["history_view"]) == shown_pixels(line["history_view"])
    assert update["history_note"].value == line["history_note"].value
    gone = app.history.restore_picture(history, SimpleNamespace(index=5), None)
    assert gone["history_note"].value == "That entry is no longer in the history."


def test_a_tampered_thumbnail_is_dropped_and_its_entry_kept(app, tmp_path):
    import base64
    import io

    history, _, _ = explored(app)

    def png(size: tuple[int, int]) -> str:
        buffer = io.BytesIO()
        Image.new("RGB", size, (9, 9, 9)).save(buffer, format="PNG")
        return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()

    jpeg = io.BytesIO()
    Image.new("RGB", (8, 8)).save(jpeg, format="JPEG")
    good = history[0]["thumbnail"]
    hostile = {
        "another prefix": good.replace("data:image/png", "data:image/svg+xml"),
        "too long": good + "A" * 12_000,
        "not base64": "data:image/png;base64,<script>alert(1)</script>",
        "not a PNG": "data:image/png;base64," + base64.b64encode(jpeg.getvalue()).decode(),
        "a PNG cut short": good[:len(good) // 2 // 4 * 4],
        "500 x 500": png((500, 500)),
        "65 x 1": png((65, 1)),
        "a number": 5,
        "a list": [good],
    }
    assert len(png((500, 500))) <= 12_000  # its size is what gives it away
    for name, thumbnail in hostile.items():
        tampered = [{**history[0], "thumbnail": thumbnail}, history[1]]
        entries, dropped = read_history(stored_text(tampered))
        assert dropped == 0 and [entry.id for entry in entries] == [1, 2], name
        assert entries[0].thumbnail is None and entries[1].thumbnail == history[1]["thumbnail"], name
        path = tmp_path / "tampered.json"
        path.write_text(json.dumps({"format": FORMAT, "version": 1, "entries": tampered}))
        imported = app.history.import_(str(path), [], None)["history"]
        assert [entry["thumbnail"] for entry in imported] == [None, history[1]["thumbnail"]], name
    assert read_history([{**history[0], "thumbnail": png((64, 48))}])[0][0].thumbnail == png((64, 48))
