"""The whole loop in a real browser: seeds, dice, grid, pick an anchor, variations.

Set SEEDLAB_SCREENSHOT=1 to save a screenshot of the UI after the run to docs/screenshot.png.
"""

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "screenshot.png"
TIMEOUT_MS = 60_000

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


@pytest.fixture(scope="module")
def page(app_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(app_url)
        yield page
        browser.close()


def thumbnails(page, gallery: str):
    return page.locator(f"#{gallery} .thumbnail-item img")


def wait_for_images(page, gallery: str, count: int) -> None:
    page.wait_for_function(
        """([selector, count]) => {
            const images = [...document.querySelectorAll(selector)];
            return images.length === count && images.every(img => img.complete && img.naturalWidth > 0);
        }""",
        arg=[f"#{gallery} .thumbnail-item img", count],
        timeout=TIMEOUT_MS,
    )


def assert_served_as_png(page, images) -> None:
    for src in images.evaluate_all("images => images.map(img => img.src)"):
        response = page.request.get(src)
        assert response.ok, src
        assert response.body()[:8] == b"\x89PNG\r\n\x1a\n", f"{src} is not a PNG"


def test_grid_anchor_and_variations(page):
    page.locator("#prompt textarea").fill("a red circle on a blue background")
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
    page.get_by_text("Anchor seed: 2").wait_for()
    assert page.locator("#anchor-fingerprint textarea").input_value().isalnum()

    page.locator("#variations-box textarea").fill(", highly realistic\n, artsy")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 3)
    captions = page.locator("#variations .thumbnail-item .caption-label").all_inner_texts()
    assert captions == ["base prompt", ", highly realistic", ", artsy"]
    assert_served_as_png(page, thumbnails(page, "variations"))

    if os.environ.get("SEEDLAB_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)
