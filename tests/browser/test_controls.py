"""The controls say what they do, in a real browser: errors in words, busy buttons, Stop, shortcuts, small screens."""

import pytest

from tests.browser.pages import (
    CHROMIUM,
    TIMEOUT_MS,
    generate_grid,
    grid_png,
    open_reproduce,
    thumbnails,
    wait_for_images,
    wait_for_value,
)

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


def open_page(browser, url: str, width: int = 1400, height: int = 1000):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.wait_for_function("document.body.dataset.seedlab === 'ready'")  # the page's shortcuts are in place
    return page


def test_dice_with_a_bad_count_says_why_and_keeps_the_seeds(browser, app_server):
    page = open_page(browser, app_server.url)
    page.locator("#seeds textarea").fill("0-3")
    for count in ("0", "100"):
        page.locator("#dice-count input").fill(count)
        page.locator("#dice").click()
        page.get_by_text(f"Random seeds to draw must be a whole number from 1 to 64, got {count}").first.wait_for()
        assert page.locator("#seeds textarea").input_value() == "0-3"
    page.context.close()


def test_minus_one_in_the_seeds_box_draws_a_random_seed_as_on_a_plot_axis(browser, app_server):
    """Issue 33: -1 (random, as in A1111) was refused in the Seeds box but accepted on a plot axis."""
    from tests.browser.settle import open_settled

    page = open_settled(browser, app_server.url)
    generate_grid(page, "-1, 5", 1, 2, settled=True)
    captions = page.locator("#grid .caption-label").all_inner_texts()
    assert captions[1] == "seed 5" and captions[0].startswith("seed ") and captions[0] != "seed -1", captions
    assert page.locator("#seeds textarea").input_value() == "-1, 5"  # as typed: -1 draws afresh each time
    page.context.close()


