"""Links, PNG metadata and /reproduce: the PNGs the app serves, links from the grid, dropped files and what they
restore, regenerations and their verdicts."""

import json
import re
from dataclasses import replace
from pathlib import Path
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

CORPUS = Path(__file__).parent / "corpus"  # other tools' real files (SOURCES.md)
# Texts other tools wrote, as a metadata parser's tests quote them (a Go `stablediffusion` package's
# TestDecodeMetadata_SD_CPP and TestDecodeMetadata_Fooocus): sd.cpp's Flux run names no checkpoint (`Model: `), and
# Fooocus's A1111 scheme writes its raw prompts, the negative one empty, beside a styled prompt of 800 characters.
SDCPP_FLUX = ("Person in a pirate costume\nSteps: 30, CFG scale: 1.000000, Guidance: 3.500000, Eta: 0.000000, Seed: "
              "1177101575, Size: 512x512, Model: , RNG: cuda, Sampler: euler discrete, TE: clip_l.safetensors, TE: "
              "t5-v1_1-xxl-encoder-Q3_K_S.gguf, Unet: PJ0_385_exclusiveTA_00001_BF16_Q4_K_S.gguf, VAE: ae.safetensors, "
              "Version: stable-diffusion.cpp")
FOOOCUS_STYLED = ("cinematic still A sunflower field . emotional, harmonious, vignette, 4k epic detailed, shot on "
                  "kodak, 35mm photo, sharp focus, high budget, cinemascope, moody, epic, gorgeous, film grain, "
                  "grainy, A sunflower field, highly detailed, magic, peaceful, flowing, beautiful, atmosphere, "
                  "radiant, magical, sharp focus, very coherent, intricate, elegant, epic, colorful, amazing "
                  "composition, cinematic, artistic, fine detail, professional, clear, joyful, unique, expressive, "
                  "cute, iconic, best, vivid, awesome, perfect, ambient background, pristine, creative")
FOOOCUS = (f"{FOOOCUS_STYLED}\nSteps: 30, Sampler: DPM++ 2M SDE Karras, Seed: 127589946317439009, Size: 512x512, CFG "
           'scale: 4, Sharpness: 2, ADM Guidance: "(1.5, 0.8, 0.3)", Model: juggernautXL_v8Rundiffusion, Model hash: '
           "aeb7e9e689, Performance: Speed, Scheduler: karras, VAE: Default (model), Raw prompt: A sunflower field, "
           'Raw negative prompt: , Clip skip: 2, Lora hashes: "sd_xl_offset_example-lora_1.0: 4852686128", Lora '
           'weights: "sd_xl_offset_example-lora_1.0: 0.1", Version: Fooocus v2.5.5')


def parameters_png(path, text: str) -> str:
    """A small PNG carrying `text` as its `parameters` chunk, as A1111-style writers leave it."""
    info = PngInfo()
    info.add_text("parameters", text)
    Image.new("RGB", (8, 8)).save(path, pnginfo=info)
    return str(path)


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
    # Issue 54: a link written by hand (no v, no fp) is a recipe too, made with nothing to compare.
    image, verdict = client.predict(link_or_recipe=f"/?prompt={PROMPT.replace(' ', '+')}&seed=12&steps=4",
                                    api_name="/reproduce")
    assert verdict["original_fingerprint"] is None and verdict["exact"] is False
    made = read_png(image)[0]
    assert (made.prompt, made.seed, made.num_inference_steps) == (PROMPT, 12, 4)


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


