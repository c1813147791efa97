"""Interop: A1111 text read as A1111 reads it, written so A1111 reads it back; JPEG/WebP; `seedlab info`."""

import io
import json

import numpy as np
import pytest
from PIL import Image

from seedlab import Recipe, Result, fingerprint
from seedlab.cli import main
from seedlab.files.infotext import A1111_KEYS, parameters_text, parse_pairs, read_infotext
from seedlab.files.metadata import read_chunks, read_metadata, recipe_from_reading
from seedlab.serving.reproduction import Original, compare, original_from_png
from tests.test_links import ENV

IMAGE = Image.fromarray(np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3))
DUCK = ("photo of a duck\nNegative prompt: monochrome\n"
        "Steps: 15, Sampler: UniPC, CFG scale: 5, Seed: 235284042, Size: 512x400, Model hash: c0d1994c73, "
        "Model: realistic_realisticVisionV20_v20")


def fields_of(text: str) -> dict:
    return read_infotext(text)[0]


def test_json_values_anywhere_in_the_parameter_line_are_read_and_noted():
    fields, notes, _ = read_infotext(DUCK + ', Hashes: {"vae": "c6a580b13a", "model": "c0d1994c73"}')
    assert (fields["seed"], fields["num_inference_steps"], fields["guidance_scale"]) == (235284042, 15, 5.0)
    assert (fields["width"], fields["height"], fields["prompt"]) == (512, 400, "photo of a duck")
    assert any(note.startswith('Hashes: {"vae": "c6a580b13a"') for note in notes)
    civitai = ('x\nSteps: 8, Sampler: Euler, CFG scale: 1, Seed: 12346789098, Size: 832x1216, Civitai resources: '
               '[{"type":"checkpoint","modelVersionId":123,"modelName":"a, b: c"}], Civitai metadata: {}')
    fields, notes, _ = read_infotext(civitai)
    assert (fields["seed"], fields["prompt"], fields["width"]) == (12346789098, "x", 832)
    assert any(note.startswith("Civitai resources: [{") for note in notes)


def test_lines_after_the_parameter_line_become_notes_not_prompt():
    fields, notes, _ = read_infotext(DUCK + "\nTemplate: photo of a {duck|goose}\nNegative Template: monochrome")
    assert (fields["prompt"], fields["negative_prompt"], fields["seed"]) == ("photo of a duck", "monochrome", 235284042)
    assert sum("a line after the parameters" in note for note in notes) == 2


def test_spelling_variants_and_minimal_lines():
    assert fields_of("x\nSteps: 20, Sampler: euler_simple, CFG Scale: 8.0, Seed: 0, Size: 512x512")[
        "guidance_scale"] == 8.0
    fields = fields_of("a beautiful landscape\nSteps: 20, Size: 512x768")
    assert fields == {"prompt": "a beautiful landscape", "negative_prompt": "", "num_inference_steps": 20,
                      "width": 512, "height": 768, "rng": "cuda-philox",  # A1111's default GPU noise
                      "prompt_syntax": "a1111",  # and A1111's reading of prompts
                      "to_8bit": "truncate"}  # and its 8-bit step, astype(np.uint8)
    reading = read_chunks({"parameters": "a beautiful landscape\nSteps: 20, Size: 512x768"})
    assert (recipe_from_reading(reading).width, recipe_from_reading(reading).height) == (512, 768)


def test_quoted_values_and_flags_parse_as_a1111_writes_them():
    assert parse_pairs('Steps: 20, Lora hashes: "a: 1, b: 2", Tiled Diffusion, Seed: 5') == [
        ("Steps", "20"), ("Lora hashes", "a: 1, b: 2"), ("Tiled Diffusion", "Tiled Diffusion"), ("Seed", "5")]
    assert parse_pairs("a cat, cute: fluffy") == [("a cat", "a cat"), ("cute", "fluffy")]
    assert parse_pairs('Steps: "unterminated') is None


