"""InvokeAI's dream lines of every era, and the `Key: value` texts and objects of diffusers front ends."""

import json

import pytest

from seedlab.files.invokeai_legacy import read_dream, read_invokeai_legacy
from seedlab.files.keyvalue import is_key_value, read_text
from seedlab.files.metadata import read_chunks

WANT = {"seed": 42, "num_inference_steps": 50, "guidance_scale": 7.5, "width": 512, "height": 768}


@pytest.mark.parametrize("line", [
    '"a red fox [blurry, ugly]" -s 50 -S 42 -W 512 -H 768 -C 7.5 -A k_lms',
    'a red fox [blurry, ugly] -s 50 -S 42 -W 512 -H 768 -C 7.5 -A k_lms',
    '"a red fox [blurry, ugly]" -s50 -S42 -W512 -H768 -C7.5 -Ak_lms',
    'a red fox [blurry, ugly] --steps 50 --seed=42 --width 512 --height=768 --cfg_scale 7.5 --sampler k_lms',
    'a red fox [blurry, ugly] -s 50 -S 42 -W 512 -H 768 -C 7.5 -A k_lms --seamless -I init.png -f 0.75',
])
def test_dream_lines_of_every_era(line):
    name, fields, _ = read_dream(line)
    assert name == "InvokeAI (dream)"
    assert (fields["prompt"], fields["negative_prompt"]) == ("a red fox", "blurry, ugly")
    assert {key: fields[key] for key in WANT} == WANT and fields["scheduler"] == "LMSDiscreteScheduler"


def test_a_dream_line_with_an_odd_value_keeps_the_rest():
    _, fields, notes = read_dream('"a fox" -s fifty -S 42 -W 512 -H 768 -C 7.5')
    assert "num_inference_steps" not in fields and fields["seed"] == 42
    assert any("-s: fifty could not be read" in note for note in notes)


def test_sd_metadata_of_every_era():
    image = {"prompt": [{"prompt": "a red fox [blurry, ugly]", "weight": 1.0}], "steps": 50, "cfg_scale": 7.5,
             "seed": 42, "width": 512, "height": 768, "sampler": "k_lms", "type": "txt2img", "variations": []}
    v2 = {"model": "stable diffusion", "model_weights": "stable-diffusion-1.5", "app_version": "2.2.4",
          "image": image}
    rfc = {"model": "stable diffusion", "model_id": "stable-diffusion-1.4", "app_id": "lstein/stable-diffusion",
           "images": [image]}
    flat = {"prompt": "a red fox [blurry, ugly]", "iterations": "1", "steps": "50", "cfg_scale": "7.5",
            "sampler_name": "k_lms", "width": "512", "height": "768", "seed": "42"}
    for data in (v2, rfc, flat):
        name, fields, _ = read_invokeai_legacy(json.dumps(data))
        assert (fields["prompt"], fields["negative_prompt"]) == ("a red fox", "blurry, ugly")
        assert {key: fields[key] for key in WANT} == WANT and fields["scheduler"] == "LMSDiscreteScheduler"


@pytest.mark.parametrize("text", [
    "Prompt: a red fox\nNegative prompt: blurry\nSeed: 42\nSteps: 50\nGuidance scale: 7.5\nSize: 512x768",
    "prompt: a red fox, negative_prompt: blurry, seed: 42, steps: 50, cfg: 7.5, width: 512, height: 768",
    "a red fox\nNegative: blurry\nSEED: 42\nnum_inference_steps: 50\nCFG Scale: 7.5\nResolution: 512 x 768",
    "Positive prompt: a red fox\nNegative Prompt: blurry\nSize: (512, 768)\nSeed=42\nSteps=50\nScale=7.5",
])
def test_key_value_layouts(text):
    assert is_key_value(text)
    reading = read_chunks({"parameters": text})
    assert reading.format == "diffusers-style text"
    assert (reading.fields["prompt"], reading.fields["negative_prompt"]) == ("a red fox", "blurry")
    assert {key: reading.fields[key] for key in WANT} == WANT


def test_a1111_text_stays_a1111():
    text = "a red fox\nNegative prompt: blurry\nSteps: 50, Sampler: Euler a, CFG scale: 7.5, Seed: 42, Size: 512x768"
    assert not is_key_value(text)
    reading = read_chunks({"parameters": text})
    assert reading.format == "A1111" and reading.fields["prompt"] == "a red fox"


def test_json_objects_and_separate_chunks():
    data = {"Prompt": "a red fox", "Negative Prompt": "blurry", "Seed": 42, "Steps": 50, "Guidance Scale": 7.5,
            "Size": "512x768", "Scheduler": "DPMSolverMultistepScheduler", "App": "HunyuanDiT"}
    reading = read_chunks({"parameters": json.dumps(data)})
    assert {key: reading.fields[key] for key in WANT} == WANT
    assert reading.fields["scheduler"] == "DPMSolverMultistepScheduler"
    assert any("App" in note for note in reading.notes)
    chunks = {"prompt": "a red fox", "negative_prompt": "blurry", "seed": "42", "steps": "50",
              "guidance_scale": "7.5", "width": "512", "height": "768"}
    assert {key: read_chunks(chunks).fields[key] for key in WANT} == WANT
    described = read_chunks({"Description": "a red fox\nSeed: 42\nSteps: 50\nGuidance scale: 7.5\nSize: 512x768"})
    assert described.fields["prompt"] == "a red fox" and described.fields["seed"] == 42


def test_one_odd_value_loses_that_field_only():
    _, fields, notes = read_text("Prompt: a fox\nSeed: -1\nSteps: 30\nSize: big")
    assert fields == {"prompt": "a fox", "num_inference_steps": 30}
    assert len([note for note in notes if "could not be read" in note]) == 2


def test_a_prompt_keeps_its_own_colons():
    _, fields, notes = read_text("Prompt: a fox, style: ink, mood: calm\nSeed: 1\nFoo: bar")
    assert fields["prompt"] == "a fox, style: ink, mood: calm" and any("Foo" in note for note in notes)


def test_hostile_texts_cost_linear_time_and_one_line():
    with pytest.raises(ValueError, match="at most"):
        read_text("Prompt: " + "a," * 40_000)
    _, fields, _ = read_text("Prompt: x\n" + "Seed: 1," * 7000)
    assert fields["seed"] == 1
    with pytest.raises(ValueError, match="at most"):
        read_dream("a " + "-s 1 " * 20_000)
