"""The Compare panel and /plot: an X/Y/Z plot over any recipe field, every cell its own exact, linkable image."""

import json

import gradio as gr
import pytest
from PIL import Image

from seedlab import Recipe, generate
from tests.browser.pages import plot_on_page, wait_for_images
from tests.browser.settle import ready, settle, value
from tests.helpers import PROMPT, last


def plot(app, **values):
    return app.plot({"prompt": PROMPT, "y": None, "z": None, **values}, None, lambda *a, **k: None)


def test_a_plot_makes_each_cell_as_its_solo_image_and_a_sheet_listing_every_cell(seedlab_app, reference_model):
    final = last(plot(seedlab_app, x="seed: 1-5 (+2)", y="num_inference_steps: 1, 2"))
    records = final["plot_results"]
    assert [(r["x"], r["y"]) for r in records] == [("1", "1"), ("3", "1"), ("5", "1"), ("1", "2"), ("3", "2"),
                                                    ("5", "2")]
    for record in records:  # made alone, in this process as the app's handler was
        solo = generate(reference_model, Recipe.from_dict(record["recipe"]))
        assert solo.fingerprint == record["fingerprint"], record["recipe"]
    sheet = Image.open(final["plot_sheet"].value["path"])
    listed = json.loads(sheet.text["seedlab-plot"])
    assert [cell["fingerprint"] for cell in listed["cells"]] == [r["fingerprint"] for r in records]
    assert listed["columns"] == ["Seed: 1", "Seed: 3", "Seed: 5"] and listed["rows"] == ["Steps: 1", "Steps: 2"]


def test_prompt_sr_replaces_the_first_value_in_the_prompt(seedlab_app):
    records = last(plot(seedlab_app, prompt="a red circle", x="prompt_sr: red, blue", num_inference_steps=1))
    assert [r["recipe"]["prompt"] for r in records["plot_results"]] == ["a red circle", "a blue circle"]


@pytest.mark.parametrize("axes, message", [
    ({"x": ""}, "X axis is missing"),
    ({"x": "seed: 1-3", "y": "Steps: 0"}, "Y axis: Steps value '0' must be"),
    ({"x": "colour: red"}, "X axis"),
    ({"x": "cfg: 1, 2", "y": "cfg: 1, 2"}, "X axis: 'cfg' is not an axis; did you mean CFG Scale.*; Y axis: 'cfg'"),
])
def test_a_bad_axis_is_refused_naming_it(seedlab_app, axes, message):
    with pytest.raises(gr.Error, match=message):
        last(plot(seedlab_app, **axes))


def test_plot_over_http_and_on_the_page(app_server, browser):
    from gradio_client import Client

    _, results = Client(app_server.url, verbose=False).predict(prompt="a red circle", x="seed: 1-2",
                                                               y="guidance_scale: 2, 3", num_inference_steps=1,
                                                               api_name="/plot")
    assert len(results) == 4 and {r["y"] for r in results} == {"2", "3"}
    page = plot_on_page(browser, app_server.url, "seed: 1-2", "guidance_scale: 2, 3", 4)
    assert ready(page) and page.locator("#plot-sheet").is_enabled()
    page.locator("#plot .thumbnail-item").nth(3).click()
    settle(page)
    assert value(page, "cell-title").startswith("Seed 2") and value(page, "cell-link").startswith("http")
    assert value(page, "cell-link") == results[3]["link"]  # the same exact image as /plot made
    page.get_by_text("Seed travel").first.click()
    page.locator("#make-travel").click()
    wait_for_images(page, "travel", 5)
    settle(page)
    assert ready(page) and page.locator("#travel-animation").is_enabled()
    page.context.close()


def travel(app, **values):
    return app.travel({"prompt": PROMPT, "seeds": "3, 7", "frames": 5, "curve": "linear", "num_inference_steps": 2,
                       "variation_seed": "0", "variation_strength": 0.0, **values}, None, lambda *a, **k: None)


def test_travel_frames_start_and_end_on_the_seeds_own_images_and_make_an_animation(seedlab_app, reference_model):
    final: dict = {}
    for update in travel(seedlab_app):
        final.update(update)
    records = final["travel_results"]
    # The ends are the seeds' own recipes; between them, the first seed with the next one as variation seed.
    assert [(r["recipe"]["seed"], r["recipe"]["variation_strength"]) for r in records] == [
        ("3", 0), ("3", 0.25), ("3", 0.5), ("3", 0.75), ("7", 0)]
    assert records[2]["recipe"]["variation_seed"] == "7"
    for frame in (records[0], records[-1]):  # each end is that seed's solo image, exactly
        alone = generate(reference_model, Recipe.from_dict(frame["recipe"]))
        assert alone.fingerprint == frame["fingerprint"]
    animation = Image.open(final["travel_animation"].value["path"])
    assert animation.format == "WEBP" and animation.n_frames == 5


@pytest.mark.parametrize("values, message", [
    ({"seeds": "3"}, "at least two seeds"),
    ({"frames": 1}, "Frames per segment must be a whole number from 2 to 100"),
    ({"curve": "bounce"}, "Curve must be one of linear"),
    ({"scheduler": "EulerAncestralDiscreteScheduler"}, "draws noise at every step"),
])
def test_a_bad_travel_is_refused_naming_the_field(seedlab_app, values, message):
    with pytest.raises(gr.Error, match=message):
        last(travel(seedlab_app, **values))


