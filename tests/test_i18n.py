"""The page's words in Chinese (webui/i18n.py): refusals by the request's language, English untouched, and a table
Gradio's front end can show as it is."""

import re
from types import SimpleNamespace

import pytest

from seedlab.engine.recipe import SPECS, RecipeError
from seedlab.engine.seeds import parse_seeds, random_seeds
from seedlab.engine.spec import FieldError
from seedlab.serving.limits import Limits
from tests.test_page_words import visible_texts
from webui.fields import label_message
from webui.i18n import ZH_CN, language


def visitor(accept_language: str) -> SimpleNamespace:
    return SimpleNamespace(headers={"accept-language": accept_language})


def test_the_language_is_the_browsers_first_choice():
    assert language(visitor("zh-CN,zh;q=0.9,en;q=0.8")) == "zh-CN"
    assert language(visitor("zh")) == "zh-CN"
    assert language(visitor("en-US,en;q=0.9,zh-CN;q=0.8")) == "en"
    assert language(visitor("zh-TW")) == "en"  # traditional Chinese: no table yet, English rather than the wrong one
    assert language(None) == "en"


def test_a_refusal_names_the_field_by_its_chinese_label_and_keeps_the_numbers():
    error = RecipeError([FieldError("num_inference_steps", "must be at most 150 on this server, got 180"),
                         FieldError("prompt", "is missing")])
    assert label_message(error, "zh-CN") == "步数：在此服务器上最多为 150，当前为 180；提示词：不能为空"
    assert label_message(error) == "Steps must be at most 150 on this server, got 180; Prompt is missing"


def test_a_bad_seeds_box_is_refused_in_chinese_and_an_unknown_message_stays_english():
    bad = ValueError('seeds: \'abc\' is not a seed; use whole numbers from 0 to 18446744073709551615, ranges like '
                     '"0-7" and commas, such as "3, 17, 99"')
    assert label_message(bad, "zh-CN").startswith("种子：'abc' 不是有效的种子")
    assert label_message(bad, "en") == str(bad)
    assert label_message(ValueError("something new"), "zh-CN") == "something new"


@pytest.mark.parametrize("refuse", [lambda: parse_seeds("abc"), lambda: parse_seeds("7-3"),
                                    lambda: parse_seeds("0-9999"), lambda: random_seeds(0),
                                    lambda: Limits().check_count(10_000, "seeds")])
def test_the_seeds_refusals_made_by_the_backend_have_chinese(refuse):
    with pytest.raises(ValueError) as refused:
        refuse()
    chinese = label_message(refused.value, "zh-CN")
    assert chinese != str(refused.value) and not re.search(r"[a-z]{4,}", chinese), chinese  # no English word left


def test_every_field_has_a_chinese_label_and_no_text_needs_a_message_formats_escape():
    assert all(spec.label in ZH_CN for spec in SPECS.values())
    # The front end formats each text as an ICU message: braces, tags and apostrophes would change what it shows.
    assert [text for text in ZH_CN.values() if re.search(r"[{}<>']", text)] == []


# Keys the tiny page does not show: the prompt's hints for other models, and what the page's scripts set.
ELSEWHERE = {"Ctrl+Enter generates",
             "Ctrl+Enter generates; read with A1111's syntax: (word:1.2), [word], BREAK (Prompt syntax)",
             "this model is unconditional: leave it empty (Ctrl+Enter generates)", "Generating…",
             "the models this server offers"}  # the Model menu's hint on a server of several models


def test_every_chinese_text_translates_a_text_the_page_shows(tiny_page):
    """An English text edited on the page and not here would lose its Chinese without a word: the key must match
    (a field's label may be only in refusals: the page has a seeds box, not a seed field)."""
    shown = set(visible_texts(tiny_page[0]))
    labels = {spec.label for spec in SPECS.values()}
    assert [key for key in ZH_CN if key not in shown | labels | ELSEWHERE] == []


def verdicts() -> dict:
    """Verdicts of each kind, as seedlab.serving.reproduction writes them."""
    from seedlab.serving.reproduction import Verdict

    base = {"fingerprint": "a" * 64, "original_fingerprint": "b" * 64, "environment_differences": ()}
    return {
        "exact": Verdict(exact=True, max_difference=0, pixels_differing=0, anywhere=True, **base),
        "exact elsewhere": Verdict(exact=True, max_difference=None, pixels_differing=None,
                                   **{**base, "environment_differences": ("threads: 2 here, 1 there",)}),
        "lossy": Verdict(exact=False, max_difference=3, pixels_differing=41, lossy_original=True, **base),
        "nothing to compare": Verdict(exact=False, max_difference=None, pixels_differing=None,
                                      **{**base, "original_fingerprint": None}),
        "close": Verdict(exact=False, max_difference=2, pixels_differing=17, pixels_far=0, pixels_total=4096,
                         environment_unknown=("its CPU kernels",), **base),
        "different": Verdict(exact=False, max_difference=200, pixels_differing=4000, pixels_far=3000,
                             pixels_total=4096, notes=("sampler 'Foo' is not supported",), **base),
        "unmeasured": Verdict(exact=False, max_difference=None, pixels_differing=None, **base),
    }