def test_a_hand_written_link_fills_the_controls_and_says_there_is_nothing_to_compare(seedlab_app):
    """Issue 54: `/?prompt=a+blue+square&seed=7` was refused ("v is missing; fp is missing"): it opens as a recipe
    (the fields it leaves out at this server's model defaults), nothing is regenerated; a bad key is still named."""
    update = seedlab_app.reproduction.open_link(page_request("prompt=a+blue+square&seed=7"))
    values, defaults = restored(update), seedlab_app.admission.defaults()
    assert (values["prompt"], values["seeds"]) == ("a blue square", "7")
    assert (values["width"], values["guidance_scale"]) == (defaults["width"], defaults["guidance_scale"])
    assert update["pending"] is None and "no pixel fingerprint" in update["verdict_text"]
    assert "Generate makes it" in update["verdict_text"] and update["link_box"].endswith("?prompt=a+blue+square&seed=7")
    update = seedlab_app.reproduction.open_link(page_request("prompt=a&seed=x&steps=0&bogus=1"))
    assert update["verdict_text"].startswith("This link cannot be opened. link: unknown key 'bogus'")
    assert "seed must be" in update["verdict_text"] and "steps (num_inference_steps) must be" in update["verdict_text"]
    assert update["pending"] is None and not set(update) & set(RESTORED)


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
                                          "must be at most 50 on this server, got 60.")
    assert update["pending"] is None and not update["regenerate_png"].interactive
    values = restored(update)  # every field the file holds is restored all the same
    assert (values["seeds"], values["num_inference_steps"], values["prompt"]) == ("3", 60, PROMPT)
    assert update["use_nearest"].interactive and update["png_nearest"]["num_inference_steps"] == 50
    assert ("The nearest recipe this server runs (not the original image): seed 3 at 64x64, 50 steps"
            in update["png_notes"])
    nearest = restored(seedlab_app.reproduction.use_nearest(update["png_nearest"]))
    assert (nearest["seeds"], nearest["num_inference_steps"], nearest["prompt"]) == ("3", 50, PROMPT)

    wordy = save_png(replace(quick, recipe=quick.recipe.replace(negative_prompt="blurry, " * 70)), tmp_path / "n.png")
    update = seedlab_app.reproduction.open_png(str(wordy))  # issue 54: its text shortened, the words that go shown
    assert "Negative prompt must be at most" in update["png_notes"] and update["use_nearest"].interactive
    assert update["png_nearest"]["negative_prompt"] == ", ".join(["blurry"] * 62)
    assert 'Negative prompt cut to 494 characters (what goes: "blurry, blurry, blurry, blurry, blurry, blurry, ' \
           'blurry, blurry")' in update["png_notes"]
    assert "smaller" not in update["png_notes"] and "Change Negative prompt" not in update["png_notes"]

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


def test_a_loractl_file_restores_its_prompt_and_seed_and_names_the_scheduled_loras(seedlab_app):
    """Issue 54: one extension's LoRA syntax (loractl's weight@step schedules) restored nothing ("LoRA ...'s weight
    must be a number, got '0@0,1@0.4'"); each such tag costs that tag, named in a note, and the rest is restored."""
    update = seedlab_app.reproduction.open_png(str(CORPUS / "cheald-sd-webui-loractl/00009-1449410826.png"))
    values, notes = restored(update), update["png_notes"]
    assert (values["prompt"].strip(), values["seeds"], values["num_inference_steps"]) == (
        "mechanical bird,  st4rw4ar5at4t", "1449410826", 20)
    assert (values["width"], values["scheduler"], values["guidance_scale"]) == (512, "Euler a", 7)
    assert notes.startswith("Restored from the PNG (seed 1449410826).")
    for tag in ("<lora:st4rw4ar5at4t:0@0,1@0.4>", "<lora:MechanicalBird:1@0,0.5@0.5>"):
        assert f"- {tag}: its weights are scheduled over the steps (weight@step), the syntax of A1111's loractl " \
               "extension, which SeedLab does not run: the tag is taken out of the prompt and the LoRA is not " \
               "applied, so the image differs" in notes
    assert "must be a number" not in notes and update["regenerate_png"].interactive
    update = seedlab_app.reproduction.open_png(str(CORPUS / "cheald-sd-webui-loractl/00016-1449410826.png"))
    assert restored(update)["prompt"].strip().startswith("pixelart, mecha on the beach")  # te=1:unet=0@0,1@1
    assert "<lora:pixel:te=1:unet=0@0,1@1>: its weights are scheduled" in update["png_notes"]


