"""On a phone (390x844), in a real browser: what a run or a link makes is brought into view once the page settles."""

import pytest
from gradio_client import Client

from tests.browser.pages import CHROMIUM, generate_grid, wait_for_value
from tests.browser.settle import open_settled, settle

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")
PHONE = (390, 844)


def in_view(page, selector: str) -> bool:
    """Whether the element's top part is on the screen (its top above the screen's bottom, its bottom below 0)."""
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["y"] < PHONE[1] - 40 and box["y"] + box["height"] > 40


def test_the_grid_is_in_view_after_generate_on_a_phone(browser, app_server):
    page = open_settled(browser, app_server.url, *PHONE)
    assert not in_view(page, "#grid"), "the grid starts below the controls on a phone"
    generate_grid(page, "1, 2", 2, 2, prompt="a red circle", settled=True)
    assert in_view(page, "#grid")


def test_a_link_opens_with_its_verdict_in_view_on_a_phone(browser, app_server):
    _, results = Client(app_server.url, verbose=False).predict(prompt="a red circle", seeds="12",
                                                               num_inference_steps=2, api_name="/grid")
    page = open_settled(browser, results[0]["link"], *PHONE)
    wait_for_value(page, "verdict", "Exact")
    settle(page)
    assert in_view(page, "#verdict")
    assert page.locator("#original").first.is_hidden(), "no dropped image: no empty Original frame above the image"
    assert in_view(page, "#reproduced")
