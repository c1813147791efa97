"""What the web path costs a grid, in a real browser: nothing between the click on Generate and the run's start.

Every request before the run is a round trip and a page update that the images wait for (and, on a machine
the browser shares with the app, CPU they need); bench/bench_page.py measures the whole of it.
"""

import pytest

from tests.browser.pages import CHROMIUM, generate_grid, thumbnails, wait_for_images
from tests.browser.settle import TIMEOUT_MS, TRACKER, ready, settle, value
from webui.handlers import NO_ANCHOR

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")

# Every request the page makes to the app, in order: its path after /gradio_api/ (what Gradio's client asks for).
REQUESTS = """
(() => {
    window.__requests = [];
    const fetch = window.fetch;
    window.fetch = function (resource, options) {
        const url = String(resource && resource.url ? resource.url : resource);
        if (url.includes("/gradio_api/") && !url.includes("/heartbeat")) {
            window.__requests.push(url.split("/gradio_api/")[1].split("?")[0]);
        }
        return fetch.call(this, resource, options);
    };
})();
"""


def test_generate_starts_its_run_with_no_round_trip_first_and_clears_the_anchor_in_it(browser, app_server):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(TRACKER)
    context.add_init_script(REQUESTS)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(app_server.url)
    page.wait_for_function("document.body.dataset.seedlab === 'ready'")
    generate_grid(page, "0-1", 1, 2, settled=True)
    thumbnails(page, "grid").nth(1).click()  # an anchor, which the next grid must clear
    settle(page)
    assert value(page, "anchor") != NO_ANCHOR and value(page, "grid-link")

    page.evaluate("() => { window.__requests = []; }")
    page.locator("#seeds textarea").fill("2-4")
    settle(page)
    page.evaluate("() => { window.__requests = []; }")
    page.locator("#generate").click()
    page.wait_for_function("document.querySelector('#generate').disabled")  # busy at once, set by the page itself
    settle(page)
    requests = page.evaluate("() => window.__requests")
    # The busy state and the cleared anchor cost a request each before the run joined the queue (~0.15 s each).
    assert requests[0] == "queue/join", requests
    wait_for_images(page, "grid", 3)
    assert value(page, "anchor") == NO_ANCHOR and value(page, "grid-link") == ""  # cleared with the run's first update
    assert page.locator("#grid .thumbnail-item.selected").count() == 0  # and the selection with it
    assert ready(page)  # the page is ready again once the run is done
    context.close()
