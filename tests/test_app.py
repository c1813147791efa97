"""The web app through its public Gradio API (the real `python app.py`), and its UI-only handlers."""

import json
import re
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace
from urllib.parse import parse_qsl

import gradio as gr
import numpy as np
import pytest
import torch
from gradio_client import Client
from gradio_client.exceptions import AppError
from PIL import Image
from PIL.PngImagePlugin import PngInfo

import webui.handlers
import webui.streaming
from seedlab import (
    ModelStore,
    Recipe,
    encode_link,
    fingerprint,
    generate,
    join_prompt,
    load_model,
    parse_seeds,
    read_png,
    save_png,
)
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from seedlab.serving.reproduction import CONSEQUENCES
from tests.conftest import APP_THREADS
from tests.helpers import torch_threads
from webui.fields import RESTORED
from webui.requests import base_url

STEPS = 4  # enough for the scheduler to matter, fast on the tiny model
PROMPT = "a red circle"


@pytest.fixture(scope="module")
def client(app_url) -> Client:
    return Client(app_url, verbose=False)


@pytest.fixture(scope="module")
def reference_model(app_model):
    """The same tiny folder loaded in this process, to check the server's pixels against."""
    return load_model(app_model, torch.device("cpu"))


def solo(model, **fields):
    """The reference: one recipe generated alone, in this process, with the app's thread count."""
    with torch_threads(APP_THREADS):
        fields = {"guidance_scale": model.default_guidance, **fields}  # the app starts from the model's default
        # and reads typed prompts as A1111 does (the page's default for SD 1.x/2.x models)
        return generate(model, Recipe(model=model.name, num_inference_steps=STEPS, prompt_syntax="a1111", **fields))


def pixels(path: str) -> np.ndarray:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return np.asarray(image.convert("RGB"))


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
                 "/reproduce_linked"):
        with pytest.raises(ValueError):
            client.predict(api_name=name)


# UI-only handlers, called in this process (they are private, so not reachable through the API).


@pytest.fixture(scope="module")
def seedlab_app(reference_model, tmp_path_factory):
    from webui.handlers import WebApp

    store = ModelStore([reference_model.name], device=torch.device("cpu"))
    store.add(reference_model)  # already loaded: no second load
    return WebApp(Admission(store, Limits()), tmp_path_factory.mktemp("png"))


def grid(app, request=None, **values):
    return app.grid({"prompt": PROMPT, **values}, request, lambda *args, **kwargs: None)


def test_dice_draws_the_requested_number_of_seeds(seedlab_app):
    assert len(parse_seeds(seedlab_app.dice(4, "0-7")["seeds"])) == 4
    assert len(parse_seeds(seedlab_app.dice(None, "1, 2, 3")["seeds"])) == 3  # no count: as many as now
    assert seedlab_app.dice(4, "0-7") != seedlab_app.dice(4, "0-7")
    with pytest.raises(gr.Error, match="Random seeds to draw must be a whole number from 1 to 64, got 0"):
        seedlab_app.dice(0, "0-7")


def test_select_makes_the_cell_the_anchor_and_shows_it(seedlab_app):
    results = [{"seed": str(s), "prompt": "p", "recipe": {"prompt": "p", "seed": str(s)},
                "fingerprint": f"{s:064x}"[-64:]} for s in (5, 6, 18446744073709551615)]
    results[2]["link"] = "http://x/?v=1"
    update = seedlab_app.select(results, SimpleNamespace(index=2))
    assert {key: update[key] for key in ("anchor_text", "anchor_seed", "anchor", "anchor_recipe", "anchor_fingerprint",
                                         "grid_link")} == {
        "anchor_text": "Anchor seed: 18446744073709551615 · prompt: p", "anchor_seed": "18446744073709551615",
        "anchor": update["cell"]["recipe"], "anchor_recipe": update["cell"]["recipe"],
        "anchor_fingerprint": f"{2**64 - 1:064x}", "grid_link": "http://x/?v=1"}
    assert update["cell"]["recipe"]["seed"] == "18446744073709551615" and update["cell"]["prompt"] == "p"
    assert update["cell_link"] == "http://x/?v=1"
    assert update["cell_image"] is None  # this server never made it: no PNG to show or download
    assert "Seed: 18446744073709551615" in update["cell_params"]
    variation = seedlab_app.select_variation(results, SimpleNamespace(index=1))
    assert variation["variation_link"] == "" and variation["cell"]["seed"] == "6" and "anchor" not in variation


