"""History with lineage in a real browser: kept across a reload and a server restart, restored, exported, imported."""

import json
import os

import pytest

from seedlab import fingerprint
from tests.browser.pages import CHROMIUM, SCREENSHOT, fresh_page, generate_grid, wait_for_images, wait_for_value

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


def timeline(page) -> list[str]:
    return page.locator("#timeline label").all_inner_texts()


def open_history(page) -> None:
    if not page.locator("#timeline").is_visible():
        page.locator("#history-panel").get_by_text("History").first.click()
    page.locator("#timeline").wait_for()


def wait_for_entries(page, count: int) -> list[str]:
    page.wait_for_function("count => document.querySelectorAll('#timeline label').length === count", arg=count)
    return timeline(page)


def load(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function("document.body.dataset.seedlab === 'ready'")


def test_history_survives_a_reload_and_a_restart_and_restores_without_regenerating(browser, app_server, tmp_path):
    page = fresh_page(browser, app_server.url)
    load(page, app_server.url)
    page.locator("#prompt textarea").fill("a red circle")
    page.locator("#seeds textarea").fill("3, 4")
    page.locator("#num-inference-steps input").fill("2" if os.environ.get("SEEDLAB_SCREENSHOT") != "1" else "20")
    page.locator("#generate").click()
    wait_for_images(page, "grid", 2)
    page.locator("#grid .thumbnail-item").nth(1).click()
    wait_for_value(page, "anchor", "Anchor seed: 4")
    grid_prints = [fingerprint_of(page, src) for src in
                   page.locator("#grid .thumbnail-item img").evaluate_all("images => images.map(i => i.src)")]
    page.locator("#variations-box textarea").fill(", on a black background")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 2)
    open_history(page)
    labels = wait_for_entries(page, 2)
    assert labels[0].startswith("#2 ·") and "variations (2)" in labels[0] and labels[0].endswith("from #1")
    assert "grid of 2: seeds 3, 4 · 'a red circle'" in labels[1]
    if os.environ.get("SEEDLAB_SCREENSHOT") == "1":  # the README's picture: grid, anchor, variations, selected, history
        page.locator("#variations .thumbnail-item").nth(1).click()
        wait_for_value(page, "cell-title", "prompt 'a red circle, on a black background'")
        page.wait_for_timeout(500)
        SCREENSHOT.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)

    # A reload keeps it (the browser's storage), and a click shows the grid again from the server's record.
    load(page, app_server.url)
    open_history(page)
    assert wait_for_entries(page, 2) == labels
    page.locator("#seeds textarea").fill("0-7")
    page.locator("#timeline label").nth(1).click()
    wait_for_images(page, "history-view", 2)
    note = wait_for_value(page, "history-note", "none regenerated")
    assert note.startswith("#1, grid made ") and "2 of 2 images shown from this server's record" in note
    assert page.locator("#seeds textarea").input_value() == "3, 4"  # the controls hold its recipe again
    assert page.locator("#generate").is_enabled()  # nothing ran
    shown = [fingerprint_of(page, src) for src in
             page.locator("#history-view .thumbnail-item img").evaluate_all("images => images.map(i => i.src)")]

    # Its cells act like any other: the selected-image panel, with the same fingerprint.
    page.locator("#history-view .thumbnail-item").nth(0).click()
    wait_for_value(page, "cell-title", "Seed 3 · prompt 'a red circle'")

    # Export: every entry with recipes, fingerprints and links.
    with page.expect_download() as download:
        page.locator("#history-export").click()
    exported = tmp_path / "history.json"
    download.value.save_as(exported)
    data = json.loads(exported.read_text())
    assert [entry["kind"] for entry in data["entries"]] == ["grid", "variations"]
    assert [cell["fingerprint"] for cell in data["entries"][0]["cells"]] == shown
    assert data["entries"][1]["parent"] == data["entries"][0]["id"]
    assert shown == grid_prints

    # After a restart the history is still in the browser; the images are gone from the server and regenerate exactly.
    app_server.restart()
    load(page, app_server.url)
    open_history(page)
    assert wait_for_entries(page, 2) == labels
    page.locator("#timeline label").nth(1).click()
    wait_for_value(page, "history-note", "2 are no longer kept here")
    page.locator("#history-regenerate").click()
    wait_for_value(page, "history-note", "Regenerated 2 of 2 images: 2 identical to the history.")
    wait_for_images(page, "history-view", 2)
    assert [fingerprint_of(page, src) for src in page.locator("#history-view .thumbnail-item img").evaluate_all(
        "images => images.map(i => i.src)")] == grid_prints


def choose(page, path) -> None:
    """Pick a file with the import button, as a user does."""
    with page.expect_file_chooser() as chooser:
        page.locator("#history-import").click()
    chooser.value.set_files(str(path))


def fingerprint_of(page, src: str) -> str:
    import io

    import numpy as np
    from PIL import Image

    body = page.request.get(src).body()
    return fingerprint(np.asarray(Image.open(io.BytesIO(body)).convert("RGB")))