def test_a_foreign_file_without_rng_says_a1111_draws_noise_on_the_gpu():
    fields, notes, _ = read_infotext(DUCK)
    assert fields["rng"] == "cuda-philox"
    assert any("no RNG field" in note and "GPU" in note and "cuda-philox" in note for note in notes)
    fields, notes, _ = read_infotext(DUCK + ", RNG: CPU")
    assert fields["rng"] == "cpu" and not any("no RNG" in note for note in notes)
    for word in ("GPU", "NV"):
        fields, notes, _ = read_infotext(DUCK + f", RNG: {word}")
        # Nothing is named: A1111's own UniPC runs here as A1111 runs it (engine/samplers/timesteps.py).
        assert fields["rng"] == "cuda-philox" and fields["model_hash"] == "c0d1994c73"
        assert fields["scheduler"] == "UniPC (A1111)" and notes == []
    comfy = read_infotext(DUCK + ", Version: ComfyUI")  # ComfyUI draws on the CPU: SeedLab's default, no note
    assert "rng" not in comfy[0] and not any("RNG" in note for note in comfy[1])


@pytest.mark.parametrize(
    "size, cards",
    [((512, 512), None), ((640, 512), None),
     ((1024, 1024), "matches cards with enough threads (L4, A10G, H100 PCIe), not T4"),
     ((1280, 1280), "matches cards with enough threads (A10G, H100 PCIe), not T4, L4"),
     ((1536, 1536), "matches cards with enough threads (H100 PCIe), not T4, L4, A10G"),
     ((2048, 2048), "matches none of T4, L4, A10G, H100 PCIe")],
)
def test_gpu_noise_past_a_cards_threads_is_noted_with_the_cards_it_matches(size, cards):
    text = DUCK.replace("Size: 512x400", f"Size: {size[0]}x{size[1]}")
    for rng in ("", ", RNG: GPU", ", RNG: NV"):
        fields, notes, _ = read_infotext(text + rng)
        assert fields["rng"] == "cuda-philox"
        noted = [note for note in notes if "starting noise values" in note]
        if cards is None or rng == ", RNG: NV":  # NV is computed on the CPU: the same on every card
            assert noted == []
        else:
            assert len(noted) == 1 and noted[0].endswith("rng cuda-philox " + cards)


def test_gpu_noise_with_an_ancestral_sampler_runs_as_a1111s_nv_source():
    """A1111's own Euler a draws its step noise from NV's philox counters, which rng cuda-philox computes."""
    fields, notes, _ = read_infotext(DUCK.replace("UniPC", "Euler a") + ", RNG: NV")
    assert fields["rng"] == "cuda-philox" and fields["scheduler"] == "Euler a"
    assert not any("every step" in note for note in notes)


def test_gpu_noise_with_a_diffusers_ancestral_scheduler_says_why_it_cannot_run():
    text = DUCK.replace("UniPC", "Euler a") + ", RNG: NV, App: SD.Next"  # SD.Next runs diffusers' schedulers
    fields, notes, _ = read_infotext(text)
    assert fields["rng"] == "cuda-philox" and fields["scheduler"] == "EulerAncestralDiscreteScheduler"
    assert any(note.startswith("EulerAncestralDiscreteScheduler draws noise at every step") for note in notes)


def test_the_writer_speaks_a1111_words_from_one_key_table():
    recipe = Recipe(prompt="a red circle", seed=3, scheduler="DPMSolverMultistepScheduler")
    text = parameters_text(recipe)
    line = dict(parse_pairs(text.split("\n")[-1]))
    assert (line["Sampler"], line["Schedule type"], line["RNG"]) == ("DPM++ 2M", "Uniform", "CPU")
    assert "Variation seed" not in line and "Seed resize from" not in line  # written only when used
    assert set(A1111_KEYS.values()) >= {"Steps", "Sampler", "CFG scale", "Seed", "Size", "RNG"}
    for rng, words in [("cpu", {"RNG": "CPU"}), ("device", {"RNG": "GPU", "SeedLab RNG": "device"}),
                       ("cuda-philox", {"RNG": "NV"}), ("numpy-pcg64", {"SeedLab RNG": "numpy-pcg64"})]:
        text = parameters_text(recipe.replace(rng=rng))
        assert {key: value for key, value in parse_pairs(text.split("\n")[-1]) if "RNG" in key} == words
        assert read_infotext(text)[0]["rng"] == rng and read_infotext(text)[1] == []  # each reads back exactly
    # The seed fields (variation seed, seed resize, numpy noise): written only when used.
    used = recipe.replace(variation_seed=7, variation_strength=0.25, seed_resize_from=(512, 768), rng="numpy-pcg64")
    line = dict(parse_pairs(parameters_text(used).split("\n")[-1]))
    assert (line["Variation seed"], line["Variation seed strength"], line["Seed resize from"]) == ("7", "0.25",
                                                                                                   "512x768")
    assert line["SeedLab RNG"] == "numpy-pcg64" and "RNG" not in line
    fields = fields_of(parameters_text(used))
    assert (fields["variation_seed"], fields["variation_strength"], fields["seed_resize_from"]) == (7, 0.25, (512, 768))
    assert fields["rng"] == "numpy-pcg64"