def images(updates):
    """The (gallery, results) updates of a grid, without the per-step no-change updates."""
    return [(update["grid"], update["grid_results"]) for update in updates if "grid" in update]


def next_images(updates):
    update = next(update for update in updates if "grid" in update)
    return update["grid"], update["grid_results"]


def last(updates):
    """A generating handler's final update (it yields once per step, then its result)."""
    *_, final = updates
    return final


def test_stop_cancels_this_sessions_generation(seedlab_app, monkeypatch):
    monkeypatch.setattr(webui.streaming, "IMAGES_INTERVAL_S", 0.0)  # every cell its own update, to stop between them
    request = SimpleNamespace(session_hash="session-a")
    other = SimpleNamespace(session_hash="session-b")
    steps = grid(seedlab_app, request, seeds="0-3", num_inference_steps=2)
    assert next(steps) == {"grid": [], "grid_results": []}  # cleared at once
    gallery, _ = next_images(steps)
    assert len(gallery) == 1
    seedlab_app.stop(other)  # another session's Stop leaves this one running
    gallery, _ = next_images(steps)
    assert len(gallery) == 2
    seedlab_app.stop(request)
    with pytest.warns(UserWarning, match="Stopped after 2 of 4"):
        assert images(steps) == []
    gallery, _ = images(grid(seedlab_app, request, seeds="0-1", num_inference_steps=1))[-1]
    assert len(gallery) == 2  # a new run is not stopped by the old Stop


def test_cells_that_finish_together_arrive_in_one_update_and_the_last_at_once(seedlab_app, monkeypatch):
    def sizes():
        updates = [update for update in grid(seedlab_app, SimpleNamespace(session_hash="s"), seeds="0-3",
                                              num_inference_steps=1) if update.get("grid")]
        assert [record["seed"] for record in updates[-1]["grid_results"]] == ["0", "1", "2", "3"]
        return [len(update["grid"]) for update in updates]

    monkeypatch.setattr(webui.streaming, "IMAGES_INTERVAL_S", 3600.0)  # a cell waits for those beside it to the end
    monkeypatch.setattr(seedlab_app.default, "lanes", 2)
    assert sizes() == [4]  # side by side: every cell waits for the next, and the last goes at once
    monkeypatch.setattr(seedlab_app.default, "lanes", 1)
    assert sizes() == [1, 2, 3, 4]  # one at a time: nothing finishes beside a cell, so none waits


def test_every_step_hands_control_back_so_a_closed_tab_stops_the_work(seedlab_app):
    unet_calls = []
    hook = seedlab_app.default.pipeline.unet.register_forward_hook(lambda *args: unet_calls.append(1))
    try:
        updates = grid(seedlab_app, SimpleNamespace(session_hash="tab"), seeds="0-3", num_inference_steps=50)
        next(updates), next(updates), next(updates)  # cleared, then two progress ticks (at most 4 a second)
        at_close = len(unet_calls)
        updates.close()  # what Gradio does when the tab closes or the API call is cancelled
    finally:
        hook.remove()
    assert len(unet_calls) <= at_close + 2, f"{len(unet_calls) - at_close} steps ran after the close"
    assert len(unet_calls) < 100, f"{len(unet_calls)} of 200 steps ran"  # closed well before the end, even on a busy
    # machine (two progress ticks, 2 s apart, can take 50 steps there)


@contextmanager
def counting_unet_calls(model):
    calls = []
    hook = model.pipeline.unet.register_forward_hook(lambda *args: calls.append(1))
    try:
        yield calls
    finally:
        hook.remove()


