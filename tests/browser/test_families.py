"""The page with other families: the whole loop on a small SDXL folder, and an unconditional DDIM folder (no prompt),
served by `python app.py --model DIR`."""

import pytest

from tests.browser.pages import CHROMIUM, generate_grid, wait_for_images
from tests.browser.settle import open_settled, ready, settle, value
from tests.conftest import AppServer
from tests.tiny_families import save_tiny_ddim, save_tiny_sdxl

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


def serve(build, name: str, tmp_path_factory):
    """`python app.py --model DIR` on a tiny folder made by `build`: started, yielded, stopped."""
    folder = build(tmp_path_factory.mktemp(name) / "model")
    server = AppServer(str(folder), tmp_path_factory.mktemp(f"{name}-app"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sdxl_server(tmp_path_factory):
    yield from serve(save_tiny_sdxl, "sdxl", tmp_path_factory)


def test_grid_anchor_variations_and_a_link_on_an_sdxl_folder(browser, sdxl_server):
    page = open_settled(browser, sdxl_server.url)
    assert value(page, "width") == "32" and value(page, "height") == "32"  # the folder's native size
    generate_grid(page, "0-2", 2, 3, prompt="a red circle", settled=True)
    page.locator("#grid .thumbnail-item").nth(1).click()
    settle(page)
    assert value(page, "anchor").startswith("Anchor seed: 1")
    link = value(page, "grid-link")
    page.locator("#variations-box textarea").fill(", blue")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 2)
    settle(page)
    assert ready(page)
    page.context.close()

    visitor = open_settled(browser, link)  # a fresh browser opens the cell's link: exact, and it stays
    verdict = value(visitor, "verdict")
    assert "Exact match" in verdict, verdict
    visitor.locator("#reverify").click()
    settle(visitor)
    assert "Exact match: the regenerated image is identical to the original (pixel for pixel)" in value(
        visitor, "verdict")
    visitor.context.close()


@pytest.fixture(scope="module")
def ddim_server(tmp_path_factory):
    yield from serve(save_tiny_ddim, "ddim", tmp_path_factory)


def test_an_unconditional_folder_on_the_page_grid_link_and_verdict_without_a_prompt(browser, ddim_server):
    page = open_settled(browser, ddim_server.url)
    assert value(page, "width") == "32" and value(page, "height") == "32"  # the model's own (and only) size
    page.locator("#seeds textarea").fill("0-2")
    page.locator("#num-inference-steps input").fill("2")
    page.locator("#generate").click()  # the prompt box stays empty
    wait_for_images(page, "grid", 3)
    settle(page)
    page.locator("#grid .thumbnail-item").nth(2).click()
    settle(page)
    assert value(page, "anchor").startswith("Anchor seed: 2")
    link = value(page, "grid-link")
    page.locator("#prompt textarea").fill("a red circle")  # a prompt is refused by name, and the page recovers
    page.locator("#generate").click()
    settle(page)
    assert ready(page) and "Prompt must be empty for model" in page.content()
    page.context.close()

    visitor = open_settled(browser, link)
    verdict = value(visitor, "verdict")
    assert "Exact match" in verdict, verdict
    visitor.context.close()
