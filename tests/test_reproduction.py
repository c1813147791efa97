"""Reproduction verdicts: exact, how far off, which part of the environment differs; from links, PNGs, JSON."""

import dataclasses
import io
import json

import numpy as np
import pytest
from PIL import Image

import seedlab
from seedlab import Original, Recipe, compare, encode_link, original_from_png, original_from_text, save_png
from seedlab.serving.reproduction import environment_differences

STEPS = 3


@pytest.fixture(scope="module")
def result(model):
    return seedlab.generate(model, Recipe(prompt="a red circle", seed=5, model="tiny", num_inference_steps=STEPS))


def altered(image: Image.Image, levels: int, count: int) -> np.ndarray:
    pixels = np.asarray(image).copy()
    flat = pixels.reshape(-1, 3)
    flat[:count, 1] = (flat[:count, 1].astype(int) + levels) % 256  # `count` pixels, one channel each
    return pixels


def test_a_regenerated_link_is_an_exact_match(model, result):
    link = encode_link(result.recipe, result.fingerprint, result.environment, "http://x/")
    original = original_from_text(link)
    verdict = compare(seedlab.generate(model, original.recipe), original)
    assert verdict.exact and (verdict.max_difference, verdict.pixels_differing) == (None, None)
    assert verdict.environment_differences == ()
    assert "exact" in verdict.summary.lower()
    assert verdict.to_dict()["exact"] is True


def test_a_regenerated_png_is_an_exact_match_pixel_for_pixel(model, result, tmp_path):
    original = original_from_png(save_png(result, tmp_path / "a.png"))
    assert original.notes == () and original.environment == result.environment
    verdict = compare(seedlab.generate(model, original.recipe), original)
    assert verdict.exact and (verdict.max_difference, verdict.pixels_differing) == (0, 0)


def test_altered_pixels_say_how_far_off_and_the_summary_never_says_exact(result, tmp_path):
    path = save_png(result, tmp_path / "a.png")
    with Image.open(path) as image:
        info = image.info
        Image.fromarray(altered(image, 3, 10)).save(path, pnginfo=seedlab.png_info(result))  # metadata kept
    assert "seedlab" in info
    original = original_from_png(path)
    assert original.notes == ("the PNG's pixels do not match the fingerprint it records: the file was edited or "
                              "re-encoded",)
    verdict = compare(result, original)
    assert not verdict.exact
    assert (verdict.max_difference, verdict.pixels_differing) == (3, 10)
    assert "max difference 3 levels, 10 pixels differ" in verdict.summary
    assert "exact" not in verdict.summary.lower()


def test_without_the_original_pixels_a_different_fingerprint_says_so(result):
    verdict = compare(result, Original(result.recipe, "0" * 64, None))
    assert not verdict.exact and verdict.max_difference is None
    assert "original pixels are not here" in verdict.summary and "exact" not in verdict.summary.lower()
    verdict = compare(result, Original(result.recipe, None, None))
    assert "no original fingerprint" in verdict.summary and not verdict.exact


def test_a_different_size_is_a_difference(result):
    verdict = compare(result, Original(result.recipe, "0" * 64, None, np.zeros((8, 8, 3), np.uint8)))
    assert not verdict.exact and verdict.notes == ("size differs: the original is 8x8, the regenerated image 64x64",)
    assert "size differs" in verdict.summary


def test_environment_differences_name_the_part_full_or_compact(result):
    here = result.environment
    there = dataclasses.replace(here, threads=here.threads + 7, torch="2.12.0")
    assert environment_differences(here, there) == [f"torch: {here.torch} here, 2.12.0 there",
                                                    f"threads: {here.threads} here, {here.threads + 7} there"]
    switches = dataclasses.replace(here.switches, cudnn_tf32=not here.switches.cudnn_tf32)
    from_link = dataclasses.replace(here, torch="2.12.0", cublas_workspace_config=None, switches=switches)
    assert environment_differences(here, from_link) == [  # a link's environment leaves the cuBLAS setting unknown
        f"torch: {here.torch} here, 2.12.0 there",
        f"cudnn_tf32: {here.switches.cudnn_tf32} here, {not here.switches.cudnn_tf32} there",
    ]
    assert environment_differences(here, None) == []
    verdict = compare(result, Original(result.recipe, result.fingerprint, there))
    assert verdict.exact and "threads" in verdict.summary  # exact even though the environment differs


def test_recipe_json_is_a_bare_recipe_or_a_result_record(result):
    bare = original_from_text(json.dumps(result.recipe.to_dict()))
    assert (bare.recipe, bare.fingerprint, bare.environment) == (result.recipe, None, None)
    record = {"recipe": result.recipe.to_dict(), "fingerprint": result.fingerprint,
              "environment": result.environment.to_dict(), "seed": 5}
    full = original_from_text(json.dumps(record))
    assert (full.recipe, full.fingerprint, full.environment) == (result.recipe, result.fingerprint, result.environment)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("", "link_or_recipe is empty"),
        ("{not json", "recipe JSON is not valid"),
        ("[1]", "link"),
        ('{"prompt": "x", "seed": -1}', "seed"),
        ('{"prompt": "x", "colour": 1}', "colour"),
        ('{"recipe": {"prompt": "x"}, "fingerprint": "abc"}', "fingerprint"),
        ('{"recipe": {"prompt": "x"}, "environment": {"torch": 1}}', "environment"),
        ('{"recipe": {"prompt": "x"}, "extra": 1}', "extra"),
        ("http://x/?v=1&prompt=x&fp=" + "0" * 64 + "&steps=0", "steps"),
    ],
)
def test_bad_reproduction_input_is_an_error_naming_the_field(text, named):
    with pytest.raises(ValueError, match=named):
        original_from_text(text)