def regenerations(seedlab_app, request):
    """The three ways one image is regenerated, each 50 steps long: /reproduce, a link, a dropped PNG."""
    recipe = Recipe(prompt=PROMPT, seed=21, num_inference_steps=50, model=seedlab_app.store.default)
    link = encode_link(recipe, "0" * 64, None, "http://127.0.0.1/")
    link_original = seedlab_app.reproduction.open_link(page_request(link.split("?", 1)[1]))["pending"]
    quick = generate(seedlab_app.default, recipe.replace(num_inference_steps=1))
    png = save_png(replace(quick, recipe=recipe), seedlab_app.pngs.folder / "dropped-50-steps.png")
    png_original = seedlab_app.reproduction.open_png(str(png))["pending"]
    noop = lambda *args, **kwargs: None
    return {
        "reproduce": seedlab_app.reproduction.reproduce(json.dumps(recipe.to_json()), request, noop),
        "link": seedlab_app.reproduction.reproduce_pending(link_original, request, noop),
        "png": seedlab_app.reproduction.reproduce_pending(png_original, request, noop),
    }


@pytest.mark.parametrize("path", ["reproduce", "link", "png"])
def test_stop_cancels_a_regeneration(seedlab_app, path):
    request = SimpleNamespace(session_hash=f"stop-{path}", headers={})
    with counting_unet_calls(seedlab_app.default) as calls:
        updates = regenerations(seedlab_app, request)[path]
        next(updates), next(updates)  # two steps done
        seedlab_app.stop(request)
        with pytest.warns(UserWarning, match="Stopped: the image was not regenerated"):
            rest = list(updates)
    assert len(calls) <= 5, f"{len(calls)} of 50 steps ran after Stop"
    assert (rest[-1]["reproduced"], rest[-1]["verdict"]) == (None, None)  # no image, no verdict


@pytest.mark.parametrize("path", ["reproduce", "link", "png"])
def test_a_closed_tab_stops_a_regeneration(seedlab_app, path):
    with counting_unet_calls(seedlab_app.default) as calls:
        updates = regenerations(seedlab_app, SimpleNamespace(session_hash=f"tab-{path}", headers={}))[path]
        next(updates), next(updates)  # two steps done
        updates.close()  # what Gradio does when the tab closes or the API call is cancelled
    assert len(calls) <= 5, f"{len(calls)} of 50 steps ran after the tab closed"


def test_stop_is_wired_to_cancel_every_generating_event(seedlab_app):
    from app import build_app

    demo, _ = build_app(seedlab_app.admission, seedlab_app.pngs.folder)
    named = {fn._id: getattr(fn.fn, "__name__", None) for fn in demo.fns.values()}
    (stop,) = [fn for fn in demo.fns.values() if named[fn._id] == "stop"]
    # Gradio wires `cancels=` as a second listener on the same trigger.
    (canceller,) = [fn for fn in demo.fns.values() if fn.is_cancel_function and fn.targets == stop.targets]
    generating = {index for index, name in named.items()
                  if name in ("grid", "page_grid", "vary", "vary_anchor", "matrix", "matrix_page", "plot", "travel",
                              "nudge", "reproduce", "reverify", "reproduce_pending", "reproduce_linked", "regenerate",
                              "page_preview", "preview", "finish", "finish_cell", "finish_all")}
    # the page's grid, /grid, /vary, the vary button, /matrix, the page's matrix, /plot and the page's plot,
    # /travel and the page's travel, the nudges, /reproduce, /reverify, a link's and a PNG's regeneration, a
    # history entry's regeneration, a dropped SeedLab PNG's regeneration (reproduce_pending too), the page's Preview,
    # /preview, /finish, Finish and Finish all
    assert len(generating) == 22
    assert set(canceller.cancels) == generating


def test_generation_runs_inside_spaces_gpu_when_spaces_is_importable(monkeypatch):
    from webui import gpu

    fake_spaces = SimpleNamespace(GPU=lambda duration: lambda fn: ("on ZeroGPU", fn, duration))
    monkeypatch.setattr(gpu, "spaces", fake_spaces)
    assert gpu.on_gpu(generate) == ("on ZeroGPU", generate, 120)
    monkeypatch.setattr(gpu, "spaces", None)
    assert gpu.on_gpu(generate) is generate


