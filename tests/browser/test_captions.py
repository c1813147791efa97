"""Issue 33: a gallery's captions sit under their images, never over them, on a laptop and on a phone."""

import pytest

from tests.browser.pages import CHROMIUM, generate_grid, wait_for_images, wait_for_value
from tests.browser.settle import open_settled, settle

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")

# For each cell of a gallery: its caption's box against every image's box in that gallery (a caption pushed out of
# its own cell onto the next row's image covers it just the same), and whether the caption shows inside its cell.
OVERLAPS = """gallery => {
    const cells = [...document.querySelectorAll(`#${gallery} .thumbnail-item`)];
    const images = cells.map(cell => cell.querySelector('img').getBoundingClientRect());
    const found = [];
    cells.forEach((cell, index) => {
        const label = cell.querySelector('.caption-label');
        if (label === null) { found.push(`cell ${index} has no caption`); return; }
        const caption = label.getBoundingClientRect(), box = cell.getBoundingClientRect();
        const text = label.innerText.trim();
        if (caption.width < 1 || caption.height < 1 || caption.bottom > box.bottom + 1 || caption.top < box.top - 1)
            found.push(`cell ${index}: its caption "${text}" does not show inside the cell`);
        images.forEach((image, other) => {
            const wide = Math.min(caption.right, image.right) - Math.max(caption.left, image.left);
            const high = Math.min(caption.bottom, image.bottom) - Math.max(caption.top, image.top);
            if (wide > 1 && high > 1)
                found.push(`cell ${index}: its caption "${text}" covers ${wide.toFixed(0)}x${high.toFixed(0)} px `
                           + `of image ${other} (${image.width.toFixed(0)}x${image.height.toFixed(0)})`);
        });
    });
    return found;
}"""


def test_captions_sit_under_the_images_of_variations_and_nudges_at_both_sizes(browser, app_server):
    page = open_settled(browser, app_server.url, 1400, 900)
    generate_grid(page, "3", 2, 1, prompt="a caption", settled=True)
    page.locator("#grid .thumbnail-item").nth(0).click()  # the anchor
    wait_for_value(page, "anchor", "Anchor seed: 3")
    page.locator("#variations-box textarea").fill(", large and round\n, small")
    page.locator("#vary").click()
    wait_for_images(page, "variations", 3)  # the anchor and its two variations
    settle(page)
    page.locator("#strip-panel").get_by_text("Nudge the anchor").first.click()
    for _ in range(5):  # the panel's inputs mount as it opens and may take their initial values after a fast fill
        page.locator("#strip-count input").fill("2")
        page.wait_for_timeout(300)
        if page.locator("#strip-count input").input_value() == "2":
            break
    page.locator("#make-strip").click()
    wait_for_images(page, "strip", 2)
    settle(page)
    for width, height in ((1400, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(500)  # the layout of the new width
        settle(page)
        for gallery in ("variations", "strip"):
            assert page.evaluate(OVERLAPS, gallery) == [], f"#{gallery} at {width}x{height}"
    page.context.close()
