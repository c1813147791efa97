"""Links, PNG metadata and /reproduce: the PNGs the app serves, links from the grid, dropped files and what they
restore, regenerations and their verdicts."""

import json
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
from gradio_client.exceptions import AppError
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from seedlab import Recipe, encode_link, fingerprint, generate, read_png, save_png
from seedlab.serving.reproduction import CONSEQUENCES
from tests.conftest import APP_THREADS
from tests.helpers import PROMPT, STEPS, last, page_request, pixels, solo, torch_threads
from webui.fields import RESTORED
from webui.requests import base_url


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

    wordy = save_png(replace(quick, recipe=quick.recipe.replace(negative_prompt="blurry, " * 70)), tmp_path / "n.png")
    update = seedlab_app.reproduction.open_png(str(wordy))  # no smaller render shortens a prompt: say what to change
    assert "Negative prompt must be at most" in update["png_notes"] and update["png_nearest"] is None
    assert "Change Negative prompt in the controls, then press Generate." in update["png_notes"]
    assert "smaller" not in update["png_notes"] and not update["use_nearest"].interactive

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


def test_a_dropped_file_is_read_adapted_and_admitted_once(seedlab_app, tmp_path, monkeypatch):
    """One pass down the layers: the file's bytes are read, its recipe adapted to this server and checked, once."""
    from seedlab.files import metadata
    from seedlab.serving import admission, reproduction

    result = generate(seedlab_app.default, Recipe(prompt=PROMPT, seed=4, num_inference_steps=1,
                                                  model=seedlab_app.store.default))
    path = save_png(result, tmp_path / "own.png")
    calls = {"read": 0, "adapt": 0, "recipe": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(reproduction, "read_metadata", counted("read", metadata.read_metadata))
    monkeypatch.setattr(metadata, "read_metadata", counted("read", metadata.read_metadata))
    monkeypatch.setattr(admission.Admission, "adapt", counted("adapt", admission.Admission.adapt))
    monkeypatch.setattr(admission.Admission, "recipe", counted("recipe", admission.Admission.recipe))
    update = seedlab_app.reproduction.open_png(str(path))
    assert calls == {"read": 1, "adapt": 1, "recipe": 1}
    assert update["png_notes"].startswith("Restored from the PNG (seed 4). It runs as written")


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