def test_an_import_is_checked_and_shown_as_text(browser, app_server, tmp_path):
    page = fresh_page(browser, app_server.url)
    page.set_viewport_size({"width": 390, "height": 844})
    load(page, app_server.url)
    page.locator("#prompt textarea").fill("<img src=x onerror=\"document.body.dataset.hacked=1\">")
    generate_grid(page, "5", 1, 1)
    open_history(page)
    wait_for_entries(page, 1)
    with page.expect_download() as download:
        page.locator("#history-export").click()
    exported = tmp_path / "mine.json"
    download.value.save_as(exported)

    # Not a history: a message, and the history is unchanged.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "seedlab-history", "version": 1, "entries": [{"kind": "<b>x</b>"}]}))
    choose(page, bad)
    wait_for_value(page, "history-note", "Imported 0 entries")
    assert len(timeline(page)) == 1

    # Its own export imported again: nothing is added twice, and the note says so.
    choose(page, exported)
    wait_for_value(page, "history-note", "1 entries were already in the history and were not added again.")
    assert len(timeline(page)) == 1
    # Into another browser's history it adds its entry; the prompt's markup is text, never an element.
    page.context.close()
    page = fresh_page(browser, app_server.url)
    page.set_viewport_size({"width": 390, "height": 844})
    load(page, app_server.url)
    generate_grid(page, "6", 1, 1)
    open_history(page)
    wait_for_entries(page, 1)
    choose(page, exported)
    wait_for_value(page, "history-note", "Imported 1 entries (1 images).")
    labels = wait_for_entries(page, 2)
    assert sum("<img src=x" in label for label in labels) == 1  # the imported prompt, shown as its text
    assert page.locator("#timeline img").count() == 0
    assert page.evaluate("document.body.dataset.hacked") is None
    page.locator("#timeline label").nth(0).click()
    wait_for_images(page, "history-view", 1)
    assert page.locator("#history-view").bounding_box()["width"] <= 390


def test_a_plot_made_on_the_page_is_kept_in_history_and_restores_its_cells(browser, app_server):
    """Issue 33: plots (and travels, the same way) were not in History, though they are the most expensive to redo."""
    from tests.browser.pages import plot_on_page
    from tests.browser.settle import settle

    page = plot_on_page(browser, app_server.url, "seed: 41-42", "", 2)
    open_history(page)
    newest = timeline(page)[0]
    assert "plot (2) · 'a red circle'" in newest, newest
    page.locator("#timeline label").first.click()
    wait_for_images(page, "history-view", 2)
    settle(page)
    captions = page.locator("#history-view .caption-label").all_inner_texts()
    assert captions == ["Seed 41", "Seed 42"], captions
    page.context.close()


def pictures(page) -> list[str]:
    return page.locator("#history-thumbs .caption-label").all_inner_texts()


def test_the_history_shows_a_thumbnail_per_entry_newest_first_and_a_click_on_one_restores_it(browser, app_server):
    """Issue 54: entries are recognised by picture; a thumbnail's click does what its timeline line's click does."""
    from tests.browser.settle import open_settled, settle

    page = open_settled(browser, app_server.url)
    page.locator("#prompt textarea").fill("a red circle")
    page.locator("#num-inference-steps input").fill("2")
    made = []
    for seeds in ("3", "8, 9"):
        page.locator("#seeds textarea").fill(seeds)
        page.locator("#generate").click()
        wait_for_images(page, "grid", len(seeds.split(",")))
        settle(page)
        made.append(page.locator("#grid .thumbnail-item img").first.evaluate("image => image.src"))
    open_history(page)
    wait_for_images(page, "history-thumbs", 2)
    settle(page)
    assert pictures(page) == ["#2 · grid of 2", "#1 · grid of 1"]
    shown = page.locator("#history-thumbs .thumbnail-item img").evaluate_all("images => images.map(i => i.src)")
    # Each is its entry's first image, made small (at most 64 px a side): the newest first.
    for src, first in zip(shown, made[::-1]):
        small, full = image_of(page, src), image_of(page, first)
        assert max(small.size) <= 64
        full.thumbnail((64, 64))
        assert small.tobytes() == full.tobytes()

    # The second (older) thumbnail restores its entry, as its line of the timeline does, and marks that line.
    page.locator("#seeds textarea").fill("0-7")
    page.locator("#history-thumbs .thumbnail-item").nth(1).click()
    wait_for_images(page, "history-view", 1)
    settle(page)
    note = wait_for_value(page, "history-note", "none regenerated")
    assert note.startswith("#1, grid made ") and "1 of 1 images shown from this server's record" in note
    assert page.locator("#seeds textarea").input_value() == "3"
    assert page.locator("#timeline input:checked").evaluate("box => box.value") == "1"

    # Kept in the browser: after a reload the thumbnails are there again.
    page.reload()
    page.wait_for_function("document.body.dataset.seedlab === 'ready'")
    open_history(page)
    wait_for_images(page, "history-thumbs", 2)
    settle(page)
    assert pictures(page) == ["#2 · grid of 2", "#1 · grid of 1"]
    again = page.locator("#history-thumbs .thumbnail-item img").evaluate_all("images => images.map(i => i.src)")
    assert [image_of(page, src).tobytes() for src in again] == [image_of(page, src).tobytes() for src in shown]
    page.context.close()


def image_of(page, src: str):
    import io

    from PIL import Image

    return Image.open(io.BytesIO(page.request.get(src).body())).convert("RGB")
