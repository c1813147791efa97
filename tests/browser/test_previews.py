"""Previews on the page, in a real browser: Preview beside Generate, Finish on a cell and Finish all, each finished
cell in its preview's place and equal to the same seed's cell of a normal grid."""

import re

import pytest

from tests.browser.pages import CHROMIUM, wait_for_images, wait_for_value
from tests.browser.settle import open_settled, settle, value

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")
SEEDS = [5, 6, 7]


def captions(page) -> list[str]:
    return page.locator("#grid .thumbnail-item .caption-label").all_inner_texts()


def fingerprints(page) -> list[str]:
    """Each grid cell's fingerprint (16 hex digits), read from the Selected image panel after a click on it."""
    prints = []
    for index in range(len(SEEDS)):
        page.locator("#grid .thumbnail-item").nth(index).click()
        title = wait_for_value(page, "cell-title", f"Seed {SEEDS[index]}")
        prints.append(re.search(r"fingerprint ([0-9a-f]{16})", title).group(1))
    return prints


def test_preview_then_finish_gives_the_normal_grid_in_place(browser, app_server):
    page = open_settled(browser, app_server.url, 1400, 900)
    page.locator("#prompt textarea").fill("a red circle")
    page.locator("#seeds textarea").fill(", ".join(map(str, SEEDS)))
    page.locator("#num-inference-steps input").fill("8")
    page.locator("#generate").click()
    wait_for_images(page, "grid", len(SEEDS))
    settle(page)
    full = fingerprints(page)
    assert captions(page) == [f"seed {seed}" for seed in SEEDS]
    assert not page.locator("#finish-all").is_visible(), "a grid without previews has nothing to finish"

    page.locator("#preview").click()
    page.wait_for_function("document.querySelectorAll('#grid .thumbnail-item .caption-label').length === 3 && "
                           "[...document.querySelectorAll('#grid .caption-label')].every(c => "
                           "c.textContent.includes('preview'))")
    settle(page)
    assert captions(page) == [f"seed {seed} · preview" for seed in SEEDS]
    previews = fingerprints(page)
    assert not set(previews) & set(full), "previews are not the full images"
    assert "preview (5 of 8 steps" in value(page, "cell-title")
    assert "preview=5" in value(page, "grid-link")
    assert page.locator("#finish-all").is_visible()

    # Finish on the selected cell (the last one clicked): only that cell becomes its full image, in its place.
    assert page.locator("#finish").is_enabled()
    page.locator("#finish").click()
    page.wait_for_function("!document.querySelectorAll('#grid .caption-label')[2].textContent.includes('preview')")
    settle(page)
    assert captions(page) == ["seed 5 · preview", "seed 6 · preview", "seed 7"]
    assert f"fingerprint {full[2]}" in value(page, "cell-title")
    assert not page.locator("#finish").is_enabled(), "a full image has nothing to finish"

    page.locator("#finish-all").click()
    page.wait_for_function("[...document.querySelectorAll('#grid .caption-label')].every(c => "
                           "!c.textContent.includes('preview'))")
    settle(page)
    assert captions(page) == [f"seed {seed}" for seed in SEEDS]
    assert fingerprints(page) == full
    assert not page.locator("#finish-all").is_visible(), "every preview is finished"

    # History holds the grid, the previews and each finishing, newest first.
    page.locator("#history-panel").get_by_text("History").first.click()
    page.wait_for_function("document.querySelectorAll('#timeline label').length >= 4")
    entries = page.locator("#timeline label").all_inner_texts()
    assert len(entries) == 4, entries
