"""The loop on one screen (issue 54): after a click on a cell, the grid, the picked image with its actions and the
variations box are in view together on a laptop (1400x900), each record shown once there, and a new grid empties the
Selected image; on a phone, making an image the anchor brings the anchor and its variations box into view, and Stop
is on screen while a run goes on."""

import pytest

from tests.browser.pages import CHROMIUM, generate_grid, wait_for_images, wait_for_value
from tests.browser.settle import open_settled, settle, value
from webui.cells import NO_CELL

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


def on_screen(page, selector: str) -> bool:
    """Whether the element is wholly on the screen (nothing of it above the top or under the bottom)."""
    box = page.locator(selector).first.bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["height"] > 0 and box["y"] >= 0 and box["y"] + box["height"] <= height


def grid_of_four(page) -> None:
    generate_grid(page, "0-3", 2, 4, prompt="a red star on a blue background", settled=True)


def test_grid_picked_image_and_variations_box_are_in_view_together_on_a_laptop(browser, app_server):
    page = open_settled(browser, app_server.url, 1400, 900)
    grid_of_four(page)
    page.evaluate("scrollTo(0, 0)")  # where a visitor is: filling the steps box (further down) scrolled the page
    page.locator("#grid .thumbnail-item").nth(2).click()
    wait_for_value(page, "cell-title", "Seed 2")
    settle(page)
    for selector in ("#grid", "#cell-image", "#make-anchor", "#anchor", "#variations-box", "#vary"):
        assert on_screen(page, selector), selector
    # One recipe and one link on the screen: the Selected image's (the anchor's own are further down).
    visible = [selector for selector in ("#cell-recipe", "#anchor-recipe", "#cell-link", "#grid-link")
               if on_screen(page, selector)]
    assert "#anchor-recipe" not in visible and "#grid-link" not in visible, visible

    # A new grid: the Selected image no longer shows the previous grid's cell.
    page.locator("#seeds textarea").fill("10, 11")
    page.locator("#generate").click()
    wait_for_images(page, "grid", 2)
    settle(page)
    assert value(page, "cell-title") == NO_CELL and page.locator("#make-anchor").is_disabled()


def test_on_a_phone_make_anchor_shows_the_anchor_over_its_variations_and_stop_stays_at_hand(browser, app_server):
    page = open_settled(browser, app_server.url, 390, 844)
    grid_of_four(page)
    page.locator("#grid .thumbnail-item").nth(1).click()
    wait_for_value(page, "cell-title", "Seed 1")
    settle(page)
    page.locator("#make-anchor").click()
    wait_for_value(page, "anchor", "Anchor seed: 1")
    settle(page)
    assert on_screen(page, "#anchor") and on_screen(page, "#variations-box"), "the next step is where the page went"

    page.locator("#variations-box textarea").fill(", highly realistic\n, artsy\n, small\n, large")
    page.locator("#num-inference-steps input").fill("50")  # the server's most: long enough to look at Stop
    page.locator("#vary").click()
    page.wait_for_function("!document.querySelector('#stop').disabled")
    page.evaluate("document.querySelector('#variations').scrollIntoView()")
    # Looked at in one step while the run goes on (it may end at any moment under load).
    running, seen = page.evaluate("() => { const stop = document.querySelector('#stop');"
                                  " const box = stop.getBoundingClientRect();"
                                  " return [!stop.disabled, box.top >= 0 && box.bottom <= innerHeight]; }")
    assert seen or not running, "a run's Stop is on screen wherever the page is"
    assert running, "the run ended before Stop could be looked at"
    page.locator("#stop").click()
    settle(page)
    assert page.locator("#stop").is_disabled()


def test_grid_cells_are_named_by_their_seed_and_show_the_keyboard_focus(browser, app_server):
    page = open_settled(browser, app_server.url, 1400, 900)
    grid_of_four(page)
    names = [page.locator("#grid .thumbnail-item").nth(i).get_attribute("aria-label") for i in range(4)]
    assert [name.split(" (")[0] for name in names] == ["seed 0", "seed 1", "seed 2", "seed 3"], names
    page.locator("#grid .thumbnail-item").first.focus()
    page.keyboard.press("Tab")
    focused = page.evaluate("() => { const e = document.activeElement; return [e.getAttribute('aria-label'),"
                            " getComputedStyle(e).outlineStyle, getComputedStyle(e).outlineWidth]; }")
    assert focused[0].startswith("seed 1") and focused[1] == "solid" and focused[2] == "3px", focused
