"""The whole loop in a real browser: seeds, dice, grid, pick an anchor, variations, share a link.

Set SEEDLAB_SCREENSHOT=1 to save a screenshot of the UI after the run to docs/screenshot.png.
"""

import io
import os

import pytest

from seedlab import read_png
from tests.browser.pages import (
    CHROMIUM,
    SCREENSHOT,
    TIMEOUT_MS,
    assert_served_as_png,
    fresh_page,
    open_reproduce,
    thumbnails,
    wait_for_images,
    wait_for_value,
)

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


@pytest.fixture(scope="module")
def page(browser, app_url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(app_url)
    return page


def test_grid_anchor_and_variations(page):
    page.locator("#prompt textarea").fill("a yellow star")
    seeds = page.locator("#seeds textarea")

    # The dice writes four fresh seeds into the box (and generates nothing).
    seeds.fill("0-3")
    page.locator("#dice").click()
    page.wait_for_function("document.querySelector('#seeds textarea').value !== '0-3'")
    drawn = [part.strip() for part in seeds.input_value().split(",")]
    assert len(drawn) == 4 and all(part.isdigit() for part in drawn), drawn
    assert thumbnails(page, "grid").count() == 0
    seeds.fill("0-3")

    page.locator("#generate").click()
    wait_for_images(page, "grid", 4)
    captions = page.locator("#grid .thumbnail-item .caption-label").all_inner_texts()
    assert captions == ["seed 0", "seed 1", "seed 2", "seed 3"]
    assert_served_as_png(page, thumbnails(page, "grid"))
    rendering = thumbnails(page, "grid").evaluate_all("images => images.map(i => getComputedStyle(i).imageRendering)")
    assert rendering == ["pixelated"] * 4

    # Picking the third cell makes seed 2 the anchor.
    page.locator("#grid .thumbnail-item").nth(2).click()
    wait_for_value(page, "anchor", "Anchor seed: 2")
    assert page.locator("#anchor-fingerprint textarea").input_value().isalnum()

    page.locator("#variations-box textarea").fill(", on a blue background\n, on a black background")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 3)
    captions = page.locator("#variations .thumbnail-item .caption-label").all_inner_texts()
    assert captions == ["base prompt", ", on a blue background", ", on a black background"]
    assert_served_as_png(page, thumbnails(page, "variations"))
    if os.environ.get("SEEDLAB_SCREENSHOT"):  # the README's picture: the grid, the selected cell, the anchor
        page.locator("#grid .thumbnail-item").nth(2).click()
        page.wait_for_function("document.querySelector('#cell-image img') !== null")
        page.evaluate("window.scrollTo(0, 0)")
        page.set_viewport_size({"width": 1400, "height": 1400})
        page.wait_for_timeout(1000)
        page.screenshot(path=str(SCREENSHOT))


def test_a_copied_link_regenerates_exactly_after_a_server_restart(browser, app_server, tmp_path):
    page = fresh_page(browser, app_server.url)
    page.goto(app_server.url)
    page.locator("#prompt textarea").fill("a blue square")
    page.locator("#seeds textarea").fill("5, 6")
    page.locator("#generate").click()
    wait_for_images(page, "grid", 2)
    first_png, _ = assert_served_as_png(page, thumbnails(page, "grid"))
    (tmp_path / "seed5.png").write_bytes(first_png)

    # Clicking a cell shows its link; the copy button puts it on the clipboard.
    page.locator("#grid .thumbnail-item").nth(1).click()
    page.wait_for_function("document.querySelector('#grid-link textarea').value.startsWith('http')")
    page.locator("#grid-link button[aria-label=Copy]").click()
    link = page.evaluate("navigator.clipboard.readText()")
    assert link == page.locator("#grid-link textarea").input_value()
    assert link.startswith(f"{app_server.url}/?v=1&prompt=a+blue+square&seed=6&"), link
    assert len(link) < 500
    page.context.close()

    app_server.restart()  # nothing of the first server survives: the link alone must be enough

    # A visitor opens the link: every control is restored, the image regenerated and checked.
    page = fresh_page(browser, app_server.url)
    page.goto(link)
    assert "same pixel fingerprint" in wait_for_value(page, "verdict", "Exact match")  # no copy of the original here
    page.wait_for_function("!document.querySelector('#generate').disabled")  # done regenerating: ready again
    assert page.locator("#stop").is_disabled()
    page.wait_for_function("(() => { const img = document.querySelector('#reproduced img');"
                           " return img !== null && img.complete && img.naturalWidth > 0; })()")
    (served,) = assert_served_as_png(page, page.locator("#reproduced img"))
    assert read_png(io.BytesIO(served))[1] == link.split("&fp=")[1].split("&")[0]
    assert page.locator("#prompt textarea").input_value() == "a blue square"
    assert page.locator("#seeds textarea").input_value() == "6"

    # The PNG downloaded from the first server restores its recipe and regenerates pixel for pixel, at once as a
    # link does (issue 33: it waited for "Regenerate the image and compare").
    open_reproduce(page)
    page.locator("#png-drop input[type=file]").set_input_files(str(tmp_path / "seed5.png"))
    wait_for_value(page, "png-notes", "Restored from the PNG")
    assert page.locator("#seeds textarea").input_value() == "5"
    wait_for_value(page, "verdict", "pixel for pixel")
    page.wait_for_function("!document.querySelector('#generate').disabled")  # done regenerating: ready again

    # A bad link is explained on the page, and the app stays usable.
    page.goto(f"{app_server.url}/?v=1&prompt=x&steps=0&fp={'0' * 64}")
    text = wait_for_value(page, "verdict", "This link cannot be opened")
    assert "steps (num_inference_steps) must be a whole number from 1 to 200, got 0" in text
    page.locator("#seeds textarea").fill("3")
    page.locator("#generate").click()
    wait_for_images(page, "grid", 1)
    page.context.close()


