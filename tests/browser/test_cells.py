"""The selected image and its actions, in a real browser at phone size (390x844)."""

import json

import numpy as np
import pytest

from seedlab import read_png
from tests.browser.pages import CHROMIUM, TIMEOUT_MS, generate_grid, open_reproduce, wait_for_images, wait_for_value
from tests.browser.settle import open_settled, settle, value

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


def test_any_image_can_be_enlarged_downloaded_reused_and_made_the_anchor(browser, app_server, tmp_path):
    page = open_settled(browser, app_server.url, 390, 844)  # its requests counted, so it can be looked at settled
    generate_grid(page, "3, 4", 2, 2, prompt="a cell")

    # A grid cell: the anchor, and the panel with its PNG, link and A1111 parameters.
    page.locator("#grid .thumbnail-item").nth(1).click()
    wait_for_value(page, "cell-title", "Seed 4 · prompt 'a cell'")
    assert "Seed: 4" in value(page, "cell-params") and "Steps: 2" in value(page, "cell-params")
    assert value(page, "cell-link").startswith("http")
    page.wait_for_function("(() => { const img = document.querySelector('#cell-image img');"
                           " return img !== null && img.complete && img.naturalWidth > 0; })()")
    assert page.locator("#cell-image img").bounding_box()["width"] >= 200  # enlarged, not a thumbnail
    with page.expect_download() as download:
        page.locator("#cell-download").click()
    path = tmp_path / "cell.png"
    download.value.save_as(path)
    recipe, fingerprint, _, _ = read_png(path)
    assert (recipe.seed, recipe.prompt, fingerprint) == (4, "a cell", value(page, "anchor-fingerprint"))

    # A variation cell becomes the anchor only through "Make anchor".
    page.locator("#variations-box textarea").fill(", large")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 2)
    settle(page)  # every chained event of the variations done
    page.locator("#variations .thumbnail-item").nth(1).click()
    wait_for_value(page, "cell-title", "prompt 'a cell, large'")
    assert value(page, "anchor").endswith("prompt: a cell")
    page.locator("#make-anchor").click()
    wait_for_value(page, "anchor", "Anchor seed: 4 · prompt: a cell, large")
    settle(page)

    # Nudges around that anchor: each cell a variation seed at the strength asked for, any of them the next anchor.
    page.locator("#strip-panel").get_by_text("Nudge the anchor").first.click()
    # The panel's inputs mount as it opens and may take their initial values after a fast fill: type until they hold.
    for _ in range(5):
        page.locator("#strip-count input").fill("2")
        page.locator("#strip-strength input").fill("0.2")
        page.wait_for_timeout(300)
        if (page.locator("#strip-count input").input_value(), page.locator("#strip-strength input").input_value()) == (
                "2", "0.2"):
            break
    page.locator("#make-strip").click()
    wait_for_images(page, "strip", 2)
    page.locator("#strip .thumbnail-item").nth(1).click()
    wait_for_value(page, "cell-params", "Variation seed strength: 0.2")
    nudged = value(page, "cell-title").split("fingerprint ")[1][:16]
    page.locator("#make-anchor").click()
    page.wait_for_function("([id, start]) => document.querySelector(`#${id} textarea, #${id} input`).value"
                           ".startsWith(start)", arg=["anchor-fingerprint", nudged])

    # Reuse seed puts the selected image's seed back into the seeds box.
    page.locator("#seeds textarea").fill("0-1")
    page.locator("#reuse-seed").click()
    page.wait_for_function("document.querySelector('#seeds textarea').value === '4'")

    # A reproduced image can be made the anchor too.
    open_reproduce(page)
    page.locator("#link-or-recipe textarea").fill(json.dumps({"prompt": "a cell, large", "seed": "3",
                                                              "num_inference_steps": 2}))
    assert not page.locator("#verdict-anchor").is_enabled()
    page.locator("#reproduce").click()
    wait_for_value(page, "verdict", "Regenerated")  # a recipe alone: no fingerprint to compare with
    page.wait_for_function("!document.querySelector('#verdict-anchor').disabled")
    page.locator("#verdict-anchor").click()
    wait_for_value(page, "anchor", "Anchor seed: 3 · prompt: a cell, large")
    assert "variation" not in value(page, "cell-params").lower()  # the reproduced recipe, not the nudge
    page.context.close()


def test_a_matrix_in_the_page_downloads_as_a_labelled_sheet_listing_every_cell(browser, app_server,
                                                                                 tmp_path):
    from PIL import Image

    from seedlab.files.sheets import SHEET_KEY

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(app_server.url)
    page.locator("#prompt textarea").fill("a matrix")
    page.locator("#seeds textarea").fill("7, 8")
    page.locator("#num-inference-steps input").fill("2")
    page.locator("#variations-box textarea").fill(", big\n, small")
    page.locator("#matrix-panel").get_by_text("Seeds x variations").first.click()
    page.locator("#make-matrix").click()
    wait_for_images(page, "matrix", 6)
    page.wait_for_function("!document.querySelector('#matrix-sheet').disabled")
    with page.expect_download() as download:
        page.locator("#matrix-sheet").click()
    path = tmp_path / "sheet.png"
    download.value.save_as(path)
    with Image.open(path) as sheet:
        listing = json.loads(sheet.text[SHEET_KEY])
        pixels = np.asarray(sheet.convert("RGB"))
    assert listing["columns"] == ["base prompt", ", big", ", small"] and listing["rows"] == ["7", "8"]
    assert [(c["row"], c["column"], c["seed"], c["prompt"]) for c in listing["cells"]] == [
        (r, c, seed, "a matrix" + suffix)
        for r, seed in enumerate(("7", "8")) for c, suffix in enumerate(("", ", big", ", small"))]
    assert pixels[:16].min() < 128, "the column headers are drawn in the band above the cells"
    # A cell of the sheet is the cell of the page: the same fingerprint and link, and it opens the panel.
    page.locator("#matrix .thumbnail-item").nth(4).click()
    wait_for_value(page, "cell-title", "Seed 8 · prompt 'a matrix, big'")
    assert value(page, "cell-link") == listing["cells"][4]["link"]
    context.close()
