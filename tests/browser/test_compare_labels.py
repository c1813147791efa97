"""Issue 33, on the settled page: a travel's animation plays in the travel panel, downloads under a name that says
what it is, its frames' captions read plainly and whole; a plot cell's Selected image title names its axis values."""

import pytest

from tests.browser.pages import plot_on_page, wait_for_images
from tests.browser.settle import open_settled, ready, settle, value

BIG = 12345678901234567890  # a seed as long as seeds get, so its captions cannot fit one line of a cell


def captions(page) -> list[dict]:
    """Each travel caption's text and whether any of it is cut off (ellipsised or clipped)."""
    return page.evaluate("""() => [...document.querySelectorAll('#travel .caption-label')].map(label => ({
        text: label.innerText.trim(), width: label.clientWidth,
        cut: label.scrollWidth > label.clientWidth + 1 || label.scrollHeight > label.clientHeight + 1}))""")


@pytest.fixture(scope="module")
def travelled(app_server, browser):
    """A settled page that made a one-step travel from BIG to 0 in 5 frames, and whether it showed an animation box
    before the travel."""
    page = open_settled(browser, app_server.url)
    page.get_by_text("Seed travel").first.click()
    settle(page)
    before = page.locator("#travel-preview").is_visible()
    page.locator("#prompt textarea").fill("a red circle")
    page.locator("#num-inference-steps input").fill("1")
    page.locator("#travel-seeds input").fill(f"{BIG}, 0")
    settle(page)  # the boxes' values reach the page's state before the click reads them
    page.locator("#make-travel").click()
    wait_for_images(page, "travel", 5)
    settle(page)
    assert ready(page)
    yield page, before
    page.context.close()


def test_the_travels_animation_plays_in_the_travel_panel(travelled):
    """The page had no animation: only a download."""
    page, before = travelled
    assert not before  # no empty box before a travel
    for width, height in ((1400, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        settle(page)
        preview = page.locator("#travel-preview img")
        preview.scroll_into_view_if_needed()
        assert preview.is_visible() and preview.evaluate("img => img.complete && img.naturalWidth > 0")
        assert preview.get_attribute("src").endswith(f"travel-seed-{BIG}-to-0-5-frames.webp")
        box = preview.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, box)  # on the screen, not past it


def test_the_animation_downloads_under_a_name_that_says_what_it_is(travelled):
    """Every download was travel.webp."""
    page, _ = travelled
    page.set_viewport_size({"width": 1400, "height": 900})
    with page.expect_download() as download:
        page.locator("#travel-animation").click()
    assert download.value.suggested_filename == f"travel-seed-{BIG}-to-0-5-frames.webp"


def test_travel_captions_read_plainly_and_whole(travelled):
    """Frame 0 read "frame 0 · seed 2 → 0 at 0", and captions were cut."""
    page, _ = travelled
    expected = [f"seed {BIG}", f"seed {BIG} → 0, 25%", f"seed {BIG} → 0, 50%", f"seed {BIG} → 0, 75%", "seed 0"]
    for width, height in ((1400, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        settle(page)
        shown = captions(page)
        assert [caption["text"] for caption in shown] == expected, (width, shown)
        assert not [caption for caption in shown if caption["cut"]], (width, shown)
    page.set_viewport_size({"width": 1400, "height": 900})
    page.locator("#travel .thumbnail-item").nth(2).click()  # the Selected image panel floats beside: narrower cells
    settle(page)
    assert value(page, "cell-title").startswith(f"Seed {BIG} · variation seed 0 at strength 0.5")
    shown = captions(page)
    assert [caption["text"] for caption in shown] == expected and not [c for c in shown if c["cut"]], shown


def test_a_plot_cells_selected_image_title_names_its_axis_values(app_server, browser):
    """The title names the cell's axis values: four cells of a seed x sampler plot share "Seed 6 · prompt …"."""
    page = plot_on_page(browser, app_server.url, "seed: 5, 6", "Sampler: Euler a, DDIM", 4)
    assert ready(page)
    for index, title in ((3, "Seed 6 · Scheduler DDIM · prompt 'a red circle'"),
                         (0, "Seed 5 · Scheduler Euler a · prompt 'a red circle'")):
        cell = page.locator("#plot .thumbnail-item").nth(index)
        cell.scroll_into_view_if_needed()
        cell.click()
        settle(page)
        assert value(page, "cell-title").startswith(title), value(page, "cell-title")
    page.context.close()