def test_a_prompt_too_long_for_this_server_offers_it_shortened_with_the_words_that_go(seedlab_app, tmp_path):
    """Issue 54: Efficiency Nodes' and rgthree's graphs and a Fooocus file ended at "Change Negative prompt in the
    controls": the nearest recipe now cuts each text at a comma within the limit and shows what goes."""
    limit = seedlab_app.admission.limits.max_prompt_chars
    update = seedlab_app.reproduction.open_png(
        str(CORPUS / "custom-nodes/jags111-efficiency-nodes-comfyui/HiResfix_workflow.png"))
    notes, nearest = update["png_notes"], update["png_nearest"]
    assert "Negative prompt must be at most 500 characters" in notes and update["use_nearest"].interactive
    whole = restored(update)["negative_prompt"]
    assert len(nearest["negative_prompt"]) <= limit and whole.startswith(nearest["negative_prompt"])
    gone = whole[len(nearest["negative_prompt"]):].strip(" ,")
    assert f'Negative prompt cut to {len(nearest["negative_prompt"])} characters (what goes: "{gone}")' in notes
    assert "Change Negative prompt" not in notes and "LoRA 'None'" not in notes  # its loader's None: no LoRA
    assert nearest["prompt"] == restored(update)["prompt"] and str(nearest["seed"]) == "1106939166727686"
    filled = seedlab_app.reproduction.use_nearest(nearest)
    assert restored(filled)["negative_prompt"] == nearest["negative_prompt"]
    update = seedlab_app.reproduction.open_png(str(CORPUS / "custom-nodes/rgthree-rgthree-comfy/"
                                                            "rgthree_advanced_metadata.png"))
    assert "; Prompt cut to " in update["png_notes"] and "; Negative prompt cut to " in update["png_notes"]
    assert max(len(update["png_nearest"][name]) for name in ("prompt", "negative_prompt")) <= limit
    update = seedlab_app.reproduction.open_png(parameters_png(tmp_path / "fooocus.png", FOOOCUS))
    assert update["png_nearest"]["prompt"] == FOOOCUS_STYLED.removesuffix(", awesome, perfect, ambient background, "
                                                                         "pristine, creative")
    assert ('Prompt cut to 492 characters (what goes: "awesome, perfect, ambient background, pristine, creative")'
            in update["png_notes"])
    assert "Raw negative prompt" not in update["png_notes"]  # an empty value says nothing
    assert "Raw prompt: A sunflower field has no SeedLab equivalent" in update["png_notes"]
    # Fooocus's A1111 text: its ComfyUI sampler and `Scheduler: karras` (not SeedLab's Scheduler key), its VAE
    # "Default (model)" the checkpoint's own, so clip skip is not refused and no VAE is missing.
    values = restored(update)
    assert (values["scheduler"], values["schedule"], values["clip_skip"]) == ("dpmpp_2m_sde_gpu", "karras", 2)
    assert values["vae"] == "" and "VAE" not in update["png_notes"] and "Clip skip" not in update["png_notes"]


def test_empty_names_and_none_are_absent_not_notes(seedlab_app, tmp_path):
    """Issue 54: sd.cpp's Flux file said "Model '' from the file cannot be used here", Efficiency Nodes' loaders
    "LoRA 'None' is not found": a widget's None and an empty name mean nothing chosen."""
    update = seedlab_app.reproduction.open_png(parameters_png(tmp_path / "flux.png", SDCPP_FLUX))
    assert restored(update)["prompt"] == "Person in a pirate costume" and restored(update)["seeds"] == "1177101575"
    assert "Model ''" not in update["png_notes"] and "cannot be used here" not in update["png_notes"]
    for name in ("HiResfix_workflow.png", "xy-plot-node.png", "tiled-upscaler-script.png"):
        notes = seedlab_app.reproduction.open_png(str(CORPUS / "custom-nodes/jags111-efficiency-nodes-comfyui" /
                                                      name))["png_notes"]
        assert "'None'" not in notes and "LoRA" not in notes, (name, notes)
    text = "a cat <lora:None:1> <lora:ok:0.5>\nSteps: 3, Sampler: Euler, CFG scale: 7, Seed: 9, Size: 64x64, VAE: None"
    update = seedlab_app.reproduction.open_png(parameters_png(tmp_path / "none.png", text))
    assert "None" not in update["png_notes"] and "<lora:None" not in restored(update)["prompt"]


