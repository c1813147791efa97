"""What the browser tests do to a page: open one, wait for its images and boxes, read what it serves.

The `browser` fixture (one headless Chromium a module) is in tests/conftest.py; tests/browser/settle.py waits until
a page's chained events have finished.
"""

import io
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from seedlab import read_png
from tests.browser.settle import open_settled, settle

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshot.png"
TIMEOUT_MS = 60_000


def fresh_page(browser, url: str):
    """A page in a new browser context: no cookies, no Gradio session, nothing shared with other pages."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return page


def thumbnails(page, gallery: str):
    return page.locator(f"#{gallery} .thumbnail-item img")


def wait_for_images(page, gallery: str, count: int) -> None:
    """Wait until the gallery shows `count` decoded images; on a timeout, say what the page shows instead."""
    try:
        page.wait_for_function(
            """([selector, count]) => {
                const images = [...document.querySelectorAll(selector)];
                return images.length === count && images.every(img => img.complete && img.naturalWidth > 0);
            }""",
            arg=[f"#{gallery} .thumbnail-item img", count],
            timeout=TIMEOUT_MS,
        )
    except PlaywrightTimeout as error:
        shown = page.locator(f"#{gallery} .thumbnail-item img").count()
        messages = page.locator(".toast-body").all_inner_texts()
        raise AssertionError(f"#{gallery} shows {shown} of {count} images after {TIMEOUT_MS / 1000:.0f} s; "
                             f"messages on the page: {messages}") from error


def generate_grid(page, seeds: str, steps: int, count: int, prompt: str | None = None, settled: bool = False) -> None:
    """What a visitor does first: (a prompt,) the seeds and steps, Generate, then wait for the grid's `count`
    images; with `settled`, also until every event chained after the run has finished."""
    if prompt is not None:
        page.locator("#prompt textarea").fill(prompt)
    page.locator("#seeds textarea").fill(seeds)
    page.locator("#num-inference-steps input").fill(str(steps))
    page.locator("#generate").click()
    wait_for_images(page, "grid", count)
    if settled:
        settle(page)


def wait_for_value(page, elem_id: str, text: str) -> str:
    """Wait until the plain-text box `elem_id` contains `text`; returns its value."""
    page.wait_for_function(
        "([id, text]) => { const box = document.querySelector(`#${id} textarea, #${id} input`);"
        " return box !== null && box.value.includes(text); }", arg=[elem_id, text], timeout=TIMEOUT_MS)
    return page.evaluate("id => document.querySelector(`#${id} textarea, #${id} input`).value", elem_id)


def open_reproduce(page) -> None:
    """Open the "Reproduce a link, a recipe or an image" panel, unless a link already opened it."""
    if not page.locator("#png-drop").is_visible():
        page.get_by_text("Reproduce a link, a recipe or an image").click()
    page.locator("#png-drop").wait_for()


def assert_served_as_png(page, images) -> list[bytes]:
    """Every image is served as the PNG file SeedLab wrote, recipe chunks included; returns the files."""
    files = []
    for src in images.evaluate_all("images => images.map(img => img.src)"):
        response = page.request.get(src)
        assert response.ok, src
        assert response.body()[:8] == b"\x89PNG\r\n\x1a\n", f"{src} is not a PNG"
        recipe, print_, environment, notes = read_png(io.BytesIO(response.body()))
        assert print_ is not None and environment is not None and notes == []
        files.append(response.body())
    return files


def grid_png(page, path) -> None:
    """Generate seed 4 (2 steps) and save the PNG the page serves for it at `path`."""
    generate_grid(page, "4", 2, 1)
    path.write_bytes(page.request.get(thumbnails(page, "grid").nth(0).evaluate("img => img.src")).body())


def plot_on_page(browser, url: str, x: str, y: str, cells: int):
    """A settled page that made a one-step plot of "a red circle" over `x` and `y`."""
    page = open_settled(browser, url)
    page.get_by_text("Compare (X/Y/Z plot over any recipe field)").click()
    page.locator("#prompt textarea").fill("a red circle")
    page.locator("#num-inference-steps input").fill("1")
    page.locator("#plot-x input").fill(x)
    page.locator("#plot-y input").fill(y)
    page.locator("#make-plot").click()
    wait_for_images(page, "plot", cells)
    settle(page)
    return page