def test_the_model_is_a_main_control_in_view_without_opening_a_group(browser, app_server):
    """Issue 33: "Model" sat inside the closed Determinism group, though it changes the picture altogether."""
    from tests.browser.settle import open_settled

    page = open_settled(browser, app_server.url)
    for width, height in ((1400, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        model = page.locator("#model")
        model.scroll_into_view_if_needed()
        assert model.is_visible(), width
        box, steps = model.bounding_box(), page.locator("#num-inference-steps").bounding_box()
        assert box["y"] < steps["y"], (box, steps)  # with the main controls, above the steps
    page.context.close()


def test_at_390_px_the_grid_shows_every_cell(browser, app_server):
    page = open_page(browser, app_server.url, 390, 844)
    generate_grid(page, "0-3", 1, 4)
    gallery = page.locator("#grid").bounding_box()
    for index in range(4):
        cell = page.locator("#grid .thumbnail-item").nth(index).bounding_box()
        assert cell["x"] >= gallery["x"] - 1 and cell["x"] + cell["width"] <= gallery["x"] + gallery["width"] + 1, (
            index, cell, gallery)
        assert cell["x"] + cell["width"] <= 390 and cell["width"] >= 60  # on screen, and big enough to see
    assert thumbnails(page, "grid").count() == 4
    page.context.close()


def test_generate_looks_busy_stop_works_only_while_running_and_ctrl_enter_generates(browser, app_server):
    page = open_page(browser, app_server.url)
    generate, stop = page.locator("#generate"), page.locator("#stop")
    assert stop.is_disabled() and generate.is_enabled()  # nothing runs yet
    page.locator("#seeds textarea").fill("0-3")
    page.locator("#num-inference-steps input").fill("30")
    page.locator("#prompt textarea").focus()
    page.keyboard.press("Control+Enter")  # the shortcut generates, and adds no newline
    page.wait_for_function("document.querySelector('#generate').disabled")
    assert "\n" not in page.locator("#prompt textarea").input_value()
    assert "Generating" in generate.inner_text() and stop.is_enabled()  # a second click is refused, in words
    page.wait_for_function("document.querySelectorAll('#grid .thumbnail-item img').length >= 1")
    assert "Generating" in generate.inner_text() and generate.is_disabled() and stop.is_enabled()  # still busy
    stop.click()
    page.wait_for_function("!document.querySelector('#generate').disabled")
    assert stop.is_disabled() and "Generating" not in generate.inner_text()
    shown = thumbnails(page, "grid").count()
    assert shown < 4  # it stopped
    # Issue 33: Stop says what it stopped, until the next generation starts.
    page.wait_for_function("document.querySelector('#busy-note').innerText.startsWith('Stopped after')")
    note = page.locator("#busy-note").inner_text()
    assert note.startswith("Stopped after ") and note.split(" of ")[1].startswith("4 images"), note
    assert int(note.split()[2]) in (shown, shown + 1), (note, shown)  # one may finish as Stop arrives

    page.locator("#num-inference-steps input").fill("1")
    generate.click()
    wait_for_images(page, "grid", 4)
    page.wait_for_function("!document.querySelector('#generate').disabled")  # done: ready again
    assert stop.is_disabled() and page.locator("#busy-note").inner_text().strip() == ""
    page.context.close()


def test_a_regenerated_png_shows_under_its_button_at_a_readable_size(browser, app_server, tmp_path):
    page = open_page(browser, app_server.url, 1280, 900)
    grid_png(page, tmp_path / "seed4.png")

    open_reproduce(page)
    page.locator("#png-drop input[type=file]").set_input_files(str(tmp_path / "seed4.png"))
    button = page.locator("#regenerate-png")
    page.wait_for_function("!document.querySelector('#regenerate-png').disabled")
    button.click()
    wait_for_value(page, "verdict", "pixel for pixel")
    page.wait_for_function("(() => { const img = document.querySelector('#reproduced img');"
                           " return img !== null && img.complete && img.naturalWidth > 0; })()")
    asked, image = button.bounding_box(), page.locator("#reproduced img").bounding_box()
    verdict = page.locator("#verdict").bounding_box()
    assert image["width"] >= 200 and image["height"] >= 200, image  # not its native 64 px
    # Beside the button that asked, verdict first: both in view without scrolling from the button.
    assert image["x"] > asked["x"] + asked["width"] and verdict["x"] > asked["x"] + asked["width"], (asked, image)
    assert verdict["y"] < image["y"] and image["y"] + image["height"] <= 900, (verdict, image)
    # Issue 33: the dropped image beside the regenerated one, the same size, on a laptop and on a phone.
    page.wait_for_function("(() => { const img = document.querySelector('#original img');"
                           " return img !== null && img.complete && img.naturalWidth > 0; })()")
    original = page.locator("#original img").bounding_box()
    assert abs(original["y"] - image["y"]) <= 2 and original["x"] + original["width"] <= image["x"], (original, image)
    assert (original["width"], original["height"]) == (image["width"], image["height"])
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#original img").scroll_into_view_if_needed()
    original, image = page.locator("#original img").bounding_box(), page.locator("#reproduced img").bounding_box()
    assert original["width"] >= 150 and image["width"] >= 150, (original, image)
    assert original["y"] + original["height"] <= image["y"] + 2 or original["x"] + original["width"] <= image["x"]
    page.context.close()


def test_a_link_this_server_made_opens_from_its_record_and_re_verifies_on_click(browser, app_server):
    from gradio_client import Client

    _, results = Client(app_server.url, verbose=False).predict(prompt="a record", seeds="31", num_inference_steps=3,
                                                               api_name="/grid")
    from tests.browser.settle import open_settled, settle

    page = open_settled(browser, results[0]["link"])
    wait_for_value(page, "verdict", "Served from this server's record of the image it made:")
    assert "Exact match" in page.locator("#verdict textarea").input_value()
    label = page.locator("#reproduced [data-testid='block-label']")
    settle(page)
    assert label.inner_text().strip() == "Made on this server"  # Issue 33: read from the record, not "Regenerated"
    page.wait_for_function("!document.querySelector('#reverify').disabled")
    page.locator("#reverify").click()
    wait_for_value(page, "verdict", "pixel for pixel")
    assert "Served from" not in page.locator("#verdict textarea").input_value()
    settle(page)
    assert label.inner_text().strip() == "Made on this server"  # true of both: the verdict says which
    page.wait_for_function("document.querySelector('#reverify').disabled")
    page.context.close()


def test_finished_cells_stay_visible_and_enter_while_busy_says_why(browser, app_server):
    page = open_page(browser, app_server.url, 1280, 900)
    page.locator("#seeds textarea").fill("40-43")
    page.locator("#num-inference-steps input").fill("60")
    page.locator("#generate").click()
    page.wait_for_function("document.querySelectorAll('#grid .thumbnail-item img').length >= 1")
    page.wait_for_function("(() => { const img = document.querySelector('#grid .thumbnail-item img');"
                           " return img.complete && img.naturalWidth > 0; })()")
    assert page.locator("#generate").is_disabled(), "the grid is still running"
    # Nothing lies over the finished cell: the point at its centre is the image itself.
    covered = page.evaluate("""() => {
        const img = document.querySelector('#grid .thumbnail-item img');
        img.scrollIntoView({block: "center"});
        const box = img.getBoundingClientRect();
        const top = document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2);
        if (top === null) return `nothing at the centre of ${JSON.stringify(box)}`;
        return top === img || img.contains(top) || top.contains(img) ? null : top.outerHTML.slice(0, 200);
    }""")
    assert covered is None, covered
    page.locator("#seeds textarea").press("Enter")
    page.wait_for_function("document.querySelector('#busy-note').innerText.includes('Still generating')")
    page.locator("#stop").click()
    page.wait_for_function("!document.querySelector('#generate').disabled")
    page.wait_for_function("!document.querySelector('#busy-note').innerText.includes('Still generating')")
    page.context.close()


def test_a_verdict_goes_with_its_file(browser, app_server, tmp_path):
    """Issue 33: clearing a dropped file left its verdict, its regenerated image and "Make this image the anchor"
    beside the next file's notes. Clearing the file, or dropping another, clears what it led to."""
    from tests.browser.settle import open_settled, settle, value

    page = open_settled(browser, app_server.url)
    grid_png(page, tmp_path / "seed4.png")
    from PIL import Image

    Image.new("RGB", (64, 64), (200, 30, 30)).save(tmp_path / "plain.png")  # an image with no recipe in it

    def regenerated_and_checked():
        open_reproduce(page)
        page.locator("#png-drop input[type=file]").set_input_files(str(tmp_path / "seed4.png"))
        page.wait_for_function("!document.querySelector('#regenerate-png').disabled")
        page.locator("#regenerate-png").click()
        wait_for_value(page, "verdict", "pixel for pixel")
        settle(page)
        assert page.locator("#reproduced img").count() == 1 and page.locator("#verdict-anchor").is_enabled()

    def nothing_left():
        settle(page)
        assert value(page, "verdict") == ""
        assert page.locator("#reproduced img").count() == 0 and page.locator("#original img").count() == 0
        assert page.locator("#verdict-anchor").is_disabled() and page.locator("#regenerate-png").is_disabled()

    regenerated_and_checked()
    page.locator("#png-drop button[aria-label='Clear']").click()  # the file's x
    nothing_left()
    assert value(page, "png-notes") == ""
    regenerated_and_checked()
    page.locator("#png-drop button[aria-label='Clear']").click()  # the x, then another file, as the report did
    settle(page)
    page.locator("#png-drop input[type=file]").set_input_files(str(tmp_path / "plain.png"))
    page.wait_for_function("() => /cannot be read|Nothing was restored/"
                           ".test(document.querySelector('#png-notes textarea').value)")
    nothing_left()
    page.context.close()


def test_the_page_offers_a1111s_samplers_hires_fix_and_reads_prompts_as_a1111(browser, app_server):
    """After the page has settled: the prompt syntax starts at a1111 (and the box says so), the Scheduler menu
    lists A1111's samplers, and Hires fix and Sampler settings have their own groups."""
    from tests.browser.settle import open_settled, value

    page = open_settled(browser, app_server.url)
    page.get_by_text("Prompt syntax, emphasis and clip skip").click()  # their own group, first under the controls
    page.locator("#prompt-syntax input").wait_for()
    assert page.locator("#prompt-reading #emphasis").count() == 1 and page.locator("#prompt-reading #clip-skip").count()
    assert page.locator("#seed-more #emphasis").count() == 0, "not hidden under seed variation any more"
    assert value(page, "prompt-syntax") == "a1111"
    assert "A1111's syntax" in page.locator("#prompt").inner_text()
    for group in ("#hires-fix", "#sampler-settings"):
        assert page.locator(group).count() == 1
    page.locator("#scheduler input").click()
    page.get_by_role("option", name="DPM++ 2M (A1111)", exact=True).wait_for()
    page.context.close()


def test_screen_readers_hear_the_anchor_and_the_history_by_name(browser, app_server):
    """Issue 33: the anchor box was announced as "Textbox" and the history list as "Radio"."""
    from tests.browser.settle import open_settled

    page = open_settled(browser, app_server.url)
    snapshot = page.locator("body").aria_snapshot()
    assert 'textbox "Anchor"' in snapshot, snapshot[:2000]
    assert 'textbox "Textbox"' not in snapshot and 'radiogroup "Radio"' not in snapshot
    generate_grid(page, "3", 1, 1, settled=True)
    page.get_by_text("History", exact=True).first.click()
    timeline = page.locator("#timeline").aria_snapshot()
    assert "- text: History" in timeline and "Radio" not in timeline, timeline[:400]
    page.context.close()


def test_editing_the_prompt_after_picking_an_anchor_says_before_the_run_which_prompt_varies(
        browser, app_server):
    """Issue 33: "Regenerate variations from anchor" silently used the anchor's prompt; the note came after the run."""
    from tests.browser.settle import open_settled, settle, value

    page = open_settled(browser, app_server.url)
    generate_grid(page, "3", 1, 1, prompt="a red circle", settled=True)
    thumbnails(page, "grid").nth(0).click()
    settle(page)
    assert not page.locator("#vary-note").is_visible()
    page.locator("#prompt textarea").fill("a blue square")
    settle(page)
    assert page.locator("#vary-note").is_visible()
    assert value(page, "vary-note").startswith("Variations start from the anchor's prompt 'a red circle'")
    page.locator("#prompt textarea").fill("a red circle")
    settle(page)
    assert not page.locator("#vary-note").is_visible()
    page.context.close()