# Links, PNG metadata and /reproduce.


def test_served_pngs_are_the_files_with_their_recipe(client, app_url):
    gallery, results = client.predict(prompt=PROMPT, seeds="8-9", num_inference_steps=STEPS, api_name="/grid")
    for cell, record in zip(gallery, results):  # the client downloaded what the server serves
        recipe, print_, environment, notes = read_png(cell["image"])
        assert (recipe.to_json(), print_, environment.to_dict(), notes) == (
            record["recipe"], record["fingerprint"], record["environment"], [])
        with Image.open(cell["image"]) as image:
            assert f"Steps: {STEPS}, Sampler: " in image.text["parameters"]
            cfg = record["recipe"]["guidance_scale"]
            assert f"CFG scale: {cfg:g}, Seed: {record['seed']}, Size: 64x64" in image.text["parameters"]
        assert record["link"].startswith(f"{app_url}/?v=1&prompt=a+red+circle&seed=")


def test_a_link_from_the_grid_opens_from_the_record_and_reverifies_exactly(client):
    _, results = client.predict(prompt=PROMPT, seeds="11", num_inference_steps=STEPS, api_name="/grid")
    image, verdict = client.predict(link_or_recipe=results[0]["link"], api_name="/reproduce")
    assert verdict["served_from_record"] is True and verdict["exact"] is True
    assert verdict["summary"].startswith("Served from this server's record of the image it made: ")
    assert "made_at" not in verdict and "Exact match" in verdict["summary"]  # never when: any visitor may ask
    # Issue 33: nothing was regenerated, and it says so once (never also "the regenerated image is identical").
    assert "regenerated image" not in verdict["summary"] and "not regenerated now" in verdict["summary"]
    assert read_png(image)[1] == results[0]["fingerprint"]
    image, verdict = client.predict(link_or_recipe=results[0]["link"], api_name="/reverify")  # regenerated now
    assert verdict["served_from_record"] is False
    assert verdict["exact"] is True and "exact" in verdict["summary"].lower()
    assert verdict["environment_differences"] == []
    assert verdict["max_difference"] == 0 == verdict["pixels_differing"]  # the server still had the original PNG
    assert read_png(image)[1] == results[0]["fingerprint"] == verdict["fingerprint"]
    assert verdict["recipe"] == results[0]["recipe"]


def test_reproduce_a_recipe_json(client, reference_model):
    record = {"recipe": solo(reference_model, prompt=PROMPT, seed=12).recipe.to_json()}
    image, verdict = client.predict(link_or_recipe=json.dumps(record["recipe"]), api_name="/reproduce")
    assert verdict["exact"] is False and verdict["original_fingerprint"] is None  # nothing to compare with
    assert fingerprint(pixels(image)) == solo(reference_model, prompt=PROMPT, seed=12).fingerprint


def with_model(link: str, name: str) -> str:
    """The link naming another model (the default model is left out of links, so add the key then)."""
    return re.sub(r"model=[^&]+", f"model={name}", link) if "&model=" in link else f"{link}&model={name}"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda link: link.replace("steps=4", "steps=999"), "steps"),
        (lambda link: link + "&seed=1", "seed appears more than once"),
        (lambda link: with_model(link, "../x"), "Model must be one of the models on this server"),
        (lambda link: with_model(link, "someone/else"), "got 'someone/else'"),
        (lambda link: re.sub(r"sampler=[^&]+", "sampler=NoSuchScheduler", link), "Scheduler must be one of"),
        (lambda link: "{broken", "recipe JSON is not valid"),
    ],
)
def test_reproduce_refuses_bad_links_with_a_message_naming_the_field(client, change, named):
    _, results = client.predict(prompt=PROMPT, seeds="13", num_inference_steps=STEPS, api_name="/grid")
    with pytest.raises(AppError, match=re.escape(named)) as error:
        client.predict(link_or_recipe=change(results[0]["link"]), api_name="/reproduce")
    assert "Traceback" not in str(error.value)


