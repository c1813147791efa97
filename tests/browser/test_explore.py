"""Exploration a person can trust, in a real browser: the anchor is a recipe, selections follow the images."""

import io

import pytest

from seedlab import read_png
from tests.browser.pages import CHROMIUM, fresh_page, thumbnails, wait_for_images, wait_for_value
from tests.browser.settle import value

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


def served_png(page, image) -> bytes:
    response = page.request.get(image.evaluate("img => img.src"))
    assert response.ok
    return response.body()


def selected_cells(page, gallery: str) -> int:
    return page.locator(f"#{gallery} .thumbnail-item.selected").count()


def test_the_anchor_is_the_recipe_the_user_clicked_and_selections_follow_the_images(browser, app_server):
    page = fresh_page(browser, app_server.url)
    page.goto(app_server.url)
    page.locator("#prompt textarea").fill("a red circle")
    page.locator("#seeds textarea").fill("1, 2")
    page.locator("#generate").click()
    wait_for_images(page, "grid", 2)
    page.locator("#grid .thumbnail-item").nth(1).click()
    wait_for_value(page, "anchor", "Anchor seed: 2")
    anchor_fingerprint = value(page, "anchor-fingerprint")

    page.locator("#variations-box textarea").fill(", on a blue background")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 2)
    assert not page.locator("#vary-note").is_visible()  # nothing was edited: nothing to explain
    page.locator("#variations .thumbnail-item").nth(1).click()
    old_link = wait_for_value(page, "variation-link", "http")
    assert selected_cells(page, "variations") >= 1

    # Bug 3: the prompt box is edited after picking the anchor; the variations still vary the anchor's recipe.
    page.locator("#prompt textarea").fill("a yellow triangle")
    page.locator("#vary").click()
    # Bug 1: the old variation's link and selection go at once, before the new images arrive.
    page.wait_for_function("document.querySelector('#variation-link textarea').value === ''")
    note = wait_for_value(page, "vary-note", "Variations start from the anchor's recipe")
    assert note.startswith("Variations start from the anchor's recipe (prompt 'a red circle', seed 2)"), note
    assert "the prompt box now says 'a yellow triangle'" in note
    wait_for_images(page, "variations", 2)
    assert selected_cells(page, "variations") == 0 and value(page, "variation-link") == ""
    base = read_png(io.BytesIO(served_png(page, thumbnails(page, "variations").nth(0))))
    assert (base[0].prompt, base[0].seed, base[1]) == ("a red circle", 2, anchor_fingerprint)  # the anchor itself
    page.locator("#variations .thumbnail-item").nth(1).click()
    new_link = wait_for_value(page, "variation-link", "http")
    assert new_link == old_link  # the same recipe again: the same image, the same link

    # Bug 2: a new grid clears the selection and the anchor panel.
    page.locator("#seeds textarea").fill("10-11")
    page.locator("#generate").click()
    wait_for_value(page, "anchor", "none yet")
    page.wait_for_function("document.querySelector('#grid .thumbnail-item .caption-label')?.innerText === 'seed 10'")
    wait_for_images(page, "grid", 2)
    assert page.locator("#grid .thumbnail-item .caption-label").all_inner_texts() == ["seed 10", "seed 11"]
    assert selected_cells(page, "grid") == 0
    assert value(page, "grid-link") == "" and value(page, "anchor-fingerprint") == ""
    page.locator("#vary").click()  # no anchor now: a message, not the old anchor's seed
    page.get_by_text("Pick an anchor first").first.wait_for()
    page.context.close()