def test_travel_over_http(app_server):
    from gradio_client import Client

    _, results = Client(app_server.url, verbose=False).predict(prompt="a red circle", seeds="3, 7", frames=3,
                                                               num_inference_steps=1, api_name="/travel")
    assert [(r["recipe"]["seed"], r["recipe"]["variation_strength"]) for r in results] == [("3", 0), ("3", 0.5),
                                                                                            ("7", 0)]
    assert all(r["link"].startswith("http") for r in results)


def test_the_page_lays_a_plot_out_as_a_table_of_its_axes_at_both_sizes(app_server, browser):
    """Issue 33: a 3 x 2 plot is three columns of two rows (the gallery was always 4 columns wide, so row 2 began
    at the end of row 1), each X value above its column and each Y value left of its row, labelled like the
    sheet, on a laptop and on a phone."""
    page = plot_on_page(browser, app_server.url, "seed: 5-7", "scheduler: Euler a, DPM++ 2M", 6)
    assert ready(page)
    for width, height in ((1400, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.locator("#plot").scroll_into_view_if_needed()
        cells = page.evaluate("""[...document.querySelectorAll('#plot .gallery-item')].map(item => {
            const box = item.getBoundingClientRect();
            return {x: Math.round(box.x), y: Math.round(box.y), above: getComputedStyle(item, '::before').content,
                    left: getComputedStyle(item, '::after').content,
                    labelWidth: getComputedStyle(item, '::after').width};
        })""")
        columns = sorted({cell["x"] for cell in cells})
        rows = sorted({cell["y"] for cell in cells})
        assert len(columns) == 3 and len(rows) == 2, (width, cells)
        assert [(columns.index(cell["x"]), rows.index(cell["y"])) for cell in cells] == [
            (0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)], width
        assert [cell["above"] for cell in cells[:3]] == ['"Seed: 5"', '"Seed: 6"', '"Seed: 7"']
        assert [cells[0]["left"], cells[3]["left"]] == ['"Scheduler: Euler a"', '"Scheduler: DPM++ 2M"']
        label = float(cells[0]["labelWidth"].removesuffix("px"))
        assert columns[0] - label >= 0, (width, columns[0], label)  # the row labels are on the page, not cut off
    assert "Columns: Seed (5, 6, 7) · rows: Scheduler (Euler a, DPM++ 2M)" in page.locator("#plot-layout").inner_text()
    page.context.close()


def test_the_plot_tables_labels_cannot_end_its_style_or_add_markup():
    from types import SimpleNamespace

    from seedlab.explore.axes import parse_axis
    from webui.compare import plot_table

    hostile = parse_axis('prompt_sr: red, "}</style><script>alert(1)</script>')
    layout = plot_table(SimpleNamespace(x=hostile, y=parse_axis("seed: 1, 2"), z=None))
    style = layout.split("<style>", 1)[1]
    assert style.count("</style>") == 1 and style.endswith("</style>") and "<script>" not in layout
    assert "&lt;/style&gt;&lt;script&gt;" in layout.split("<style>", 1)[0]  # the visible line, escaped


def test_a_plot_cell_click_keeps_the_page_where_the_cells_are_and_make_anchor_shows_the_anchor(app_server,
                                                                                              browser):
    """Issue 33: on a laptop a click on a plot cell jumped from the plot to the Selected image panel (its top cut
    off), so comparing cells meant scrolling back each time, and "Make anchor" showed nothing. Now the panel floats
    beside the plot and the page stays; on a phone the panel is scrolled to, its top in view; Make anchor brings the
    anchor into view."""
    page = plot_on_page(browser, app_server.url, "seed: 5-7", "scheduler: Euler a, DPM++ 2M", 6)
    page.set_viewport_size({"width": 1400, "height": 900})
    for index in (3, 5, 1):  # cells compared one after the other, without scrolling back
        cell = page.locator("#plot .thumbnail-item").nth(index)
        cell.scroll_into_view_if_needed()
        cell.click()
        settle(page)
        box, shown, plot = (page.locator(name).bounding_box() for name in ("#cell-panel", f"#plot .gallery-item >> "
                                                                          f"nth={index}", "#plot .grid-container"))
        assert shown["y"] >= 0 and shown["y"] + shown["height"] <= 900, (index, shown)  # the cell stays in view
        assert box["y"] >= 0 and box["y"] + box["height"] <= 900 and box["x"] + box["width"] <= 1400, box
        assert box["x"] >= plot["x"] + plot["width"], (box, plot)  # beside the cells, covering none
        assert value(page, "cell-title").startswith(f"Seed {5 + index % 3}")
    page.locator("#cell-panel button", has_text="Make anchor").first.click()
    settle(page)
    anchor = page.locator("#anchor").bounding_box()
    assert anchor["y"] >= 0 and anchor["y"] + anchor["height"] <= 900 and "seed: 6" in value(page, "anchor").lower()
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#plot .thumbnail-item").nth(4).scroll_into_view_if_needed()
    page.locator("#plot .thumbnail-item").nth(4).click()
    settle(page)
    top = page.locator("#cell-panel").bounding_box()["y"]
    assert -1 <= top < 844 and value(page, "cell-title").startswith("Seed 6")  # its top in view
    page.context.close()