def page_request(query: str) -> SimpleNamespace:
    """What a page load brings: the page's query parameters and the page address as referer."""
    return SimpleNamespace(query_params=dict(parse_qsl(query, keep_blank_values=True)), session_hash="s",
                           headers={"referer": f"http://seedlab.example/?{query}"})


def controls_for(recipe: Recipe) -> dict:
    """Every restored control's expected value: the recipe's fields as text where seeds, the seed in the seeds box."""
    values = {**recipe.to_dict(), "variation_seed": str(recipe.variation_seed), "hires_seed": str(recipe.hires_seed),
              "seed_resize_from": ""}
    values["seeds"] = str(values.pop("seed"))
    return values


def restored(update: dict) -> dict:
    return {name: update[name] for name in RESTORED}


def test_links_point_at_the_configured_address_or_the_page(monkeypatch):
    monkeypatch.delenv("SEEDLAB_BASE_URL", raising=False)
    assert base_url(page_request("v=1")) == "http://seedlab.example/"
    proxied = SimpleNamespace(headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "lab.example, proxy"},
                              url="http://10.0.0.5:7860/gradio_api/queue/join?x=1")
    assert base_url(proxied) == "https://lab.example/"
    assert base_url(None) == "http://127.0.0.1:7860/"
    monkeypatch.setenv("SEEDLAB_BASE_URL", "https://seedlab.example.org/space/")
    assert base_url(page_request("v=1")) == "https://seedlab.example.org/space/"


def test_opening_a_link_restores_every_control_then_regenerates_exactly(seedlab_app, reference_model, monkeypatch):
    monkeypatch.delenv("SEEDLAB_BASE_URL", raising=False)
    expected = solo(reference_model, prompt="a blue square", seed=6952411511246973023, negative_prompt="red",
                    scheduler="DDIMScheduler", guidance_scale=3.5, deterministic=True)
    link = encode_link(expected.recipe, expected.fingerprint, expected.environment, "http://elsewhere/")
    query = link.split("?", 1)[1]
    update = seedlab_app.reproduction.open_link(page_request(query))
    assert update["link_box"].startswith("http://seedlab.example/?v=1&prompt=a+blue+square")
    assert restored(update) == controls_for(expected.recipe)
    assert update["verdict_text"].startswith("Regenerating")
    with torch_threads(APP_THREADS):
        final = last(seedlab_app.reproduction.reproduce_pending(update["pending"], page_request(query)))
    image, verdict, summary = final["reproduced"], final["verdict"], final["verdict_text"]
    assert verdict["exact"] and "exact" in summary.lower()
    assert read_png(image)[0] == expected.recipe


def test_a_bad_link_is_a_message_and_no_link_changes_nothing(seedlab_app):
    update = seedlab_app.reproduction.open_link(page_request("v=1&prompt=x&steps=0&fp=" + "0" * 64))
    assert update["verdict_text"].startswith("This link cannot be opened. link: steps (num_inference_steps) must be")
    assert update["pending"] is None and not set(update) & set(RESTORED)  # the controls keep their values
    # Issue 33: the bad link is put where it can be fixed (the page gave it nowhere to be edited).
    assert update["link_box"].endswith("?v=1&prompt=x&steps=0&fp=" + "0" * 64)
    assert seedlab_app.reproduction.open_link(page_request("__theme=dark")) == {"pending": None}


def test_a_dropped_png_restores_its_recipe_and_regenerates_exactly(seedlab_app, reference_model, tmp_path):
    expected = solo(reference_model, prompt="a red circle", seed=77)
    path = save_png(expected, tmp_path / "dropped.png")
    update = seedlab_app.reproduction.open_png(str(path))
    assert restored(update) == controls_for(expected.recipe)
    assert "everything in the PNG was restored" in update["png_notes"] and update["regenerate_png"].interactive
    assert update["pending"].pixels is None  # kept on disk, not in the session's memory
    with torch_threads(APP_THREADS):
        final = last(seedlab_app.reproduction.reproduce_pending(update["pending"], None))
    verdict, summary = final["verdict"], final["verdict_text"]
    assert verdict["exact"] and verdict["max_difference"] == 0 and "exact" in summary.lower()


