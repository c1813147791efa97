"""The Scheduler menu speaks A1111's and ComfyUI's words, in a real browser: a name typed as a tool writes it,
then Enter, picks that very sampler (typing euler picked "Euler a (A1111)", another sampler)."""

import pytest

from tests.browser.pages import CHROMIUM
from tests.browser.settle import open_settled, settle, value

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")
TYPED = {"Euler": "Euler (A1111)", "dpmpp_2m": "dpmpp_2m (ComfyUI)", "DPM++ 2M": "DPM++ 2M (A1111)",
         "DDIM": "DDIM (A1111)", "lms": "lms (ComfyUI)", "euler": "euler (ComfyUI)"}  # euler last: it is generated


def test_a_typed_sampler_name_and_enter_pick_that_sampler(browser, app_server):
    page = open_settled(browser, app_server.url, 1400, 900)
    box = page.locator("#scheduler input")
    for typed, shown in TYPED.items():
        box.click()
        box.fill("")
        page.keyboard.type(typed)
        page.keyboard.press("Enter")
        settle(page)
        assert value(page, "scheduler") == shown, typed
    page.locator("#seeds textarea").fill("4")
    page.locator("#num-inference-steps input").fill("3")
    page.locator("#generate").click()
    page.wait_for_function("document.querySelectorAll('#grid .thumbnail-item img').length === 1")
    settle(page)
    page.locator("#grid .thumbnail-item").first.click()
    page.wait_for_function("document.querySelector('#cell-params textarea')?.value.includes('Sampler')")
    assert "Sampler: euler," in value(page, "cell-params"), "ComfyUI's euler ran, not A1111's Euler a"