def test_an_image_only_its_own_tool_makes_is_not_offered_for_comparison(seedlab_app):
    """Issue 54: a NovelAI file said "the image cannot be made here" while "Regenerate the dropped image and compare"
    stayed enabled; its recipe is restored for Generate, with nothing to compare."""
    update = seedlab_app.reproduction.open_png(str(CORPUS / "sd-parsers/novelai1_cropped.png"))
    assert restored(update)["seeds"] == "2253955223" and not update["regenerate_png"].interactive
    assert update["pending"] is None and update["png_now"] is None
    assert "Only its own tool can make this image, so there is nothing to compare" in update["png_notes"]


def test_a_file_that_restores_nothing_resets_the_controls(seedlab_app, tmp_path):
    """Issue 54: after a file that restored nothing, the previous file's prompt stayed in the box as if it were this
    file's: the controls go back to the page's defaults, and the notes say so."""
    first = seedlab_app.reproduction.open_png(parameters_png(tmp_path / "first.png", "a first prompt\nSteps: 3, "
                                                             "Sampler: Euler, CFG scale: 7, Seed: 9, Size: 64x64"))
    assert restored(first)["prompt"] == "a first prompt"
    update = seedlab_app.reproduction.open_png(str(CORPUS / "sd-metadata/empty.png"))
    assert update["png_notes"].startswith("Nothing was restored from this PNG: file has no recipe")
    assert update["png_notes"].endswith("The controls were reset to the page's defaults.")
    defaults = seedlab_app.admission.defaults()
    assert restored(update)["prompt"] == "" and restored(update)["seeds"] == str(defaults["seed"])
    assert restored(update)["num_inference_steps"] == defaults["num_inference_steps"]
    assert update["pending"] is None and not update["regenerate_png"].interactive
    (tmp_path / "text.png").write_text("not an image")
    assert restored(seedlab_app.reproduction.open_png(str(tmp_path / "text.png")))["prompt"] == ""


def test_compel_weights_in_an_invokeai_prompt_are_named_not_called_restored(seedlab_app, tmp_path):
    """Issue 54: an InvokeAI file with `+++` weights said "everything in the PNG was restored", yet SeedLab reads
    compel's syntax as plain text: a note says the weights are not applied."""
    metadata = {"generation_mode": "txt2img", "positive_prompt": "a (red cat)+++ on a mat, grass---",
                "negative_prompt": "", "width": 64, "height": 64, "seed": 5, "cfg_scale": 7, "steps": 3,
                "scheduler": "euler", "rand_device": "cpu"}
    info = PngInfo()
    info.add_text("invokeai_metadata", json.dumps(metadata))
    Image.new("RGB", (8, 8)).save(tmp_path / "invoke.png", pnginfo=info)
    notes = seedlab_app.reproduction.open_png(str(tmp_path / "invoke.png"))["png_notes"]
    assert "everything in the PNG was restored" not in notes
    assert "weights words with compel's syntax, which InvokeAI reads ('a (red cat)+++'" in notes
    assert "the weights are not applied and the image differs" in notes
    real = seedlab_app.reproduction.open_png(str(CORPUS / "sd-parsers/invokeai_imeta1.png"))["png_notes"]
    assert "- the negative prompt weights words with compel's syntax, which InvokeAI reads ('grainy+'" in real
    plain = seedlab_app.reproduction.open_png(str(CORPUS / "sd-metadata/invokeai.png"))["png_notes"]
    assert "compel" not in plain  # plain words, no weights