def test_a_dropped_seedlab_png_is_regenerated_at_once_as_a_link_is_and_another_tools_waits(seedlab_app,
                                                                                           reference_model, tmp_path):
    """Issue 33: a dropped SeedLab PNG waited for a button while a link from the same server got its verdict at once.
    Another tool's file still waits: its recipe often needs adjusting first."""
    path = save_png(solo(reference_model, prompt="a dropped star", seed=78), tmp_path / "seedlab.png")
    update = seedlab_app.reproduction.open_png(str(path))
    assert update["png_now"] is not None and update["png_now"].pixels is None  # the page regenerates it at once
    assert update["verdict_text"] == "Regenerating the dropped image…"
    with torch_threads(APP_THREADS):
        final = last(seedlab_app.reproduction.reproduce_pending(update["png_now"], None))
    assert final["verdict"]["exact"] and final["verdict_text"].startswith("Exact match")
    info = PngInfo()
    info.add_text("parameters", "a red circle\nSteps: 3, Sampler: Euler, CFG scale: 7, Seed: 9, Size: 64x64")
    Image.new("RGB", (64, 64)).save(tmp_path / "a1111.png", pnginfo=info)
    update = seedlab_app.reproduction.open_png(str(tmp_path / "a1111.png"))
    assert update["png_now"] is None and update["verdict_text"] == ""  # it waits for its button
    assert update["regenerate_png"].interactive and update["pending"] is not None


def test_a_dropped_png_this_server_made_gets_its_verdict_from_the_record_with_the_drop(seedlab_app, reference_model,
                                                                                       tmp_path):
    result = solo(reference_model, prompt="a recorded star", seed=79)
    seedlab_app.record.add(result, seedlab_app.pngs.save(result))
    update = seedlab_app.reproduction.open_png(str(save_png(result, tmp_path / "recorded.png")), page_request(""))
    assert update["png_now"] is None and update["reproduced"] is not None and update["verdict"]["exact"]
    assert update["verdict_text"].startswith("Served from this server's record of the image it made: not regenerated "
                                             "now. Exact match: the image kept here has the file's pixel fingerprint")
    # Its own button regenerates it (the link box's "Re-verify" is about whatever link is there).
    assert "\"Regenerate the dropped image and compare\"" in update["verdict_text"]
    assert update["regenerate_png"].interactive and not update["reverify"].interactive


def test_an_a1111_png_is_restored_with_notes(seedlab_app, tmp_path):
    info = PngInfo()
    info.add_text("parameters", "a red circle\nNegative prompt: blue\nSteps: 3, Sampler: DPM++ 2M Karras, "
                                "CFG scale: 7, Seed: 9, Size: 64x64, Model hash: 6ce0161689, "
                                "Model: v1-5-pruned-emaonly, Clip skip: 2, Version: v1.9.4")
    Image.new("RGB", (64, 64)).save(tmp_path / "a1111.png", pnginfo=info)
    update = seedlab_app.reproduction.open_png(str(tmp_path / "a1111.png"))
    values, notes, original = restored(update), update["png_notes"], update["pending"]
    assert (values["prompt"], values["negative_prompt"], values["seeds"], values["num_inference_steps"]) == (
        "a red circle", "blue", "9", 3)
    assert values["model"] == seedlab_app.store.default
    assert (values["scheduler"], values["schedule"], values["clip_skip"], values["prompt_syntax"]) == (
        "DPM++ 2M", "Automatic", 2, "a1111")  # A1111's sampler, its Karras default, its clip skip: run, not noted
    assert "model v1-5-pruned-emaonly (checkpoint hash 6ce0161689) is not available on this server" in notes, notes
    assert values["model_hash"] == ""  # the hash named the file that is not here, not the model used instead
    assert "Karras" not in notes and "Clip skip" not in notes
    verdict = last(seedlab_app.reproduction.reproduce_pending(original, None))["verdict"]
    assert verdict["exact"] is False and verdict["max_difference"] is not None  # measured against the PNG's pixels

    update = seedlab_app.reproduction.open_png(str(tmp_path / "missing.png"))
    assert update["png_notes"].startswith("This image cannot be read") and update["pending"] is None