@pytest.mark.parametrize("kind", list(verdicts()))
def test_a_verdict_reads_in_chinese_with_its_numbers_and_causes_kept(kind):
    from webui.verdict_words import said

    english = verdicts()[kind].summary
    chinese = said(english, "zh-CN")
    assert said(english, "en") == english
    assert re.search(r"[\u4e00-\u9fff]", chinese), chinese
    # Every number the English gives is still there, and a cause no pattern knows stays as written.
    assert sorted(re.findall(r"\d+", chinese)) == sorted(re.findall(r"\d+", english)), (english, chinese)
    for kept in ("threads: 2 here, 1 there", "sampler 'Foo' is not supported", "its CPU kernels"):
        assert (kept in chinese) == (kept in english)
    # No fixed English sentence is left: what remains in Latin letters is a named setting or value.
    left = re.sub(r"threads: 2 here, 1 there|sampler 'Foo' is not supported|its CPU kernels|x86-64|ARM|torch|"
                  r"diffusers|CPU|JPEG|WebP", "", chinese)
    assert not re.search(r"[A-Za-z]{3,}", left), chinese


def test_every_chinese_history_template_keeps_its_english_templates_values():
    from webui.history_words import ZH_CN as HISTORY_ZH_CN
    from webui.history_words import phrase

    names = re.compile(r"{(\w+)}")
    for english, chinese in HISTORY_ZH_CN.items():
        assert sorted(names.findall(english)) == sorted(names.findall(chinese)), english
        assert not re.search(r"[A-Za-z]{3,}", names.sub("", chinese)), chinese  # no English left in the Chinese
    assert phrase("{kind} ({count})", "zh-CN", kind="nudges", count=4) == "微调（4）"
    assert phrase("{kind} ({count})", "en", kind="nudges", count=4) == "nudges (4)"
    assert phrase("not a known template {x}", "zh-CN", x=1) == "not a known template 1"


def test_the_commonest_notes_on_another_tools_fields_read_in_chinese_with_the_tools_words_kept():
    from seedlab.files.infotext import read_infotext
    from webui.verdict_words import said

    _, notes, _ = read_infotext("a red circle\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 42, Size: 512x512, "
                                "Tiling: True, Sigma churn: lots, ADetailer model: face_yolov8n.pt, "
                                "SGM noise multiplier: True")
    chinese = [said(note, "zh-CN") for note in notes]
    assert len(chinese) == 5 and all(re.search(r"[\u4e00-\u9fff]", note) for note in chinese), chinese
    for kept in ("Tiling: True", "ADetailer model: face_yolov8n.pt", "Sigma churn: lots", "SGM noise multiplier",
                 "rng cuda-philox"):  # the tool's fields and values, and SeedLab's setting, as written
        assert any(kept in note for note in chinese), kept
    assert not any(re.search(r"SeedLab equivalent|is ignored|left at its default|does not say", note)
                   for note in chinese), chinese
    assert [said(note, "en") for note in notes] == notes


def test_a_link_and_a_plot_that_list_several_problems_are_refused_in_chinese_with_each_problem_kept():
    from seedlab.files.links import decode_link
    from webui.compare import axes_of
    from webui.i18n import message_text

    with pytest.raises(ValueError) as link:
        decode_link("http://x/?seed=abc&prompt=x")
    chinese = message_text(str(link.value), "zh-CN")
    assert chinese.startswith("链接：缺少 v（") and "链接需要 v, prompt, fp" in chinese, chinese
    assert "'abc'" in chinese and "18446744073709551615" in chinese
    with pytest.raises(ValueError) as plot:
        axes_of({"x": "cfg: 1, 2", "y": "stepz: 1, 2"})
    chinese = message_text(str(plot.value), "zh-CN")
    assert "X 轴：'cfg' 不是可用的轴" in chinese and "Y 轴：'stepz' 不是可用的轴" in chinese, chinese  # both at once
    assert "CFG Scale (guidance_scale)" in chinese and "Steps (num_inference_steps)" in chinese  # A1111's labels
    for text in (str(link.value), str(plot.value)):
        left = message_text(text, "zh-CN")
        assert not re.search(r"is missing|a link needs|is not an axis|did you mean|must be", left), left
        assert message_text(text, "en") == text


def test_the_servers_budget_refuses_in_chinese_with_its_durations():
    from seedlab.serving.budget import Ledger
    from webui.i18n import message_text

    ledger = Ledger(Limits(max_request_seconds=60, visitor_seconds=100))
    with pytest.raises(ValueError) as too_long:
        ledger.charge("v", 600)
    ledger.charge("v", 60)
    with pytest.raises(ValueError) as used_up:
        ledger.charge("v", 50)
    for error, numbers in ((too_long, ("10 min", "60 s")), (used_up, ("60 s", "2 min"))):
        chinese = message_text(str(error.value), "zh-CN")
        assert re.search(r"[\u4e00-\u9fff]", chinese) and all(n in chinese for n in numbers), chinese
        assert not re.search(r"[a-z]{4,}", chinese), chinese
