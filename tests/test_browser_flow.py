"""Every user action ends in success, a refusal or a stop, and the page says so after it has settled.

These tests look at the page only once every chained event has finished (tests/settle.py): a verdict that
shows for 0.1 s and is then erased, or buttons left disabled by a refusal, fail here.
"""

import re

import pytest

from tests.settle import open_settled, ready, settle, value
from tests.test_browser import CHROMIUM, browser, thumbnails, wait_for_images  # noqa: F401 - browser is a fixture

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


@pytest.fixture(scope="module")
def made(app_server):
    """A cell this server made (through the public /grid), and its link."""
    from gradio_client import Client

    _, results = Client(app_server.url, verbose=False).predict(prompt="a landing", seeds="12", num_inference_steps=2,
                                                               api_name="/grid")
    return results[0]


def image_shown(page, elem_id: str) -> bool:
    return page.evaluate("id => { const img = document.querySelector(`#${id} img`);"
                         " return img !== null && img.complete && img.naturalWidth > 0; }", elem_id)


def in_view(page, elem_id: str) -> bool:
    box = page.locator(f"#{elem_id}").bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] >= 0 and box["y"] + min(box["height"], 120) <= height


def test_a_link_this_server_made_shows_its_verdict_and_image_and_they_stay(browser, made):  # noqa: F811
    page = open_settled(browser, made["link"])
    verdict = value(page, "verdict")
    assert verdict.startswith("Served from this server's record of the image it made at"), verdict
    assert "Exact match" in verdict
    assert image_shown(page, "reproduced")
    assert page.locator("#reverify").inner_text().strip() == "Re-verify by regenerating"
    assert page.locator("#reverify").is_enabled()
    assert in_view(page, "verdict") and in_view(page, "reproduced")  # where the visitor looks
    assert ready(page)
    page.wait_for_timeout(2000)  # and still there later
    assert value(page, "verdict") == verdict and image_shown(page, "reproduced")
    page.context.close()


def test_a_tampered_link_says_it_differs_and_keeps_saying_so(browser, made):  # noqa: F811
    link = re.sub(r"fp=[0-9a-f]{64}", "fp=" + "0" * 64, made["link"])
    page = open_settled(browser, link)
    verdict = value(page, "verdict")
    assert "Differs from the original" in verdict, verdict
    assert image_shown(page, "reproduced") and ready(page)
    page.context.close()


def test_a_bad_link_keeps_its_message_and_leaves_the_page_ready(browser, app_server):  # noqa: F811
    page = open_settled(browser, f"{app_server.url}/?v=1&prompt=a+bad+link&seed=-5&steps=abc&fp={'0' * 64}")
    message = value(page, "verdict")
    assert message.startswith("This link cannot be opened."), message
    assert "seed must be a whole number from 0 to" in message and "steps (num_inference_steps)" in message
    assert in_view(page, "verdict") and ready(page)
    page.context.close()


def grid_of_two(page):
    page.locator("#seeds textarea").fill("5-6")
    page.locator("#num-inference-steps input").fill("1")
    page.locator("#generate").click()
    wait_for_images(page, "grid", 2)
    settle(page)


def refused(page, message: str) -> None:
    """The refusal is in words, the page is ready again, and the grid is what it was."""
    page.get_by_text(message).first.wait_for()
    settle(page)
    assert ready(page), "a refused request left the page busy"
    assert thumbnails(page, "grid").count() == 2


def test_refused_requests_leave_the_page_ready_and_everything_else_as_it_was(browser, app_server):  # noqa: F811
    page = open_settled(browser, app_server.url)
    grid_of_two(page)
    # Variations with no anchor: nothing was clicked since the grid.
    page.locator("#vary").click()
    refused(page, "Pick an anchor first")
    # A nudge strength out of range.
    page.locator("#grid .thumbnail-item").nth(0).click()
    settle(page)
    page.get_by_text("Nudge the anchor (variation seeds)").click()
    page.locator("#strip-strength input[type=number]").fill("1.5")
    page.locator("#make-strip").click()
    refused(page, "1.5")
    # And the page still works: a grid runs and ends ready.
    page.locator("#generate").click()
    wait_for_images(page, "grid", 2)
    settle(page)
    assert ready(page)
    page.context.close()


def test_variations_right_after_a_new_grid_are_refused_and_the_page_stays_ready(browser, app_server):  # noqa: F811
    page = open_settled(browser, app_server.url)
    grid_of_two(page)
    page.locator("#grid .thumbnail-item").nth(1).click()
    settle(page)
    page.locator("#generate").click()  # a new grid clears the anchor
    wait_for_images(page, "grid", 2)
    page.locator("#vary").click()
    refused(page, "Pick an anchor first")
    page.context.close()