def test_a_png_refused_by_a_limit_or_a_rule_says_so_and_only_unreadable_files_cannot_be_read(seedlab_app, tmp_path):
    quick = generate(seedlab_app.default, Recipe(prompt=PROMPT, seed=3, num_inference_steps=1,
                                                 model=seedlab_app.store.default))
    too_long = save_png(replace(quick, recipe=quick.recipe.replace(num_inference_steps=60)), tmp_path / "60.png")
    update = seedlab_app.reproduction.open_png(str(too_long))
    assert update["png_notes"].startswith("Restored from the PNG (seed 3). This server cannot run it as it is: Steps "
                                          "must be at most 50 on this server (SEEDLAB_MAX_STEPS), got 60.")
    assert update["pending"] is None and not update["regenerate_png"].interactive
    values = restored(update)  # every field the file holds is restored all the same
    assert (values["seeds"], values["num_inference_steps"], values["prompt"]) == ("3", 60, PROMPT)
    assert update["use_nearest"].interactive and update["png_nearest"]["num_inference_steps"] == 50
    assert ("The nearest recipe this server runs (not the original image): seed 3 at 64x64, 50 steps"
            in update["png_notes"])
    nearest = restored(seedlab_app.reproduction.use_nearest(update["png_nearest"]))
    assert (nearest["seeds"], nearest["num_inference_steps"], nearest["prompt"]) == ("3", 50, PROMPT)

    info = PngInfo()
    info.add_text("parameters", "a red circle\nSteps: 500, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64")
    Image.new("RGB", (8, 8)).save(tmp_path / "500-steps.png", pnginfo=info)
    update = seedlab_app.reproduction.open_png(str(tmp_path / "500-steps.png"))  # issue 30: the rest is restored
    first = update["png_notes"].split("\n")[0]
    assert first.startswith("Restored from the PNG (seed 1).") and "of its settings cannot be run as written" in first
    assert "- Steps '500' from the file cannot be used here (must be a whole number from 1 to 200, got 500): it is " \
           "left at its default, so the image differs" in update["png_notes"]
    default = Recipe(prompt="").num_inference_steps
    assert update["pending"] is not None and restored(update)["num_inference_steps"] == default

    (tmp_path / "text.png").write_text("not an image")
    update = seedlab_app.reproduction.open_png(str(tmp_path / "text.png"))
    assert update["png_notes"].startswith("This image cannot be read: file is not a PNG, JPEG or WebP image")
    assert update["pending"] is None and "/" not in update["png_notes"].split(":", 1)[1]  # no server path


def test_a_nudged_anchor_and_selected_image_name_their_variation_seed_and_strength():
    from webui.cells import anchor_updates

    recipe = Recipe(prompt="p", seed=4, variation_seed=77, variation_strength=0.15)
    record = {"seed": "4", "prompt": "p", "fingerprint": "0" * 64, "link": "", "recipe": recipe.to_json()}
    assert anchor_updates(record)["anchor_text"] == "Anchor seed: 4 · variation seed 77 at strength 0.15 · prompt: p"
    plain = {**record, "recipe": Recipe(prompt="p", seed=4).to_json()}
    assert anchor_updates(plain)["anchor_text"] == "Anchor seed: 4 · prompt: p"


