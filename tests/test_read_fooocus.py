"""The Fooocus family's JSON, in the layout each fork's own writer emits (mashb1t's Fooocus meta_parser.py and
private_logger.py, FooocusPlus' SIMPLEMetadataParser, Fooocus-MRE's async_worker.py, RuinedFooocus)."""

import io
import json

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from seedlab.files.metadata import read_chunks, read_metadata

# Fooocus 2.5, metadata scheme "fooocus": a `parameters` chunk and `fooocus_scheme`; seeds written as text.
FOOOCUS = {"adm_guidance": "(1.5, 0.8, 0.3)", "base_model": "juggernautXL_v8Rundiffusion",
           "base_model_hash": "aeb7e9e689", "full_negative_prompt": ["(worst quality)"],
           "full_prompt": ["a fox, cinematic"], "guidance_scale": 4, "loras": [], "metadata_scheme": "fooocus",
           "negative_prompt": "", "performance": "Speed", "prompt": "a fox", "refiner_model": "None",
           "resolution": "(1152, 896)", "sampler": "dpmpp_2m_sde_gpu", "scheduler": "karras",
           "seed": "7605832129480366617", "sharpness": 2, "steps": 30, "styles": "['Fooocus V2']",
           "vae": "Default (model)", "version": "Fooocus v2.5.5"}
# FooocusPlus, scheme "simple": a `Comment` chunk whose keys are its log's labels.
PLUS = {"Base Model": "elsewhereXL_v10", "Base Model Hash": "1a2b", "CLIP Skip": 2, "Full Negative Prompt": [],
        "Full Prompt": ["a fox"], "Guidance Scale": 3.5, "LoRAs": [], "Metadata Scheme": "Fooocus",
        "Negative Prompt": "blurry", "Performance": "Quality", "Prompt": "a fox", "Resolution": "(896, 1152)",
        "Sampler": "dpmpp_2m_sde_gpu", "Scheduler": "karras", "Seed": "1234567890", "Steps": 60,
        "Styles": "[]", "VAE": "Default (model)", "Version": "1.0.0.Final"}
# Fooocus-MRE: a `Comment` chunk, cfg, width and height, the software's name.
MRE = {"prompt": "a fox", "negative_prompt": "blurry", "styles": [], "real_prompt": ["a fox"],
       "real_negative_prompt": [], "seed": 42, "width": 1024, "height": 1024, "sampler": "dpmpp_2m_sde_gpu",
       "scheduler": "karras", "performance": "Speed", "steps": 30, "switch": 20, "sharpness": 2, "cfg": 7.0,
       "base_clip_skip": -2, "base_model": "sd_xl_base_1.0_0.9vae.safetensors", "refiner_model": "None",
       "software": "Fooocus-MRE v2.0.78.5"}


def png(chunks: dict[str, str]) -> bytes:
    info, out = PngInfo(), io.BytesIO()
    for key, value in chunks.items():
        info.add_text(key, value)
    Image.new("RGB", (1, 1)).save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def test_fooocus_scheme_fooocus():
    reading = read_metadata(png({"parameters": json.dumps(FOOOCUS), "fooocus_scheme": "fooocus"}))
    assert reading.format == "Fooocus"
    assert reading.fields["prompt"] == "a fox" and reading.fields["negative_prompt"] == ""
    assert (reading.fields["seed"], reading.fields["num_inference_steps"], reading.fields["guidance_scale"]) == \
        (7605832129480366617, 30, 4.0)
    assert (reading.fields["width"], reading.fields["height"]) == (1152, 896)
    assert reading.fields["scheduler"] == "dpmpp_2m_sde_gpu" and reading.fields["schedule"] == "karras"


def test_fooocus_jpeg_keeps_it_in_the_exif_user_comment():
    exif = Image.Exif()
    exif[0x9286], exif[0x927C] = json.dumps(FOOOCUS), "fooocus"
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, format="JPEG", exif=exif)
    assert read_metadata(out.getvalue()).fields["seed"] == 7605832129480366617


def test_fooocusplus_comment_chunk_with_labels():
    reading = read_metadata(png({"Comment": json.dumps(PLUS)}))
    assert reading.format == "Fooocus (FooocusPlus)"
    assert (reading.fields["prompt"], reading.fields["negative_prompt"]) == ("a fox", "blurry")
    assert (reading.fields["seed"], reading.fields["num_inference_steps"], reading.fields["guidance_scale"]) == \
        (1234567890, 60, 3.5)
    assert (reading.fields["width"], reading.fields["height"], reading.fields["model"]) == (896, 1152,
                                                                                              "elsewhereXL_v10")


def test_fooocus_mre_comment_chunk():
    reading = read_metadata(png({"Comment": json.dumps(MRE)}))
    assert reading.format == "Fooocus (MRE)"
    assert (reading.fields["seed"], reading.fields["guidance_scale"], reading.fields["width"]) == (42, 7.0, 1024)


def test_ruinedfooocus():
    data = {"Prompt": "a fox", "Negative": "blurry", "steps": 30, "cfg": 8, "width": 1024, "height": 1024,
            "seed": 2020047614, "sampler_name": "dpmpp_2m_sde_gpu", "scheduler": "karras",
            "base_model_name": "sd_xl_base_1.0.safetensors", "software": "RuinedFooocus"}
    name, fields, _ = read_chunks({"parameters": json.dumps(data)}).format, read_chunks(
        {"parameters": json.dumps(data)}).fields, None
    assert name == "RuinedFooocus" and fields["negative_prompt"] == "blurry" and fields["guidance_scale"] == 8


def test_one_odd_value_loses_that_field_only():
    reading = read_chunks({"Comment": json.dumps({**PLUS, "Seed": "random", "Resolution": "big"})})
    assert "seed" not in reading.fields and "width" not in reading.fields
    assert reading.fields["num_inference_steps"] == 60 and reading.fields["prompt"] == "a fox"
    assert any("Seed: random could not be read" in note or "seed: random could not be read" in note
               for note in reading.notes)


def test_novelai_comment_still_goes_to_novelai():
    comment = {"prompt": "cat", "uc": "dog", "steps": 28, "scale": 5, "seed": 1, "sampler": "k_euler_ancestral",
               "width": 832, "height": 1216}
    assert read_chunks({"Comment": json.dumps(comment), "Software": "NovelAI"}).format == "NovelAI"


@pytest.mark.parametrize("hostile", ['{"Prompt": "a", "Seed": ' + "9" * 5000 + "}",
                                     '{"Metadata Scheme": "Fooocus", "x": ' + "[" * 200 + "]" * 200 + "}"])
def test_hostile_comments_are_refused_with_one_line(hostile):
    with pytest.raises(ValueError) as error:
        read_chunks({"Comment": hostile})
    assert "\n" not in str(error.value)
