"""The web app through its public Gradio API (the real `python app.py`), and its UI-only handlers."""

from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gradio_client import Client
from gradio_client.exceptions import AppError
from PIL import Image

from seedlab import ModelStore, Recipe, fingerprint, generate, join_prompt, load_model, parse_seeds
from tests.conftest import APP_THREADS

STEPS = 4  # enough for the scheduler to matter, fast on the tiny model
PROMPT = "a red circle"


@pytest.fixture(scope="module")
def client(app_url) -> Client:
    return Client(app_url, verbose=False)


@pytest.fixture(scope="module")
def reference_model(tiny_model_dir):
    """The same tiny folder loaded in this process, to check the server's pixels against."""
    return load_model(str(tiny_model_dir), torch.device("cpu"))


@contextmanager
def torch_threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def solo(model, **fields):
    """The reference: one recipe generated alone, in this process, with the app's thread count."""
    with torch_threads(APP_THREADS):
        return generate(model, Recipe(model=model.name, num_inference_steps=STEPS, **fields))


def pixels(path: str) -> np.ndarray:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return np.asarray(image.convert("RGB"))


def test_grid_cells_equal_solo_generations(client, reference_model):
    gallery, results = client.predict(prompt=PROMPT, seeds="0-3", num_inference_steps=STEPS, api_name="/grid")

    assert [cell["caption"] for cell in gallery] == ["seed 0", "seed 1", "seed 2", "seed 3"]
    assert [record["seed"] for record in results] == [0, 1, 2, 3]
    for cell, record in zip(gallery, results):
        expected = solo(reference_model, prompt=PROMPT, seed=record["seed"])
        assert np.array_equal(pixels(cell["image"]), np.asarray(expected.image))
        assert record["fingerprint"] == expected.fingerprint == fingerprint(pixels(cell["image"]))
        assert record["recipe"] == expected.recipe.to_dict()
        assert record["prompt"] == PROMPT
        assert record["environment"]["threads"] == APP_THREADS
    assert len({record["fingerprint"] for record in results}) == 4  # the seed changes the image


def test_grid_accepts_seed_lists(client):
    gallery, results = client.predict(prompt=PROMPT, seeds="17, 3", num_inference_steps=1, api_name="/grid")
    assert [cell["caption"] for cell in gallery] == ["seed 17", "seed 3"]
    assert [record["seed"] for record in results] == [17, 3]


def test_vary_keeps_the_anchor_seed_and_joins_prompts(client, reference_model):
    variations = [", highly realistic", "artsy"]
    gallery, results = client.predict(
        prompt=PROMPT, seed=2, variations="\n".join(variations), num_inference_steps=STEPS, api_name="/vary"
    )

    expected_prompts = [PROMPT, *(join_prompt(PROMPT, v) for v in variations)]
    assert expected_prompts == [PROMPT, "a red circle, highly realistic", "a red circle, artsy"]
    assert [record["prompt"] for record in results] == expected_prompts
    assert [record["seed"] for record in results] == [2, 2, 2]
    assert [cell["caption"] for cell in gallery] == ["base prompt", ", highly realistic", "artsy"]
    for cell, record, prompt in zip(gallery, results, expected_prompts):
        expected = solo(reference_model, prompt=prompt, seed=2)
        assert np.array_equal(pixels(cell["image"]), np.asarray(expected.image))
        assert record["fingerprint"] == expected.fingerprint


@pytest.mark.parametrize(
    ("api_name", "arguments", "field"),
    [
        ("/grid", {"seeds": "abc"}, "seeds"),
        ("/grid", {"seeds": "1", "num_inference_steps": 0}, "num_inference_steps"),
        ("/grid", {"seeds": "1", "width": 30}, "width"),
        ("/vary", {"seed": -1, "variations": ", artsy"}, "seed"),
        ("/vary", {"variations": ", artsy"}, "seed is missing"),
        ("/vary", {"seed": 1, "variations": ""}, "variations"),
    ],
)
def test_bad_input_is_a_clear_error_and_the_server_keeps_serving(client, api_name, arguments, field):
    with pytest.raises(AppError, match=field) as error:
        client.predict(prompt=PROMPT, api_name=api_name, **arguments)
    assert "Traceback" not in str(error.value)

    gallery, _ = client.predict(prompt=PROMPT, seeds="5", num_inference_steps=1, api_name="/grid")
    assert [cell["caption"] for cell in gallery] == ["seed 5"]


def test_only_grid_and_vary_are_public(client):
    info = client.view_api(return_format="dict", print_info=False)
    assert set(info["named_endpoints"]) == {"/grid", "/vary"}
    assert not info["unnamed_endpoints"]
    recipe_fields = ["negative_prompt", "num_inference_steps", "guidance_scale", "scheduler", "width", "height",
                     "rng", "deterministic", "dtype", "model"]
    grid = [p["parameter_name"] for p in info["named_endpoints"]["/grid"]["parameters"]]
    vary = [p["parameter_name"] for p in info["named_endpoints"]["/vary"]["parameters"]]
    assert grid == ["prompt", "seeds", *recipe_fields]
    assert vary == ["prompt", "seed", "variations", *recipe_fields]
    for name in ("/dice", "/select", "/stop", "/environment"):
        with pytest.raises(ValueError):
            client.predict(api_name=name)


# UI-only handlers, called in this process (they are private, so not reachable through the API).


@pytest.fixture(scope="module")
def seedlab_app(reference_model, tmp_path_factory):
    from app import SeedLab

    store = ModelStore([reference_model.name], device=torch.device("cpu"))
    store.add(reference_model)  # already loaded: no second load
    return SeedLab(store, tmp_path_factory.mktemp("png"))


def test_dice_draws_the_requested_number_of_seeds(seedlab_app):
    assert len(parse_seeds(seedlab_app.dice(4, "0-7"))) == 4
    assert len(parse_seeds(seedlab_app.dice(None, "1, 2, 3"))) == 3  # no count: as many as now
    assert seedlab_app.dice(4, "0-7") != seedlab_app.dice(4, "0-7")


def test_select_makes_the_cell_the_anchor(seedlab_app):
    results = [{"seed": s, "recipe": {"seed": s}, "fingerprint": f"f{s}"} for s in (5, 6, 7)]
    text, seed, recipe, print_ = seedlab_app.select(results, SimpleNamespace(index=2))
    assert (text, seed, recipe, print_) == ("**Anchor seed: 7**", 7, {"seed": 7}, "f7")


def test_stop_cancels_this_sessions_generation(seedlab_app):
    request = SimpleNamespace(session_hash="session-a")
    other = SimpleNamespace(session_hash="session-b")
    steps = seedlab_app.grid(prompt=PROMPT, seeds="0-3", num_inference_steps=2, request=request,
                             progress=lambda *args, **kwargs: None)
    assert next(steps) == ([], [])  # cleared at once
    gallery, _ = next(steps)
    assert len(gallery) == 1
    seedlab_app.stop(other)  # another session's Stop leaves this one running
    gallery, _ = next(steps)
    assert len(gallery) == 2
    seedlab_app.stop(request)
    with pytest.warns(UserWarning, match="Stopped after 2 of 4"):
        assert list(steps) == []
    gallery, _ = list(seedlab_app.grid(prompt=PROMPT, seeds="0-1", num_inference_steps=1, request=request,
                                       progress=lambda *args, **kwargs: None))[-1]
    assert len(gallery) == 2  # a new run is not stopped by the old Stop
