"""The page speaks the browser's language (issue 54, item 7): a zh-CN browser reads Chinese labels, buttons and
refusals; an en-US one reads the page exactly as it is written (the other browser tests read its English)."""

from tests.browser.settle import open_settled, settle


def page_in(browser, url: str, locale: str):
    """A settled page in a fresh context whose browser language is `locale`, as a visitor's browser sends it."""
    return open_settled(browser, url, locale=locale)


def refusal(page, seeds: str, steps: str, button: str = "#generate") -> str:
    """The message `button` shows for these seeds and steps, once the page has settled; the toast is closed and
    gone before this returns, so the next refusal's toast is the only one."""
    page.locator("#seeds textarea").fill(seeds)
    page.locator("#num-inference-steps input").fill(steps)
    page.locator(button).click()
    toast = page.locator(".toast-body")
    toast.first.wait_for()
    text = toast.first.inner_text()
    settle(page)
    toast.locator(".toast-close").first.click()
    page.wait_for_function("() => document.querySelectorAll('.toast-body').length === 0")
    return text


def test_a_chinese_browser_reads_chinese_labels_buttons_and_refusals(browser, app_url):
    page = page_in(browser, app_url, "zh-CN")
    assert "提示词" in page.locator("#prompt").inner_text()
    assert "种子" in page.locator("#seeds").inner_text()
    assert "步数" in page.locator("#num-inference-steps").inner_text()
    assert page.locator("#generate").inner_text().strip() == "生成网格"
    assert page.locator("#stop").inner_text().strip() == "停止"
    assert page.get_by_text("高清修复（A1111 与 ComfyUI 采样器）").is_visible()  # an accordion's title
    assert page.get_by_text("选择种子，生成网格").is_visible()  # the note at the top (Markdown)
    assert "不是有效的种子" in refusal(page, "abc", "2")
    assert "步数：在此服务器上最多为 " in refusal(page, "1", "180")  # a limit, its field by its Chinese label
    assert "请先选择锚点" in refusal(page, "1", "2", "#vary")  # one the page raises itself
    assert page.locator("#generate").inner_text().strip() == "生成网格"  # ready again, in Chinese
    page.context.close()


def test_an_english_browser_reads_the_page_as_written(browser, app_url):
    page = page_in(browser, app_url, "en-US")
    assert "Prompt" in page.locator("#prompt").inner_text()
    assert "Seeds" in page.locator("#seeds").inner_text()
    assert page.locator("#generate").inner_text().strip() == "Generate grid"
    assert "is not a seed" in refusal(page, "abc", "2")
    page.context.close()


def test_a_chinese_browser_reads_the_verdict_in_chinese(browser, app_url):
    """A recipe pasted into the reproduction panel is regenerated: with no original to compare, the verdict says so
    in Chinese (the /reproduce API's own verdict stays English: data for scripts)."""
    from tests.browser.pages import wait_for_value

    page = page_in(browser, app_url, "zh-CN")
    page.get_by_text("复现链接、配方或图像").click()
    page.locator("#link-or-recipe textarea").fill('{"prompt": "a red circle", "seed": 3, "num_inference_steps": 2}')
    page.locator("#reproduce").click()
    verdict = wait_for_value(page, "verdict", "已重新生成")
    settle(page)
    assert verdict.startswith("已重新生成，但没有原图的指纹或图像可供比较"), verdict
    assert "Regenerated" not in verdict
    page.context.close()
