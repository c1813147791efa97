"""PNG metadata: recipe -> PNG -> recipe, and A1111 `parameters` texts as A1111 writes them."""

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from seedlab import MAX_SEED, Recipe, Result, fingerprint, png_info, read_png, save_png
from seedlab.engine.samplers.names import A1111_SAMPLERS
from seedlab.files.metadata import SAMPLERS, UnreadableImage, parameters_text
from tests.helpers import read_parameters
from tests.test_links import ENV, recipes

IMAGE = Image.fromarray(np.arange(8 * 8 * 3, dtype=np.uint8).reshape(8, 8, 3))


def png_bytes(result: Result) -> io.BytesIO:
    buffer = io.BytesIO()
    result.image.save(buffer, format="PNG", pnginfo=png_info(result))
    buffer.seek(0)
    return buffer


def a1111_png(text: str) -> io.BytesIO:
    """A PNG the way A1111 saves one: only a `parameters` text chunk."""
    info = PngInfo()
    info.add_text("parameters", text)
    buffer = io.BytesIO()
    IMAGE.save(buffer, format="PNG", pnginfo=info)
    buffer.seek(0)
    return buffer


@settings(max_examples=150, deadline=None)
@given(recipes)
def test_a_png_restores_the_recipe_fingerprint_and_environment(recipe):
    result = Result(recipe, IMAGE, fingerprint(IMAGE), ENV)
    assert read_png(png_bytes(result)) == (recipe, result.fingerprint, ENV, [])


def test_save_png_writes_both_chunks_and_lossless_pixels(tmp_path):
    recipe = Recipe(prompt="a red circle, large", negative_prompt="blurry", seed=7,
                    scheduler="EulerAncestralDiscreteScheduler", guidance_scale=6.0)
    result = Result(recipe, IMAGE, fingerprint(IMAGE), ENV)
    path = save_png(result, tmp_path / "x.png")
    with Image.open(path) as image:
        assert fingerprint(image) == result.fingerprint
        chunks = image.text
    assert chunks["parameters"] == (
        'a red circle, large\nNegative prompt: blurry\n'
        'Steps: 20, Sampler: Euler a, Schedule type: Uniform, Scheduler: EulerAncestralDiscreteScheduler, '
        'CFG scale: 6.0, Seed: 7, Size: 64x64, Model: embedded, RNG: CPU, Full determinism: off, Dtype: float32, '
        f'Fingerprint: {result.fingerprint}, SeedLab: 0.1.0'
    )
    assert json.loads(chunks["seedlab"]) == {"version": 1, "recipe": recipe.to_json(),
                                             "fingerprint": result.fingerprint, "environment": ENV.to_dict()}


# Prompts as A1111 writes them: it strips the whole text, and a line that starts with
# "Negative prompt:" would end the prompt in any reader.
line = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r\n"), max_size=40)
prompts = st.lists(line, min_size=1, max_size=4).map("\n".join).map(str.strip).filter(
    lambda prompt: not any(text.startswith("Negative prompt:") for text in prompt.split("\n")))
a1111_recipes = st.builds(
    Recipe, prompt=prompts | st.just("a cat,\n\nwithout a Negative prompt: line"),
    negative_prompt=st.just("") | st.lists(line, min_size=1, max_size=3).map("\n".join),
    seed=st.integers(0, MAX_SEED), num_inference_steps=st.integers(1, 150),
    guidance_scale=st.floats(0, 30, allow_nan=False), width=st.integers(8, 256).map(lambda n: 8 * n),
    height=st.integers(8, 256).map(lambda n: 8 * n), scheduler=st.sampled_from(sorted(SAMPLERS.values())),
    model=st.sampled_from(["v1-5-pruned-emaonly", "sd_xl_base_1.0", "my model, v2: final"]),
)


def a1111_text(prompt: str, negative: str, fields: dict) -> str:
    """A reference writer following A1111's create_infotext: JSON-quote values with , : or a newline."""
    def quote(value):
        value = str(value)
        return json.dumps(value, ensure_ascii=False) if any(mark in value for mark in ",:\n") else value

    negative_line = f"\nNegative prompt: {negative}" if negative else ""
    params = ", ".join(key if key == value else f"{key}: {quote(value)}" for key, value in fields.items())
    return f"{prompt}{negative_line}\n{params}".strip()


