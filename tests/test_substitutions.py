"""No silent substitution (issue 42): a sampler another tool ran with its own code is named where SeedLab runs
something else, the verdict says so, a name no tool lists is refused with the nearest names, and a ComfyUI sampler
takes its schedule in A1111's spelling too (issue 47)."""

import copy
import json

import numpy as np
import pytest
import torch
from PIL import Image

from seedlab import Recipe
from seedlab.engine.image import Result, fingerprint
from seedlab.engine.models import ModelStore
from seedlab.engine.recipe import RecipeError
from seedlab.files.comfyui import read_comfyui
from seedlab.files.infotext import read_infotext
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from seedlab.serving.reproduction import Original, compare
from tests.test_comfyui import DEFAULT_API


@pytest.fixture(scope="module")
def admission():
    return Admission(ModelStore(["embedded"], device=torch.device("cpu")), Limits())


def graph_with(sampler: str, schedule: str = "normal") -> str:
    graph = copy.deepcopy(DEFAULT_API)
    graph["3"]["inputs"].update(sampler_name=sampler, scheduler=schedule)
    return json.dumps(graph)


# ddpm, deis and lcm run as ComfyUI runs them now (tests/test_comfy_samplers_more.py), uni_pc and uni_pc_bh2 too
# (tests/test_unipc.py); plms and euler_a are no ComfyUI sampler SeedLab runs: a custom node's names, run as
# diffusers classes.
@pytest.mark.parametrize("sampler", ["plms", "euler_a"])
def test_a_comfyui_sampler_seedlab_does_not_run_as_comfyui_is_named_with_what_runs_instead(sampler):
    """uni_pc/simple came back 102 levels off and ddpm 39, with no note (the verdict said nothing differs)."""
    _, fields, notes = read_comfyui(graph_with(sampler))
    named = [note for note in notes if f"ComfyUI's sampler {sampler} is not one SeedLab runs" in note]
    assert len(named) == 1 and fields["scheduler"] in named[0] and "so the image differs" in named[0]


def test_a_comfyui_sampler_seedlab_runs_as_comfyui_is_not_named():
    _, fields, notes = read_comfyui(graph_with("dpmpp_2m", "karras"))
    assert (fields["scheduler"], fields["schedule"]) == ("dpmpp_2m", "karras")
    assert not any("runs instead" in note for note in notes)


@pytest.mark.parametrize("sampler", ["DDIM", "PLMS", "UniPC", "LCM"])
def test_a1111s_own_samplers_run_as_a1111_runs_them_and_are_not_named(sampler):
    """They ran as diffusers classes with a note; A1111's own code runs now (tests/test_a1111_timesteps.py)."""
    text = f"a cat\nSteps: 20, Sampler: {sampler}, CFG scale: 7, Seed: 5, Size: 64x64"
    fields, notes, _ = read_infotext(text)
    assert fields["scheduler"] == f"{sampler} (A1111)"
    assert not any("ran as A1111's own code" in note or "runs instead" in note for note in notes)


def test_the_verdict_names_the_substitution_instead_of_saying_nothing_differs():
    _, fields, notes = read_comfyui(graph_with("plms", "simple"))
    recipe = Recipe(prompt="a cat", scheduler=fields["scheduler"], width=64, height=64)
    theirs = Image.new("RGB", (64, 64), (10, 20, 30))
    ours = Image.new("RGB", (64, 64), (60, 20, 30))
    original = Original(recipe, fingerprint(theirs), None, np.asarray(theirs), tuple(notes))
    verdict = compare(Result(recipe=recipe, image=ours, fingerprint=fingerprint(ours), environment=None), original)
    assert "Known causes: ComfyUI's sampler plms is not one SeedLab runs" in verdict.summary
    assert "Nothing the original records differs" not in verdict.summary


@pytest.mark.parametrize(("word", "nearest"), [("dpmpp2m", "dpmpp_2m"), ("Euler ancestral", "euler_ancestral"),
                                                ("DPM++2M", "DPM++ 2M")])
def test_a_sampler_name_no_tool_lists_is_refused_with_the_nearest_names(admission, word, nearest):
    with pytest.raises(RecipeError) as error:
        admission.recipe({"prompt": "a cat", "scheduler": word})
    message = str(error.value)
    assert message.startswith("scheduler must be one of") and f"got {word!r} (nearest: " in message
    assert nearest in message.split("(nearest: ")[1]


@pytest.mark.parametrize(("written", "read"), [("Karras", "karras"), ("SGM Uniform", "sgm_uniform"),
                                               ("KL Optimal", "kl_optimal"), ("karras", "karras")])
def test_a_comfyui_sampler_takes_its_schedule_in_a1111s_spelling(admission, written, read):
    """`--scheduler dpmpp_2m --schedule Karras` was refused: "must be one of normal, karras, ... got Karras"."""
    recipe = admission.recipe({"prompt": "a cat", "scheduler": "dpmpp_2m", "schedule": written})
    assert (recipe.scheduler, recipe.schedule) == ("dpmpp_2m", read)
    kept = admission.recipe({"prompt": "a cat", "scheduler": "DPM++ 2M", "schedule": "Karras"})
    assert kept.schedule == "Karras"  # an A1111 sampler keeps A1111's word


def test_a_mangled_link_names_its_unknown_sampler_with_its_other_bad_keys():
    """`sampler=Nope` was not named beside a link's bad seed, steps and fp (issue 47)."""
    from seedlab.files.links import decode_link

    with pytest.raises(ValueError) as error:
        decode_link("v=1&prompt=a&sampler=Nope&steps=abc&seed=x&fp=123")
    message = str(error.value)
    for named in ("seed must be", "sampler (scheduler) must be a sampler a tool lists", "got 'Nope'", "steps (",
                  "fp must be"):
        assert named in message, message
    close = str(pytest.raises(ValueError, decode_link, "v=1&prompt=a&sampler=dpmpp2m&fp=" + "0" * 64).value)
    assert "(nearest: dpmpp_2m" in close
    for name in ("Euler a", "DPM++ 2M Karras", "dpmpp_2m", "EulerDiscreteScheduler", "default"):
        assert decode_link(f"v=1&prompt=a&sampler={name.replace('+', '%2B')}&fp=" + "0" * 64)[0].scheduler == name
