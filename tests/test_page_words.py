"""The page speaks a user's words (issue 54): no environment variable, command-line flag or class name in what a
visitor reads (labels, hints, menus), and one progress display per run."""

import json
import re

import gradio as gr
from gradio.i18n import I18nData

from webui.page import scheduler_label

# What an operator reads in the docs and the server log, never a visitor on the page.
OPERATOR_WORDS = re.compile(r"SEEDLAB_[A-Z_]+|--[a-z][a-z-]+|\b[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+(?:Scheduler|Pipeline)\b")


def english(value):
    """A text as an English browser shows it: a translation key (an I18n object, or the marked text a button or a
    Markdown keeps) is its English text."""
    if isinstance(value, str) and value.startswith("__i18n__"):
        return json.loads(value.removeprefix("__i18n__"))["key"]
    return value.key if isinstance(value, I18nData) else value


def visible_texts(demo: gr.Blocks) -> list[str]:
    """Every label, hint, placeholder, value text and menu label of the page's components (a translated one by its
    English key, webui/i18n.py)."""
    texts = []
    for block in demo.blocks.values():
        for name in ("label", "info", "placeholder"):
            value = english(getattr(block, name, None))
            if isinstance(value, str):
                texts.append(value)
        if isinstance(block, (gr.Markdown, gr.Button)) and isinstance(english(getattr(block, "value", None)), str):
            texts.append(english(block.value))
        for choice in getattr(block, "choices", None) or []:
            texts.append(str(choice[0] if isinstance(choice, (tuple, list)) else choice))
    return texts


def test_no_operator_word_or_class_name_is_shown_on_the_page(tiny_page):
    demo, _, _ = tiny_page
    texts = visible_texts(demo)
    assert any("(diffusers)" in text for text in texts)  # the menu's diffusers schedulers, named in words
    shown = [text for text in texts if OPERATOR_WORDS.search(text)]
    assert shown == []


def test_a_diffusers_scheduler_is_named_in_a_users_words_and_sends_its_class_name():
    assert scheduler_label("DPMSolverMultistepScheduler") == "DPM++ 2M (diffusers)"
    assert scheduler_label("EulerAncestralDiscreteScheduler") == "Euler a (diffusers)"
    assert scheduler_label("DEISMultistepScheduler") == "DEIS Multistep (diffusers)"
    assert scheduler_label("FlowMatchEulerDiscreteScheduler") == "Flow Match Euler Discrete (diffusers)"


def test_a_run_shows_its_progress_on_its_gallery_only(tiny_page):
    demo, app, _ = tiny_page
    by_id = {block._id: block for block in demo.blocks.values()}
    for name, api in (("grid", "page_grid"),):
        (dependency,) = [dep for dep in demo.config["dependencies"] if dep.get("api_name") == api]
        assert [by_id[target].elem_id for target in dependency["show_progress_on"]] == [name]


def test_the_model_menu_says_what_this_server_runs_and_invites_no_hub_id():
    from webui.page import model_options

    one, several = model_options(1), model_options(3)
    assert one["interactive"] is False and several["interactive"] is True
    texts = [str(options["info"]) for options in (one, several)]
    assert all("hub" not in text and "folder" not in text for text in texts)
    assert "the model this server runs" in texts[0] and "the models this server offers" in texts[1]

