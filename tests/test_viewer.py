"""The plot viewer in Chromium, opened from disk: swap axes, pick the Z value, click a cell, read its recipe."""

import json
from pathlib import Path

import pytest

from tests.helpers import run_here

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 30_000
PROMPT = "a red circle <b>bold</b>"  # user text: it must show as text, never become markup

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to open the viewer with")


@pytest.fixture(scope="module")
def plot(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("viewer")
    run = run_here("plot", "--prompt", PROMPT, "--x", "seed: 1, 2, 3", "--y", "Steps: 1, 2", "--z",
                   "Prompt S/R: red, blue", "--model", tiny_model_dir, "--out", out, "--json")
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()], out


@pytest.fixture(scope="module")
def page(plot):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
        page.goto((plot[1] / "plot.html").as_uri())
        yield page
        browser.close()


def headers(page) -> list[str]:
    return page.locator("#plot tr").first.locator("th").all_inner_texts()[1:]


def row_headers(page) -> list[str]:
    return [row.locator("th").inner_text() for row in page.locator("#plot tr").all()[1:]]


def test_the_viewer_shows_every_cell_of_a_z_value_from_disk(page, plot):
    lines, _ = plot
    assert "Every cell is exact and linkable" in page.locator("#promise").inner_text()
    assert headers(page) == ["Seed: 1", "Seed: 2", "Seed: 3"]
    assert row_headers(page) == ["Steps: 1", "Steps: 2"]
    images = page.locator("#plot img")
    assert images.count() == 6
    page.wait_for_function("[...document.querySelectorAll('#plot img')].every(img => img.complete)")
    assert page.evaluate("[...document.querySelectorAll('#plot img')].every(img => img.naturalWidth === 64)")
    captions = page.locator("#plot td.cell code").all_inner_texts()
    assert captions == [line["fingerprint"][:12] for line in lines[:6]]  # z = red, in x/y order
    assert page.errors == []


def test_swap_pick_z_and_click_a_cell_for_its_recipe_and_link(page, plot):
    lines, _ = plot
    page.click("#swap")
    assert headers(page) == ["Steps: 1", "Steps: 2"]
    assert row_headers(page) == ["Seed: 1", "Seed: 2", "Seed: 3"]
    page.select_option("#z-value", label="Prompt S/R: blue")
    # Row "Seed: 3", column "Steps: 2": the cell x=2 (seed 3), y=1 (2 steps), z=1 (blue).
    page.locator("#plot tr").nth(3).locator("td.cell").nth(1).click()
    expected = next(line for line in lines if (line["x"], line["y"], line["z"]) == ("3", "2", "blue"))
    recipe = json.loads(page.locator("#recipe").inner_text())
    assert recipe == expected["recipe"] and recipe["prompt"] == "a blue circle <b>bold</b>"
    assert page.locator("#link").get_attribute("href") == expected["link"]
    assert page.locator("#fingerprint").inner_text() == expected["fingerprint"]
    assert page.locator("#cell-title").inner_text() == "Seed: 3 · Steps: 2 · Prompt S/R: blue"
    assert page.locator("b").count() == 0  # the prompt's <b> stayed text everywhere
    assert page.errors == []


def test_any_axis_can_run_across(page):
    page.select_option("#x-axis", value="z")
    assert headers(page) == ["Prompt S/R: red", "Prompt S/R: blue"]
    assert page.locator("#plot td.cell img").count() == 2 * len(row_headers(page))
    assert page.errors == []
