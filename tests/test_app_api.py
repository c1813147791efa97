"""The app's public Gradio API through the real `python app.py`: grid, vary, bad input, and what is public."""

import numpy as np
import pytest
from gradio_client.exceptions import AppError

from seedlab import fingerprint, join_prompt
from tests.conftest import APP_THREADS
from tests.helpers import PROMPT, STEPS, pixels, solo


def test_grid_cells_equal_solo_generations(client, reference_model):
    gallery, results = client.predict(prompt=PROMPT, seeds="0-3", num_inference_steps=STEPS, api_name="/grid")

    assert [cell["caption"] for cell in gallery] == ["seed 0", "seed 1", "seed 2", "seed 3"]
    assert [record["seed"] for record in results] == ["0", "1", "2", "3"]  # text: exact in any JSON reader
    for cell, record in zip(gallery, results):
        expected = solo(reference_model, prompt=PROMPT, seed=int(record["seed"]))
        assert np.array_equal(pixels(cell["image"]), np.asarray(expected.image))
        assert record["fingerprint"] == expected.fingerprint == fingerprint(pixels(cell["image"]))
        assert record["recipe"] == expected.recipe.to_json()
        assert record["prompt"] == PROMPT
        assert record["environment"]["threads"] == APP_THREADS
    assert len({record["fingerprint"] for record in results}) == 4  # the seed changes the image


def test_grid_accepts_seed_lists(client):
    gallery, results = client.predict(prompt=PROMPT, seeds="17, 3", num_inference_steps=1, api_name="/grid")
    assert [cell["caption"] for cell in gallery] == ["seed 17", "seed 3"]
    assert [record["seed"] for record in results] == ["17", "3"]


def test_vary_keeps_the_anchor_seed_and_joins_prompts(client, reference_model):
    variations = [", highly realistic", "artsy"]
    gallery, results = client.predict(
        prompt=PROMPT, seed=2, variations="\n".join(variations), num_inference_steps=STEPS, api_name="/vary"
    )

    expected_prompts = [PROMPT, *(join_prompt(PROMPT, v) for v in variations)]
    assert expected_prompts == [PROMPT, "a red circle, highly realistic", "a red circle, artsy"]
    assert [record["prompt"] for record in results] == expected_prompts
    assert [record["seed"] for record in results] == ["2", "2", "2"]
    assert [cell["caption"] for cell in gallery] == ["base prompt", ", highly realistic", "artsy"]
    for cell, record, prompt in zip(gallery, results, expected_prompts):
        expected = solo(reference_model, prompt=prompt, seed=2)
        assert np.array_equal(pixels(cell["image"]), np.asarray(expected.image))
        assert record["fingerprint"] == expected.fingerprint


@pytest.mark.parametrize(
    ("api_name", "arguments", "field"),
    [
        ("/grid", {"seeds": "abc"}, "seeds"),
        ("/grid", {"seeds": "1", "num_inference_steps": 0}, "Steps must be a whole number from 1 to 200"),
        ("/grid", {"seeds": "1", "num_inference_steps": 2.5}, "Steps must be a whole number from 1 to 200, got 2.5"),
        ("/grid", {"seeds": "1", "width": 30}, "Width"),
        ("/grid", {"seeds": "1", "width": 30, "height": 31}, "Width .*; Height"),  # every bad field at once
        ("/vary", {"seed": -1, "variations": ", artsy"}, "Seed must be a whole number from 0 to 18446744073709551615"),
        ("/vary", {"variations": ", artsy"}, "Seed is missing"),
        ("/vary", {"seed": 1, "variations": ""}, "variations"),
    ],
)
def test_bad_input_is_a_clear_error_and_the_server_keeps_serving(client, api_name, arguments, field):
    with pytest.raises(AppError, match=field) as error:
        client.predict(prompt=PROMPT, api_name=api_name, **arguments)
    assert "Traceback" not in str(error.value)

    gallery, _ = client.predict(prompt=PROMPT, seeds="5", num_inference_steps=1, api_name="/grid")
    assert [cell["caption"] for cell in gallery] == ["seed 5"]


def test_only_grid_vary_matrix_reproduce_and_reverify_are_public(client):
    info = client.view_api(return_format="dict", print_info=False)
    assert set(info["named_endpoints"]) == {"/grid", "/vary", "/matrix", "/plot", "/travel", "/reproduce", "/reverify",
                                            "/preview", "/finish"}
    assert not info["unnamed_endpoints"]
    # the recipe's own fields, in its order: new ones last, so positional calls hold
    recipe_fields = ["negative_prompt", "model", "scheduler", "num_inference_steps", "guidance_scale", "width",
                     "height", "rng", "variation_seed", "variation_strength", "seed_resize_from", "deterministic",
                     "dtype", "prompt_syntax", "emphasis", "clip_skip", "schedule", "eta", "eta_noise_seed_delta",
                     "s_churn", "s_tmin", "s_tmax", "s_noise", "schedule_sigma_min", "schedule_sigma_max",
                     "schedule_rho", "hires_scale", "hires_upscaler", "hires_steps", "denoising_strength",
                     "hires_sampler", "hires_schedule", "hires_cfg", "hires_seed", "loras", "lora_hashes",
                     "ti_hashes", "start_step", "end_step", "model_hash", "vae", "vae_hash", "to_8bit",
                     "comfyui_noise", "preview_steps", "eta_ddim"]
    grid = [p["parameter_name"] for p in info["named_endpoints"]["/grid"]["parameters"]]
    vary = [p["parameter_name"] for p in info["named_endpoints"]["/vary"]["parameters"]]
    assert grid == ["prompt", "seeds", *recipe_fields]
    assert vary == ["prompt", "seed", "variations", *recipe_fields]
    matrix = [p["parameter_name"] for p in info["named_endpoints"]["/matrix"]["parameters"]]
    assert matrix == ["prompt", "seeds", "variations", *recipe_fields]
    reproduce = [p["parameter_name"] for p in info["named_endpoints"]["/reproduce"]["parameters"]]
    assert reproduce == ["link_or_recipe"]
    reverify = [p["parameter_name"] for p in info["named_endpoints"]["/reverify"]["parameters"]]
    assert reverify == ["link_or_recipe"]
    for name in ("/dice", "/select", "/stop", "/environment", "/open_link", "/open_png", "/reproduce_pending",
                 "/reproduce_linked", "/reproduce_dropped"):
        with pytest.raises(ValueError):
            client.predict(api_name=name)