def test_a_64_bit_seed_survives_the_browser_exactly(browser, app_server):
    """A ComfyUI-sized seed goes through the page as text: never a JavaScript number (exact only to 2**53)."""
    seed = "6952411511246973023"
    page = fresh_page(browser, app_server.url)
    page.goto(app_server.url)
    page.locator("#seeds textarea").fill(seed)
    page.locator("#generate").click()
    wait_for_images(page, "grid", 1)
    assert page.locator("#grid .thumbnail-item .caption-label").all_inner_texts() == [f"seed {seed}"]
    page.locator("#grid .thumbnail-item").nth(0).click()
    wait_for_value(page, "anchor", f"Anchor seed: {seed}")
    link = wait_for_value(page, "grid-link", f"&seed={seed}&")
    page.locator("#variations-box textarea").fill(", on a blue background")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 2)
    page.locator("#variations .thumbnail-item").nth(1).click()
    assert f"&seed={seed}&" in wait_for_value(page, "variation-link", "http")
    (png,) = assert_served_as_png(page, page.locator("#variations .thumbnail-item img").nth(1))
    assert read_png(io.BytesIO(png))[0].seed == int(seed)

    page.goto(link)  # the link restores the seed into the seeds box, digit for digit, and regenerates exactly
    wait_for_value(page, "verdict", "Exact match")
    assert page.locator("#seeds textarea").input_value() == seed
    page.context.close()


def test_link_and_png_text_is_shown_as_text_never_as_html(browser, app_server, tmp_path):
    """A hostile link or PNG puts HTML in an error message: the page shows it as text and builds no element."""
    page = fresh_page(browser, app_server.url)
    html = '<div id="injected" style="position:fixed;inset:0">SeedLab has moved</div><img id="pixel" src="http://127.0.0.2/t.png">'
    from urllib.parse import quote_plus

    page.goto(f"{app_server.url}/?v=1&prompt=x&model={quote_plus(html)}&fp={'0' * 64}")
    text = wait_for_value(page, "verdict", "This link cannot be opened")
    assert '<div id="injected"' in text  # shown literally
    assert page.locator("#injected").count() == 0 and page.locator("#pixel").count() == 0

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("parameters", f"a red circle\nSteps: 3, Sampler: {html}, CFG scale: 7, Seed: 9, Size: 64x64")
    Image.new("RGB", (64, 64)).save(tmp_path / "hostile.png", pnginfo=info)
    open_reproduce(page)
    page.locator("#png-drop input[type=file]").set_input_files(str(tmp_path / "hostile.png"))
    assert "<div" in wait_for_value(page, "png-notes", "Restored from the PNG")
    assert page.locator("#injected").count() == 0 and page.locator("#pixel").count() == 0

    # Gradio renders an error's text as HTML: a refused value is quoted as text there too.
    page.locator("#seeds textarea").fill("<b>bold</b>")
    page.locator("#generate").click()
    page.get_by_text("'<b>bold</b>' is not a seed").first.wait_for()
    assert page.locator("b:text-is('bold')").count() == 0
    page.context.close()
