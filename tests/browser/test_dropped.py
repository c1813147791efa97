"""Issue 33: a dropped SeedLab PNG gets its verdict as a link does, without its button; another tool's file waits."""

from dataclasses import replace

import pytest
import torch
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from seedlab import Recipe, generate, load_model, save_png
from tests.browser.pages import CHROMIUM, grid_png, open_reproduce, wait_for_value
from tests.browser.settle import open_settled, settle, value
from tests.conftest import APP_THREADS
from tests.helpers import torch_threads

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


@pytest.fixture(scope="module")
def seedlab_pngs(app_model, tmp_path_factory):
    """Two PNGs SeedLab wrote elsewhere (this server has no record of them): 2 steps, and one of 120 to stop."""
    model = load_model(app_model, torch.device("cpu"))
    folder = tmp_path_factory.mktemp("dropped")
    with torch_threads(APP_THREADS):
        quick = generate(model, Recipe(model=model.name, prompt="a dropped star", seed=5, num_inference_steps=2,
                                       guidance_scale=model.default_guidance))
    long = replace(quick, recipe=quick.recipe.replace(num_inference_steps=120))  # its own pixels: only stopped here
    return save_png(quick, folder / "quick.png"), save_png(long, folder / "long.png")


def a1111_png(folder):
    """A file another tool wrote (A1111's text, no fingerprint)."""
    info = PngInfo()
    info.add_text("parameters", "a red circle\nSteps: 2, Sampler: Euler, CFG scale: 7, Seed: 9, Size: 64x64")
    Image.new("RGB", (64, 64), (200, 30, 30)).save(folder / "a1111.png", pnginfo=info)
    return folder / "a1111.png"


def drop(page, path) -> None:
    open_reproduce(page)
    page.locator("#png-drop input[type=file]").set_input_files(str(path))


def test_a_dropped_seedlab_png_gets_its_verdict_without_its_button_and_another_tools_waits(
        browser, app_server, seedlab_pngs, tmp_path):
    quick, long = seedlab_pngs
    page = open_settled(browser, app_server.url)
    # Not on this server's record: regenerated at once, and compared.
    drop(page, quick)
    wait_for_value(page, "verdict", "Exact match: the regenerated image is identical to the original (pixel for pixel)")
    settle(page)
    assert page.locator("#reproduced img").count() == 1 and page.locator("#verdict-anchor").is_enabled()
    assert not page.locator("#generate").is_disabled()  # ready again
    # On this server's record (a cell it made): the verdict comes with the drop.
    page.locator("#png-drop button[aria-label='Clear']").click()
    settle(page)
    grid_png(page, tmp_path / "seed4.png")
    settle(page)
    drop(page, tmp_path / "seed4.png")
    wait_for_value(page, "verdict", "Served from this server's record of the image it made")
    settle(page)
    assert "the file's pixel fingerprint" in value(page, "verdict")
    # A long one: the page is busy while it runs, and Stop ends it.
    page.locator("#png-drop button[aria-label='Clear']").click()
    settle(page)
    drop(page, long)
    page.wait_for_function("document.querySelector('#generate').disabled && !document.querySelector('#stop').disabled")
    page.locator("#stop").click()
    settle(page)
    assert not page.locator("#generate").is_disabled() and page.locator("#stop").is_disabled()
    assert page.locator("#reproduced img").count() == 0 and "Exact" not in value(page, "verdict")
    # Another tool's file waits for its button: its recipe often needs adjusting first.
    page.locator("#png-drop button[aria-label='Clear']").click()
    settle(page)
    drop(page, a1111_png(tmp_path))
    wait_for_value(page, "png-notes", "Restored from the PNG (seed 9)")
    settle(page)
    assert value(page, "verdict") == "" and page.locator("#reproduced img").count() == 0  # nothing ran
    assert page.locator("#regenerate-png").is_enabled()
    page.locator("#regenerate-png").click()
    page.wait_for_function("document.querySelector('#verdict textarea').value !== ''")
    page.context.close()

