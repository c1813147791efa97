"""A tab left open across a server restart (issue 54): the anchor and the selected image the page shows are the
page's own, so Vary and Make anchor go on from them on the new server instead of answering "Pick an anchor first"
(a gr.State lived on the server and was gone)."""

import pytest

from tests.browser.pages import CHROMIUM, generate_grid, wait_for_images, wait_for_value
from tests.browser.settle import open_settled, settle, value

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


def test_vary_and_make_anchor_go_on_after_a_server_restart(browser, app_server):
    page = open_settled(browser, app_server.url, 1400, 900)
    generate_grid(page, "0-1", 2, 2, prompt="a red star on a blue background", settled=True)
    page.locator("#grid .thumbnail-item").nth(1).click()
    wait_for_value(page, "cell-title", "Seed 1")
    settle(page)
    page.locator("#make-anchor").click()
    settle(page)

    app_server.restart()  # nothing the first server held survives
    page.locator("#variations-box textarea").fill(", small\n, large")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 3)
    settle(page)
    assert page.locator(".toast-body").count() == 0  # no "Pick an anchor first"
    # The variations are the anchor's seed with the words appended.
    page.locator("#variations .thumbnail-item").nth(2).click()
    wait_for_value(page, "cell-title", "Seed 1")
    settle(page)
    assert "large" in value(page, "cell-title") or "large" in page.locator("#cell-recipe").inner_text()

    # Make anchor works on the cell the page selected before another restart.
    app_server.restart()
    page.locator("#make-anchor").click()
    settle(page)
    assert page.locator(".toast-body").count() == 0
    anchor = value(page, "anchor")
    assert anchor.startswith("Anchor seed: 1") and "large" in anchor, anchor
    page.context.close()