def test_old_seedlab_texts_with_lower_case_rng_still_read_back():
    old = ("a red circle\nSteps: 20, Sampler: Euler a, CFG scale: 6.0, Seed: 7, Size: 64x64, Model: embedded, "
           "Scheduler: EulerAncestralDiscreteScheduler, RNG: cpu, Dtype: float32, Full determinism: off, "
           f"Fingerprint: {'ab' * 32}, SeedLab: 0.1.0")
    reading = read_chunks({"parameters": old})
    assert recipe_from_reading(reading) == Recipe(prompt="a red circle", seed=7, guidance_scale=6.0,
                                                  scheduler="EulerAncestralDiscreteScheduler")
    assert reading.fingerprint == "ab" * 32 and reading.notes == ()


def test_a_json_blob_is_never_a_prompt():
    with pytest.raises(ValueError, match=r"parameters holds JSON in a format SeedLab does not read \(keys: foo, bar\)"):
        read_chunks({"parameters": '{"foo": 1, "bar": "a photo"}'})


def jpeg_with_comment(text: str, encoding: str) -> bytes:
    """A JPEG whose EXIF UserComment is `text` with an EXIF charset prefix, as A1111/Forge/SwarmUI write it."""
    exif = Image.Exif()
    prefix = b"UNICODE\0" if encoding.startswith("utf-16") else b"ASCII\0\0\0"
    exif.get_ifd(0x8769)[0x9286] = prefix + text.encode(encoding)
    buffer = io.BytesIO()
    IMAGE.save(buffer, format="JPEG", exif=exif.tobytes(), quality=90)
    return buffer.getvalue()


@pytest.mark.parametrize("encoding", ["utf-16-be", "utf-16-le", "ascii"])
def test_jpeg_user_comments_in_every_charset_restore_the_recipe(encoding):
    reading = read_metadata(jpeg_with_comment(DUCK, encoding))
    assert (reading.image_format, reading.lossy) == ("JPEG", True)
    assert reading.fields["seed"] == 235284042 and reading.fields["prompt"] == "photo of a duck"


def test_a_webp_with_exif_restores_too():
    exif = Image.Exif()
    exif.get_ifd(0x8769)[0x9286] = b"UNICODE\0" + DUCK.encode("utf-16-be")
    buffer = io.BytesIO()
    IMAGE.save(buffer, format="WEBP", exif=exif.tobytes())
    assert read_metadata(buffer.getvalue()).fields["num_inference_steps"] == 15


def test_a_lossy_original_is_compared_for_closeness_not_judged_a_mismatch(tmp_path):
    text = "a red circle\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 64x64, RNG: CPU"
    path = tmp_path / "a.jpg"
    path.write_bytes(jpeg_with_comment(text, "utf-16-be"))
    original = original_from_png(path)
    assert original.lossy and original.pixels.shape == (64, 64, 3)
    assert any("JPEG file, whose compression changed its pixels" in note for note in original.notes)
    verdict = compare(Result(original.recipe, IMAGE, fingerprint(IMAGE), ENV), original)
    assert not verdict.exact and verdict.lossy_original and verdict.to_dict()["lossy_original"] is True
    assert verdict.max_difference is not None and "lossy original" in verdict.summary
    assert "Differs" not in verdict.summary and "mismatch" in verdict.summary
    lossless = compare(Result(original.recipe, IMAGE, fingerprint(IMAGE), ENV),
                       Original(original.recipe, None, None, np.asarray(IMAGE)))
    assert lossless.exact and not lossless.lossy_original