def test_a_png_file_object_is_read_too(result):
    buffer = io.BytesIO()
    result.image.save(buffer, format="PNG", pnginfo=seedlab.png_info(result))
    buffer.seek(0)
    original = original_from_png(buffer)
    assert original.fingerprint == result.fingerprint and np.array_equal(original.pixels, np.asarray(result.image))


# -- what a differing verdict says about the environment -------------------------------------------------

def _tampered(result) -> str:
    """Another image's fingerprint: the recipe regenerates, the pixels cannot match."""
    return ("0" if result.fingerprint[0] != "0" else "1") + result.fingerprint[1:]


def test_a_differing_verdict_names_what_the_original_does_not_record(result):
    old = dataclasses.replace(result.environment, cpu_isa=None, cpu_vendor=None)  # made before baselines existed
    verdict = compare(result, Original(result.recipe, _tampered(result), old))
    assert not verdict.exact and verdict.environment_differences == ()
    assert verdict.environment_unknown == ("its CPU kernels (made before SeedLab recorded a CPU baseline)",)
    assert "does not record its CPU kernels" in verdict.summary
    assert "same as far as known" not in verdict.summary
    assert verdict.to_dict()["environment_unknown"] == list(verdict.environment_unknown)
    nothing = compare(result, Original(result.recipe, _tampered(result), None))  # a recipe without an environment
    assert "does not record its environment" in nothing.summary


def test_a_differing_verdict_with_everything_recorded_blames_the_recipe_or_the_model(result):
    verdict = compare(result, Original(result.recipe, _tampered(result), result.environment))
    assert verdict.environment_unknown == () and verdict.environment_differences == ()
    assert "a link altered or mis-copied" in verdict.summary


def test_known_differences_come_first_and_unknown_parts_are_still_named(result):
    there = dataclasses.replace(result.environment, threads=result.environment.threads + 1, cpu_isa=None,
                                cpu_vendor=None)
    summary = compare(result, Original(result.recipe, _tampered(result), there)).summary
    assert summary.index("threads:") < summary.index("Not recorded by the original: its CPU kernels")


def test_only_an_original_without_a_baseline_is_retried_natively_and_only_when_it_differs(result):
    from seedlab.engine import cpu
    from seedlab.serving.reproduction import wants_native_retry

    old = dataclasses.replace(result.environment, cpu_isa=None, cpu_vendor=None)
    differs = compare(result, Original(result.recipe, _tampered(result), old))
    expected = cpu.is_x86() and not cpu.in_force().startswith("native")
    assert wants_native_retry(Original(result.recipe, _tampered(result), old), differs, "cpu") is expected
    assert not wants_native_retry(Original(result.recipe, _tampered(result), old), differs, "cuda")
    recorded = Original(result.recipe, _tampered(result), result.environment)  # it names its baseline: pinned
    assert not wants_native_retry(recorded, compare(result, recorded), "cpu")
    same = Original(result.recipe, result.fingerprint, old)
    assert not wants_native_retry(same, compare(result, same), "cpu")  # exact already
    assert not wants_native_retry(Original(result.recipe, None, None), differs, "cpu")  # nothing to compare with


def test_the_verdict_says_how_close_and_names_the_known_cause_first(result):
    """Within a few levels: the same image to the eye; many pixels far off: a different image, and the note
    that explains it (a sampler SeedLab does not run) comes before the environment."""
    pixels = np.asarray(result.image)
    note = "Sampler DPM adaptive has no clear diffusers equivalent: the model's default scheduler is used"
    close = compare(result, Original(result.recipe, None, None, pixels=altered(result.image, 2, 40)))
    assert "(within 2 levels at every pixel: the same image to the eye)" in close.summary
    far_pixels = ((pixels.astype(int) + 128) % 256).astype(np.uint8)  # every pixel 128 levels off
    far = compare(result, Original(result.recipe, None, None, pixels=far_pixels, notes=(note,)))
    assert far.pixels_far == far.pixels_total == pixels.shape[0] * pixels.shape[1]
    assert "(a different image: 100% of the pixels are more than 32 levels off)" in far.summary
    assert far.summary.index("Known causes: " + note) < far.summary.index("Not recorded by the original")
    assert "a link altered or mis-copied" not in far.summary
    plain = compare(result, Original(result.recipe, None, None, pixels=far_pixels, notes=("Model hash 1 is not "
                                                                                          "checked",)))
    assert "Known causes" not in plain.summary  # a note that changes nothing is not a cause