@settings(max_examples=150, deadline=None)
@given(a1111_recipes, st.sampled_from(["Euler a", "DPM++ 2M Karras", "DPM++ 2M"]), st.booleans())
def test_a1111_texts_restore_prompt_seed_steps_cfg_size_and_sampler(recipe, sampler, karras_type):
    fields = {
        "Steps": recipe.num_inference_steps,
        "Sampler": sampler,
        **({"Schedule type": "Karras"} if karras_type else {}),
        "CFG scale": recipe.guidance_scale,
        "Seed": recipe.seed,
        "Size": f"{recipe.width}x{recipe.height}",
        "Model hash": "6ce0161689",
        "Model": recipe.model,
        "Lora hashes": "add_detail: 7c6bad76eb54, more_details: 3b8aa1d351ef",
        "Emphasis": "Original",
        "Version": "v1.10.1",
    }
    restored, print_, notes = read_parameters(a1111_text(recipe.prompt, recipe.negative_prompt, fields))
    # A1111's own samplers, run as A1111 runs them; a name's schedule wins over "Schedule type" (1.10's reading).
    schedule = "Automatic" if sampler.endswith(" Karras") or not karras_type else "Karras"
    expected = recipe.replace(scheduler=sampler.removesuffix(" Karras"), schedule=schedule, rng="cuda-philox",
                              prompt_syntax="a1111",  # A1111's text: its prompt read with its syntax
                              lora_hashes="add_detail: 7c6bad76eb54, more_details: 3b8aa1d351ef",
                              model_hash="6ce0161689",  # the checkpoint file, found and checked by it
                              to_8bit="truncate")  # A1111's 8-bit step: astype(np.uint8)
    assert restored == expected  # no RNG: A1111's GPU noise
    assert print_ is None
    assert not any("Model hash" in note for note in notes)  # a recipe field: the checkpoint file is found by it
    assert not any("Lora hashes" in note for note in notes)  # a recipe field: the files a LoRA is found by
    assert not any("Emphasis" in note for note in notes)  # A1111's emphasis mode is a recipe field
    assert not any("Karras" in note for note in notes)  # the schedule is applied, not noted


@settings(max_examples=150, deadline=None)
@given(a1111_recipes)
def test_seedlabs_own_parameters_text_reads_back_without_the_json_chunk(recipe):
    restored, print_, notes = read_parameters(parameters_text(recipe, "ab" * 32))
    assert (restored, print_, notes) == (recipe, "ab" * 32, [])


A1111_EXAMPLE = """\
masterpiece, a lighthouse on a cliff,
(stormy sea:1.2), <lora:add_detail:0.5>
Negative prompt: lowres, bad anatomy
worst quality
Steps: 28, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 6.5, Seed: 3839811283, Size: 512x768, \
Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, Denoising strength: 0.45, Clip skip: 2, \
Hires upscale: 2, Hires steps: 10, Hires upscaler: Latent, \
Lora hashes: "add_detail: 7c6bad76eb54", TI hashes: "easynegative: c74b4e810b03", Version: v1.9.4"""


def test_a_real_a1111_png_restores_its_recipe_with_notes():
    recipe, print_, environment, notes = read_png(a1111_png(A1111_EXAMPLE))
    assert recipe == Recipe(
        prompt="masterpiece, a lighthouse on a cliff,\n(stormy sea:1.2), <lora:add_detail:0.5>",
        negative_prompt="lowres, bad anatomy\nworst quality", seed=3839811283, num_inference_steps=28,
        guidance_scale=6.5, width=512, height=768, scheduler="DPM++ 2M", schedule="Karras",
        model="v1-5-pruned-emaonly", rng="cuda-philox", hires_scale=2.0, hires_steps=10, denoising_strength=0.45,
        hires_upscaler="Latent", prompt_syntax="a1111", clip_skip=2, lora_hashes="add_detail: 7c6bad76eb54",
        ti_hashes="easynegative: c74b4e810b03", model_hash="6ce0161689", to_8bit="truncate",
    )
    assert (print_, environment) == (None, None)
    text = "\n".join(notes)
    assert "Model hash" not in text, text  # a recipe field: the checkpoint is found and checked by it
    # the recipe's: applied (test_lora, test_text_inversion)
    assert "add_detail" not in text and "easynegative" not in text
    assert "Karras" not in text and "hires" not in text.lower()  # both are run, not noted


@pytest.mark.parametrize("sampler", [name for name in SAMPLERS if name not in A1111_SAMPLERS])
def test_a1111s_samplers_that_are_not_k_diffusions_are_its_own(sampler):
    """DDIM, PLMS, UniPC and LCM ran as diffusers classes; they run as A1111 runs them now (test_a1111_timesteps)."""
    text = f"x\nSteps: 20, Sampler: {sampler}, CFG scale: 7, Seed: 1, Size: 64x64, RNG: CPU"
    recipe, _, notes = read_parameters(text)
    assert (recipe.scheduler, notes) == (f"{sampler} (A1111)", [])