def test_info_prints_the_recipe_as_read_and_exits_0_or_2(tmp_path, capsys):
    path = tmp_path / "odd.png"
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("parameters", "a cat\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 500x500")
    IMAGE.save(path, pnginfo=info)
    assert main(["info", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "A1111" and (out["recipe"]["width"], out["recipe"]["seed"]) == (500, 5)
    # issue 30: the size SeedLab cannot run is named with what the file says; the rest is still restored
    assert any(note.startswith("Width '500' from the file cannot be used here") for note in out["notes"])
    assert main(["info", str(path)]) == 0 and "width: 500" in capsys.readouterr().out
    plain = tmp_path / "plain.png"
    IMAGE.save(plain)
    assert main(["info", str(plain)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no recipe" in error
    (tmp_path / "x.txt").write_text("hello")
    assert main(["info", str(tmp_path / "x.txt")]) == 2
    assert "not a PNG, JPEG or WebP" in capsys.readouterr().err


@pytest.mark.parametrize(("device", "rng"), [("cuda", "cuda-philox"), ("cpu", "cpu")])
def test_invokeai_noise_device_maps_to_the_source_that_draws_it(device, rng):
    from seedlab.files.formats import read_invokeai

    _, fields, notes = read_invokeai(json.dumps({"positive_prompt": "x", "seed": 3, "rand_device": device}))
    assert fields["rng"] == rng and notes == []


@pytest.mark.parametrize("text, scheduler, schedule", [
    ("Sampler: euler_ancestral_karras", "euler_ancestral", "karras"),  # ComfyUI-SaveImageWithMetaData
    ("Sampler: Euler Ancestral Karras", "euler_ancestral", "karras"),  # Stability Matrix
    ("Sampler: euler, Schedule type: simple", "euler", "simple"),
    ("Sampler: dpmpp_2m_sde_gpu", "dpmpp_2m_sde_gpu", "normal"),
    ("Sampler: Euler", "Euler", "Automatic"),  # A1111's own label stays A1111's
    ("Sampler: DDIM", "DDIM (A1111)", "Automatic"),  # A1111's own DDIM, run as A1111 runs it
    ("Sampler: euler_ancestral, App: SD.Next", "EulerAncestralDiscreteScheduler", None),  # SD.Next runs diffusers'
])
def test_comfyuis_sampler_names_in_a1111_text_run_as_comfyui_runs_them(text, scheduler, schedule):
    fields, notes, _ = read_infotext(f"a cat\nSteps: 20, {text}, CFG scale: 7, Seed: 1, Size: 512x512")
    assert (fields["scheduler"], fields.get("schedule")) == (scheduler, schedule)
    if scheduler[0].islower():  # ComfyUI draws its noise on the CPU: SeedLab's default, no GPU guess
        assert "rng" not in fields and not any("RNG" in note for note in notes)


@pytest.mark.parametrize("name, schedule, runs, fields", [
    ("euler_ancestral", "karras", "comfyui", {"scheduler": "euler_ancestral", "schedule": "karras"}),  # SwarmUI
    ("dpmpp_2m_sde_gpu", None, "comfyui", {"scheduler": "dpmpp_2m_sde_gpu", "schedule": "normal"}),  # Fooocus
    ("uni_pc", "karras", "comfyui", {"scheduler": "uni_pc", "schedule": "karras"}),  # run as ComfyUI runs it
    ("k_dpmpp_2s_ancestral", "native", "k-diffusion", {"scheduler": "DPM++ 2S a", "schedule": "Uniform"}),  # NovelAI
    ("k_euler", "exponential", "k-diffusion", {"scheduler": "Euler", "schedule": "Exponential"}),
    ("ddim_v3", "native", "k-diffusion", {"scheduler": "default"}),
])
def test_other_tools_samplers_run_as_those_tools_run_them(name, schedule, runs, fields):
    from seedlab.files.tool_samplers import tool_sampling

    notes: list[str] = []
    assert tool_sampling(name, schedule, notes, runs) == fields
    assert any("NovelAI's own noise conventions" in note for note in notes) == (runs == "k-diffusion"
                                                                                 and fields["scheduler"] != "default")


def test_one_odd_value_loses_that_field_not_the_file():
    """"CFG scale: 5 (0.66) [1]" (an A1111-style text from another program) made the whole file unreadable."""
    fields, notes, _ = read_infotext("a cat\nNegative prompt: a dog\nSteps: 20, Sampler: Euler a, CFG scale: 5 (0.66) "
                                     "[1], Seed: 5, Size: 512 by 512, Model: m")
    assert (fields["prompt"], fields["negative_prompt"], fields["num_inference_steps"], fields["seed"]) == (
        "a cat", "a dog", 20, 5)
    assert "guidance_scale" not in fields and "width" not in fields
    assert any(note.startswith("CFG scale: 5 (0.66) [1] could not be read (CFG scale must be a number") and
               note.endswith("it is left at its default") for note in notes), notes
    assert any(note.startswith("Size: 512 by 512 could not be read (Size must be WIDTHxHEIGHT") for note in notes)
