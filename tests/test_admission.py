"""Admission: untrusted values become recipes the server can run, checked without loading any model."""

import json
import shutil

import pytest
import torch

from seedlab.engine.models import ModelStore
from seedlab.engine.recipe import RecipeError
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from tests.tiny import save_tiny_pipeline


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Two model folders: the tiny one (64x64 native) and a copy whose UNet says it was trained at 128x128."""
    small = save_tiny_pipeline(tmp_path_factory.mktemp("small"))
    large = tmp_path_factory.mktemp("large") / "model"
    shutil.copytree(small, large)
    config = json.loads((large / "unet" / "config.json").read_text())
    (large / "unet" / "config.json").write_text(json.dumps({**config, "sample_size": 32}))
    return str(small), str(large)


@pytest.fixture()
def admission(folders):
    return Admission(ModelStore(list(folders), device=torch.device("cpu")), Limits(max_prompt_chars=50))


def test_unset_fields_take_the_chosen_models_defaults_and_nothing_is_loaded(admission, folders):
    small, large = folders
    assert (admission.recipe({"prompt": "x"}).width,
            admission.recipe({"prompt": "x", "model": large}).width) == (64, 128)
    recipe = admission.recipe({"prompt": "x", "model": large, "num_inference_steps": 20.0,
                               "seed": "18446744073709551615"})
    assert (recipe.height, recipe.guidance_scale, recipe.num_inference_steps, recipe.seed) == (128, 7.5, 20, 2**64 - 1)
    assert admission.store._loaded == {}  # validation read config files only


def test_every_bad_field_is_named_at_once(admission):
    with pytest.raises(RecipeError) as error:
        admission.recipe({"prompt": "x", "num_inference_steps": 2.5, "width": 30, "model": "../etc",
                          "seed_resize_from": "9x9"})
    assert [e.field for e in error.value.errors] == ["model", "num_inference_steps", "width", "seed_resize_from"]


def test_the_server_refuses_what_it_does_not_serve(admission):
    with pytest.raises(RecipeError) as error:
        admission.recipe({"prompt": "x", "dtype": "float16", "scheduler": "NoSuchScheduler"})
    assert {e.field for e in error.value.errors} == {"dtype", "scheduler"}
    assert "must be float32 on this server" in str(error.value)
    with pytest.raises(RecipeError, match="rng cannot be used here: rng numpy-pcg64 cannot drive"):
        admission.recipe({"prompt": "x", "rng": "numpy-pcg64", "scheduler": "EulerAncestralDiscreteScheduler"})


def test_joined_variation_prompts_are_held_to_the_prompt_limit(admission):
    assert len(admission.variations({"prompt": "x" * 40, "seed": 1}, [", short"])) == 2
    with pytest.raises(ValueError, match="prompt must be at most 50 characters on this server"):
        admission.variations({"prompt": "x" * 40, "seed": 1}, [", short", ", this one is far too long"])


def test_a_png_from_another_server_is_mapped_with_notes(admission, folders):
    from seedlab import Recipe
    from seedlab.serving.reproduction import Original

    original = Original(Recipe(prompt="x", model="someone/else", dtype="bfloat16", scheduler="NoSuch"), None, None)
    admission_of_file = admission.admit_file(original)
    assert admission_of_file.refused is None and admission_of_file.nearest is None
    admitted = admission_of_file.original
    assert (admitted.recipe.model, admitted.recipe.dtype,
            admitted.recipe.scheduler) == (folders[0], "float32", "default")
    assert len(admitted.notes) == 3
    with pytest.raises(RecipeError, match="model must be one of the models on this server"):
        admission.original(original)


def test_a_schedule_the_scheduler_cannot_make_is_refused_in_words(admission):
    with pytest.raises(RecipeError, match="num_inference_steps cannot be 1 with PNDMScheduler: use more steps"):
        admission.recipe({"prompt": "x", "scheduler": "PNDMScheduler", "num_inference_steps": 1})
    admission.recipe({"prompt": "x", "scheduler": "PNDMScheduler", "num_inference_steps": 20})


def test_the_nearest_runnable_recipe_keeps_the_seed_and_draws_the_noise_at_the_original_size(folders):
    from seedlab.engine.recipe import Recipe
    from seedlab.serving.budget import Speed

    speed = Speed.fit((64 * 64, 0.01), (128 * 128, 0.04))  # 0.01 s a step at 64x64, growing with the pixels
    admission = Admission(ModelStore([folders[0]], device=torch.device("cpu")),
                          Limits(max_size=1024, max_steps=30, max_request_seconds=20), speed)
    novelai = Recipe(prompt="a castle", seed=7, width=832, height=1216, num_inference_steps=40, model=folders[0])
    nearest = admission.nearest(novelai)
    assert nearest.seed == 7 and nearest.prompt == "a castle" and nearest.num_inference_steps == 30
    assert nearest.seed_resize_from == (832, 1216) and nearest.width % 8 == 0 and nearest.height % 8 == 0
    assert nearest.height <= 1024 and abs(nearest.width / nearest.height - 832 / 1216) < 0.02
    assert speed.seconds(nearest) <= 20 < speed.seconds(nearest.replace(width=nearest.width + 64))
    admission.recipe(nearest.to_dict())  # runs here
    with pytest.raises(ValueError, match="would take about"):
        admission.price(novelai.replace(num_inference_steps=30))
    # Issue 54: a text over the limit is cut within it, the size logic as before.
    wordy = admission.nearest(novelai.replace(prompt="a castle, on a hill, " * 40, negative_prompt="x" * 600))
    assert len(wordy.prompt) <= 500 and wordy.prompt.endswith("on a hill, a castle") and wordy.height <= 1024
    assert wordy.negative_prompt == "x" * 500 and wordy.seed_resize_from == (832, 1216)
    short = novelai.replace(width=128, height=128, num_inference_steps=20, prompt="a castle, " * 60)
    assert admission.nearest(short).replace(prompt=short.prompt) == short.replace(model=folders[0])


def test_a_text_too_long_is_shortened_at_its_last_part_that_fits():
    from seedlab.serving.admission import shortened

    assert shortened("a red circle", 500) == "a red circle"
    assert shortened("blurry, " * 70, 500) == ", ".join(["blurry"] * 62)  # a comma within the limit
    assert shortened("one two three four", 12) == "one two"  # no comma: its last whole word
    assert shortened("x" * 20, 10) == "x" * 10  # no boundary in the second half: cut at the limit
    assert shortened("a, " + "b" * 30, 20) == "a, " + "b" * 17  # a comma too early loses too much: cut at the limit


def test_hundreds_of_cells_with_a_slow_scheduler_cost_what_one_does(admission):
    # Issue 34: a history restore of 256 KDPM2 cells took 61 s of server CPU (each check built a scheduler,
    # 0.2 to 1 s for KDPM2); now each scheduler is built once per model, and each answer is kept.
    import time

    values = {"prompt": "a red circle", "scheduler": "KDPM2AncestralDiscreteScheduler", "num_inference_steps": 20}
    admission.recipe({**values, "seed": 0})  # the scheduler is built here, once
    start = time.perf_counter()
    for seed in range(256):
        admission.recipe({**values, "seed": seed, "prompt": f"a red circle {seed}"})
    assert time.perf_counter() - start < 2.0
    with pytest.raises(RecipeError, match="rng cannot be used here"):  # refusals are kept, and still refuse
        admission.recipe({**values, "seed": 1, "rng": "cuda-philox"})
    with pytest.raises(RecipeError, match="rng cannot be used here"):
        admission.recipe({**values, "seed": 2, "rng": "cuda-philox"})


def test_a_scheduler_handed_out_is_a_fresh_one_equal_to_a_new_build(folders):
    store = ModelStore(["embedded"])
    info = store.info("embedded")
    first, second = info.make_scheduler("KDPM2DiscreteScheduler"), info.make_scheduler("KDPM2DiscreteScheduler")
    first.set_timesteps(7)  # stepping one copy changes nothing in the next
    for made in (second, info.make_scheduler("KDPM2DiscreteScheduler")):
        fresh = info.schedulers["KDPM2DiscreteScheduler"].from_config(info.scheduler_config)
        assert made is not first and made.num_inference_steps == fresh.num_inference_steps != 7
        assert torch.equal(made.sigmas, fresh.sigmas)  # as built: not the copy that was stepped
        made.set_timesteps(9), fresh.set_timesteps(9)
        assert torch.equal(made.sigmas, fresh.sigmas) and torch.equal(made.timesteps, fresh.timesteps)