@pytest.mark.parametrize(("sampler", "label", "schedule"), [
    *[(name, name, "Automatic") for name in A1111_SAMPLERS], ("DPM++ 2M Karras", "DPM++ 2M", "Automatic"),
    ("Euler a Exponential", "Euler a", "Exponential"), ("DPM++ 2M SDE Heun Karras", "DPM++ 2M SDE Heun", "Karras"),
    ("DPM++ 3M SDE Exponential", "DPM++ 3M SDE", "Automatic")])
def test_a1111_k_diffusion_samplers_are_kept_as_a1111_names_them(sampler, label, schedule):
    text = f"x\nSteps: 20, Sampler: {sampler}, CFG scale: 7, Seed: 1, Size: 64x64, RNG: CPU"
    recipe, _, notes = read_parameters(text)
    assert (recipe.scheduler, recipe.schedule, notes) == (label, schedule, [])


@pytest.mark.parametrize("sampler", ["Euler SMEA Dy", "Kohaku_LoNyu_Yog"])  # DDIM CFG++, Restart...: A1111's
def test_a_sampler_without_an_equivalent_uses_the_default_with_a_note(sampler):
    recipe, _, notes = read_parameters(f"x\nSteps: 20, Sampler: {sampler}, CFG scale: 7, Seed: 1, Size: 64x64")
    assert recipe.scheduler == "default"
    assert f"Sampler {sampler} has no clear diffusers equivalent: the model's default scheduler is used" in notes


def test_texts_without_a_parameter_line_are_all_prompt():
    recipe, _, notes = read_parameters("a cat: cute, fluffy\non a mat")
    assert (recipe.prompt, recipe.seed, notes) == ("a cat: cute, fluffy\non a mat", 0, [])


@pytest.mark.parametrize(("line", "named"), [("Steps: 0", "num_inference_steps"), ("Size: 500x500", "width"),
                                             ("CFG scale: 99", "guidance_scale")])
def test_a1111_values_out_of_range_are_errors_naming_the_field(line, named):
    with pytest.raises(ValueError, match=named):
        read_parameters(f"x\nSampler: Euler, Model: m, Version: 1, {line}")


@pytest.mark.parametrize(("line", "named"), [("Steps: x", "Steps"), ("Seed: -1", "Seed"), ("Size: 512", "Size")])
def test_unreadable_a1111_values_are_named_in_a_note_and_the_rest_is_read(line, named):
    recipe, _, notes = read_parameters(f"x\nSampler: Euler, Model: m, Version: 1, CFG scale: 4, {line}")
    assert (recipe.prompt, recipe.model, recipe.guidance_scale) == ("x", "m", 4.0)
    assert any(note.startswith(f"{line} could not be read ({named} must be") for note in notes), notes


def test_files_without_a_recipe_are_errors(tmp_path):
    plain = io.BytesIO()
    IMAGE.save(plain, format="PNG")
    plain.seek(0)
    with pytest.raises(ValueError, match="no recipe"):
        read_png(plain)
    jpeg = io.BytesIO()
    IMAGE.save(jpeg, format="JPEG")
    jpeg.seek(0)
    with pytest.raises(ValueError, match="no recipe"):
        read_png(jpeg)
    with pytest.raises(ValueError, match="not a PNG, JPEG or WebP"):
        read_png(io.BytesIO(b"not an image"))
    chunk = PngInfo()
    chunk.add_text("seedlab", json.dumps({"version": 1, "recipe": {"prompt": "x", "seed": -5}}))
    IMAGE.save(tmp_path / "bad.png", pnginfo=chunk)
    with pytest.raises(ValueError, match="seedlab chunk: seed must be"):
        read_png(tmp_path / "bad.png")


def test_only_files_that_cannot_be_opened_as_images_are_unreadable(tmp_path):
    gif = io.BytesIO()
    IMAGE.save(gif, format="GIF")
    for unreadable in (io.BytesIO(b"not an image"), gif, tmp_path / "missing.png", io.BytesIO(b"")):
        if hasattr(unreadable, "seek"):
            unreadable.seek(0)
        with pytest.raises(UnreadableImage) as error:
            read_png(unreadable)
        assert str(tmp_path) not in str(error.value)  # no server paths in messages
    plain = io.BytesIO()
    IMAGE.save(plain, format="PNG")
    plain.seek(0)
    with pytest.raises(ValueError) as error:  # no recipe: read, then refused
        read_png(plain)
    assert not isinstance(error.value, UnreadableImage)


