"""InvokeAI's Dream line beyond plain generations: inline init images, its CLI's commands, and the prompt as typed
beside sd-metadata's normalised weights (ldm/invoke/CLI.py prepare_image_metadata, args.py dream_prompt_str)."""

import base64
import json
import time

import pytest

from seedlab.files.invokeai_legacy import read_dream
from seedlab.files.metadata import read_chunks

INLINE = "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 1900).decode()  # ~650 KB, as in the docs


def test_an_inline_init_image_is_dropped_and_the_seed_after_it_read():
    line = (f'"a smiling man, oil painting" -s50 -W512 -H512 -C7.5 -Ak_lms -I{INLINE} --fit -f0.46 -G0.8 '
            "-S2439087110")
    assert len(line) > 600_000
    name, fields, notes = read_dream(line)
    assert name == "InvokeAI (dream)" and fields["prompt"] == "a smiling man, oil painting"
    assert (fields["seed"], fields["num_inference_steps"], fields["guidance_scale"]) == (2439087110, 50, 7.5)
    assert any("inline" in note for note in notes)
    _, spaced, _ = read_dream(f'"a fox" -s 20 --init_img={INLINE} -S 7')
    assert spaced["seed"] == 7


def test_hostile_dream_lines_stay_cheap_and_one_line():
    with pytest.raises(ValueError, match="at most") as error:
        read_dream('"a" -I ' + INLINE * 4)  # over the raw ceiling: refused before any scan
    assert "\n" not in str(error.value)
    started = time.perf_counter()
    with pytest.raises(ValueError, match="at most"):
        read_dream('"a" ' + "data:x " * 250_000)  # many data: words that are not URLs: kept, so the cap holds
    _, fields, _ = read_dream('"a" -s 5 ' + " -Idata:image/png;base64,AAAA" * 15_000 + " -S 9")
    assert fields["seed"] == 9
    with pytest.raises(ValueError, match="at most"):  # what is left of the line still has MAX_TEXT
        read_dream('"a" -s 5 ' + " -I data:image/png;base64,AAAA" * 60_000 + " -S 9")
    assert time.perf_counter() - started < 3
    _, fields, _ = read_dream('"big data: a chart" -s 5 -S 1')  # "data:" in a prompt is text
    assert fields["prompt"] == "big data: a chart"


def test_fix_states_the_settings_of_its_source_but_no_prompt():
    line = ('!fix "./outputs/img-samples/000017.3101263317.png" -s 50 -S 1432851274 -W 512 -H 512 -C 7.5 '
            "-I ./outputs/img-samples/000017.3101263317.png -A ddim -f 0.83")
    _, fields, notes = read_dream(line)
    assert "prompt" not in fields and fields["seed"] == 1432851274 and fields["scheduler"] == "DDIMScheduler"
    assert any("!fix" in note for note in notes)
    stored = {"model": "stable diffusion", "app_version": "v1.15", "image": {
        "prompt": [{"prompt": "./outputs/img-samples/000017.3101263317.png", "weight": 1.0}], "seed": 1432851274,
        "steps": 50, "cfg_scale": 7.5, "width": 512, "height": 512, "sampler": "ddim"}}
    reading = read_chunks({"sd-metadata": json.dumps(stored), "Dream": line})
    assert "prompt" not in reading.fields and reading.fields["seed"] == 1432851274
    _, fields, _ = read_dream('!fix ./out/1.png -s 50 -S 3 -D top 64 --new_prompt "a tall castle [fog]"')
    assert (fields["prompt"], fields["negative_prompt"], fields["seed"]) == ("a tall castle", "fog", 3)


@pytest.mark.parametrize(("line", "why"), [
    ("!mask ./test-pictures/curly.png -tm hair 0.5", "!mask"),
    ("!fetch ./outputs/000001.png", "!fetch"),
    ("<too lazy to implement>", "no switches"),
])
def test_lines_that_state_no_recipe_are_refused(line, why):
    with pytest.raises(ValueError, match=why) as error:
        read_chunks({"Dream": line})
    assert "\n" not in str(error.value)


def test_dream_command_and_a_quoted_prompt_without_switches_are_read():
    _, fields, _ = read_dream('!dream "a red fox" -s 30 -S 5')
    assert (fields["prompt"], fields["seed"]) == ("a red fox", 5)
    _, fields, _ = read_dream('"a red fox"')
    assert fields["prompt"] == "a red fox"


def test_the_prompt_as_typed_beside_normalised_weights():
    stored = {"model": "stable diffusion", "app_version": "v1.15", "image": {"prompt": [
        {"prompt": "blue sphere", "weight": 0.125}, {"prompt": "red cube", "weight": 0.375},
        {"prompt": "hybrid", "weight": 0.5}], "seed": 3575531754, "steps": 50, "cfg_scale": 7.5, "width": 512,
        "height": 512, "sampler": "k_lms"}}
    dream = '"blue sphere:0.25 red cube:0.75 hybrid" -s 50 -S 3575531754 -W 512 -H 512 -C 7.5 -A k_lms'
    reading = read_chunks({"sd-metadata": json.dumps(stored), "Dream": dream})
    assert reading.fields["prompt"] == "blue sphere:0.25 red cube:0.75 hybrid"
    assert [note for note in reading.notes if "weighted parts" in note and "Dream" in note]
    alone = read_chunks({"sd-metadata": json.dumps(stored)})  # no Dream: the stored parts, as InvokeAI reads them
    assert alone.fields["prompt"] == "blue sphere:0.125,red cube:0.375,hybrid:0.5"
    broken = read_chunks({"sd-metadata": json.dumps(stored), "Dream": "<too lazy to implement>"})
    assert broken.fields["seed"] == 3575531754  # a Dream with no recipe leaves sd-metadata's reading whole