def test_a_dropped_files_notes_say_first_what_will_differ_and_the_file_is_shown(seedlab_app, reference_model,
                                                                                  tmp_path):
    """Issue 33: a one-line summary first (runs as written, or how many settings cannot), the notes that change the
    picture before the others, and the dropped image shown beside the regenerated one."""
    info = PngInfo()
    info.add_text("parameters", "a red circle\nSteps: 3, Sampler: Euler, CFG scale: 7, Seed: 9, Size: 64x64, "
                                "Hires upscale: 2, Hires upscaler: 4x-UltraSharp, Model: v1-5-pruned-emaonly, "
                                "Schedule type: Align Your Steps GITS, Version: v1.9.4")
    Image.new("RGB", (64, 64)).save(tmp_path / "a1111.png", pnginfo=info)
    update = seedlab_app.reproduction.open_png(str(tmp_path / "a1111.png"))
    lines = update["png_notes"].split("\n")
    causes = [line for line in lines[1:] if any(word in line for word in CONSEQUENCES)]
    assert causes and lines[1:len(causes) + 1] == causes, lines  # what changes the picture comes first
    assert lines[0] == (f"Restored from the PNG (seed 9). {len(causes)} of its settings cannot be run as written "
                        "(listed first): the image will differ.")
    assert update["original"] == str(tmp_path / "a1111.png")
    own = save_png(solo(reference_model, prompt="a red circle", seed=77), tmp_path / "own.png")
    update = seedlab_app.reproduction.open_png(str(own))
    assert update["png_notes"].split("\n")[0] == ("Restored from the PNG (seed 77). It runs as written, so the "
                                                  "regenerated image should match it where the environment does.")
    assert seedlab_app.reproduction.clear_png()["original"] is None


def test_an_a1111_png_with_an_ancestral_sampler_and_gpu_noise_still_regenerates_with_a_note(seedlab_app, tmp_path):
    info = PngInfo()  # no RNG field: A1111's default, its GPU noise (cuda-philox), with Euler a
    info.add_text("parameters", "a red circle\nSteps: 3, Sampler: Euler a, CFG scale: 7, Seed: 9, Size: 64x64")
    Image.new("RGB", (64, 64)).save(tmp_path / "euler-a.png", pnginfo=info)
    update = seedlab_app.reproduction.open_png(str(tmp_path / "euler-a.png"))
    values = restored(update)
    # A1111's own Euler a draws its step noise as A1111's NV source does: cuda-philox runs it, no fallback
    assert values["rng"] == "cuda-philox" and values["scheduler"] == "Euler a"
    assert "cannot drive" not in update["png_notes"]
    assert update["regenerate_png"].interactive and update["pending"] is not None
    info = PngInfo()  # SD.Next runs diffusers' Euler a: its GPU noise cannot drive it, rng cpu is used
    info.add_text("parameters", "a red circle\nSteps: 3, Sampler: Euler a, CFG scale: 7, Seed: 9, Size: 64x64, "
                                "App: SD.Next")
    Image.new("RGB", (64, 64)).save(tmp_path / "euler-a-sdnext.png", pnginfo=info)
    update = seedlab_app.reproduction.open_png(str(tmp_path / "euler-a-sdnext.png"))
    values = restored(update)
    assert values["rng"] == "cpu" and values["scheduler"] == "EulerAncestralDiscreteScheduler"
    assert "draws noise at every step, which rng cuda-philox cannot drive here: rng cpu is used" in update["png_notes"]
    info = PngInfo()  # a sampler that draws nothing while stepping keeps A1111's GPU noise
    info.add_text("parameters", "a red circle\nSteps: 3, Sampler: Euler, CFG scale: 7, Seed: 9, Size: 64x64, RNG: NV")
    Image.new("RGB", (64, 64)).save(tmp_path / "euler.png", pnginfo=info)
    assert restored(seedlab_app.reproduction.open_png(str(tmp_path / "euler.png")))["rng"] == "cuda-philox"


def test_the_vary_note_says_before_the_run_that_the_anchors_prompt_varies(seedlab_app):
    anchor = Recipe(prompt="a red circle", seed=3, num_inference_steps=1).to_json()
    note = seedlab_app.anchor_prompt_note("a blue square", anchor)["vary_note"]
    assert note.visible and note.value.startswith("Variations start from the anchor's prompt 'a red circle'")
    assert not seedlab_app.anchor_prompt_note("a red circle", anchor)["vary_note"].visible
    assert not seedlab_app.anchor_prompt_note("a blue square", None)["vary_note"].visible