def test_another_tools_value_out_of_range_is_named_and_the_rest_of_its_recipe_restored():
    """Issue 30: one odd value (Steps: 0, a CFG past the range) is left at its default with a note naming it and
    what the file says; the other fields are restored (the whole file was refused)."""
    text = "x\nNegative prompt: y\nSteps: 0, Sampler: Euler, CFG scale: 700, Seed: 1, Size: 64x64"
    recipe, _, _, notes = read_png(a1111_png(text))
    assert (recipe.prompt, recipe.negative_prompt, recipe.seed, recipe.width, recipe.scheduler) == ("x", "y", 1, 64,
                                                                                                   "Euler")
    assert (recipe.num_inference_steps, recipe.guidance_scale) == (Recipe(prompt="").num_inference_steps,
                                                                   Recipe(prompt="").guidance_scale)
    assert any(note.startswith("Steps '0' from the file cannot be used here") for note in notes)
    assert any(note.startswith("Guidance scale '700.0' from the file cannot be used here (must be") for note in notes)


def test_inline_lora_tags_are_kept_for_their_syntax_and_other_tags_named_in_a_note():
    prompt = "a castle <lora:add_detail:0.8>, <hypernet:anime_v2:1>\nat dusk <lora:add_detail:0.8> <lyco:film:0.4>"
    text = (f"{prompt}\nNegative prompt: <lora:bad_hands:1>\n"
            "Steps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 64x64")
    recipe, _, notes = read_parameters(text)
    assert (recipe.prompt, recipe.negative_prompt) == (prompt, "<lora:bad_hands:1>")  # as written
    assert recipe.prompt_syntax == "a1111"  # A1111 applies the LoRA tags (test_lora.py): no note for them
    (note,) = [note for note in notes if "anime_v2" in note]
    assert note.startswith("<hypernet:anime_v2:1> in the prompt: hypernetworks are not run here")
    assert not any("add_detail" in note or "film" in note for note in notes)
    assert parameters_text(recipe).startswith(prompt + "\nNegative prompt: <lora:bad_hands:1>\n")  # round trip
    # SD.Next's text: its own prompt parser, read as plain text here, so the tags are words and a note says so
    _, _, notes = read_parameters(f"{prompt}\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, App: SD.Next")
    (note,) = [note for note in notes if "extra networks" in note]
    assert note.startswith("<lora:add_detail:0.8>, <hypernet:anime_v2:1>, <lyco:film:0.4> in the prompt: ")
    _, _, notes = read_parameters("a castle <b>bold</b> at 3:00\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5")
    assert not any("extra networks" in note or "hypernetworks" in note for note in notes)


@pytest.mark.parametrize(("word", "rng"), [("NV", "cuda-philox"), ("GPU", "cuda-philox"), ("CPU", "cpu")])
def test_a1111_rng_words_in_a_png_restore_the_noise_source(word, rng):
    recipe, _, _, notes = read_png(a1111_png(f"x\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 512x512, "
                                             f"RNG: {word}"))
    assert recipe.rng == rng and notes == []


def test_seedlabs_device_rng_reads_back_from_the_text_alone():
    # A1111's GPU is cuda-philox when read; SeedLab's own key keeps a SeedLab PNG's "device" exact.
    recipe = Recipe(prompt="x", rng="device", scheduler="EulerAncestralDiscreteScheduler")
    result = Result(recipe, IMAGE, fingerprint(IMAGE), ENV)
    text = png_info(result).chunks[0][1].decode("utf-8").removeprefix("parameters\0")
    assert "RNG: GPU, SeedLab RNG: device" in text
    assert read_png(a1111_png(text))[0] == recipe
    assert read_png(png_bytes(result))[0] == recipe


@pytest.mark.parametrize("prompt, noted", [
    ("a [cat:dog:0.5] in a field", True), ("a [dog:10] in a field", True), ("[red|blue] car", True),
    ("a cat AND a dog", True), ("a [cat] (dog:1.2), ANDROID", False)])
def test_prompt_editing_alternation_and_and_are_named_as_not_run(prompt, noted):
    recipe, _, notes = read_parameters(f"{prompt}\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64, "
                                       "RNG: CPU")
    assert recipe.prompt == prompt and recipe.prompt_syntax == "a1111"
    assert any("prompt editing, alternation or AND" in note for note in notes) == noted, notes
