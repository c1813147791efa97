"""imaginAIry's EXIF (JPEG, and PNG's eXIf chunk): the layouts its ImagineResult._exif wrote over the years."""

import io
import json
import time

import pytest
from PIL import Image

from seedlab.files.imaginairy import is_imaginairy, read_summary
from seedlab.files.metadata import read_metadata

NEGATIVE = "Ugly, duplication, duplicates, mutilation, deformed"


def image_bytes(comment: dict | None, description: str | None, software: str = "Imaginairy / Stable Diffusion SD-1.5",
                kind: str = "JPEG") -> bytes:
    """An image saved as imaginAIry saves one: IFD0 tags, the UserComment as plain ASCII JSON."""
    exif = Image.Exif()
    if description is not None:
        exif[0x010E] = description
    if comment is not None:
        exif[0x9286] = json.dumps(comment)
    exif[0x0131] = software
    exif[0x0132] = "2022-10-17 01:15:41"
    exif[0x013C] = "cuda:Linux-5.15.0-48-generic-x86_64-with-glibc2.35-NVIDIA GeForce RTX 2080 Ti"
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (90, 120, 150)).save(out, format=kind, exif=exif)
    return out.getvalue()


def as_dict_2022(seed: int | None = 42, prompts=((1, "an old growth forest"),), sampler: str = "k_dpmpp_2m") -> dict:
    """ImaginePrompt.as_dict (late 2022 / early 2023)."""
    data = {"software": "imaginAIry", "model": "SD-1.5", "prompts": [list(p) for p in prompts], "prompt_strength": 7.5,
            "negative_prompt": [[1, NEGATIVE]], "init_image": "None", "init_image_strength": 0.2, "seed": seed,
            "steps": 40, "height": 448, "width": 576, "upscale": False, "fix_faces": False, "sampler_type": sampler}
    if seed is None:
        del data["seed"]  # January to May 2023: the seed left out of the JSON
    return {"prompt": data}


def description_2022(text: str, seed: int = 42, sampler: str = "k_dpmpp_2m") -> str:
    return (f'"{text}" 576x448px negative-prompt:"{NEGATIVE}" seed:{seed} prompt-strength:7.5 steps:40 '
            f"sampler-type:{sampler} init-image-strength:0.2 model:SD-1.5")


def test_the_2022_layout_is_read_from_the_json():
    reading = read_metadata(image_bytes(as_dict_2022(), description_2022("an old growth forest")))
    assert reading.format == "imaginAIry"
    fields = reading.fields
    assert (fields["prompt"], fields["negative_prompt"]) == ("an old growth forest", NEGATIVE)
    assert (fields["seed"], fields["num_inference_steps"], fields["guidance_scale"]) == (42, 40, 7.5)
    assert (fields["width"], fields["height"], fields["model"]) == (576, 448, "SD-1.5")
    assert (fields["scheduler"], fields["schedule"]) == ("DPM++ 2M", "Uniform")


def test_a_seed_left_out_of_the_json_comes_from_the_summary():
    reading = read_metadata(image_bytes(as_dict_2022(seed=None), description_2022("an old growth forest", 521829407)))
    assert reading.fields["seed"] == 521829407 and reading.fields["num_inference_steps"] == 40


def test_the_late_2023_layout_with_a_coloured_summary():
    dump = {"prompt": [{"text": "wide shot of a valley", "weight": 1}], "negative_prompt": [{"text": NEGATIVE,
            "weight": 1}], "prompt_strength": 7.5, "init_image": "None", "init_image_strength": 0.2,
            "control_inputs": [], "mask_prompt": None, "mask_image": "None", "mask_mode": "replace",
            "mask_modify_original": True, "outpaint": "", "model_weights": {"name": "Stable Diffusion XL",
            "aliases": ["sdxl"], "architecture": {"name": "Stable Diffusion XL", "aliases": ["sdxl"]}},
            "solver_type": "ddim", "seed": 1, "steps": 50, "size": [1280, 720], "upscale": False, "fix_faces": False,
            "fix_faces_fidelity": 0.2, "conditioning": None, "tile_mode": "", "allow_compose_phase": True,
            "is_intermediate": False, "collect_progress_latents": False, "caption_text": "",
            "composition_strength": 0.5, "inpaint_method": "finetune"}
    summary = ('"\x1b[32mwide shot of a valley\x1b[0m"\n    negative-prompt:DEFAULT-NEGATIVE-PROMPT\n    '
               "size:1280x720px-(16:9) seed:1 prompt-strength:7.5 steps:50 solver-type:ddim init-image-strength:0.2 "
               "arch:sdxl weights:sdxl")
    reading = read_metadata(image_bytes({"prompt": dump}, summary, "Imaginairy / Stable Diffusion Stable Diffusion XL"))
    fields = reading.fields
    assert (fields["prompt"], fields["negative_prompt"], fields["seed"]) == ("wide shot of a valley", NEGATIVE, 1)
    assert (fields["width"], fields["height"], fields["scheduler"]) == (1280, 720, "DDIMScheduler")
    assert fields["model"] == "Stable Diffusion XL" and not reading.notes  # every other key holds its default


def test_a_png_whose_only_metadata_is_its_exif_chunk():
    data = image_bytes(as_dict_2022(sampler="plms"), "?  : " + description_2022("a female firefighter"), kind="PNG")
    assert b"eXIf" in data and b"tEXt" not in data
    reading = read_metadata(data)
    assert reading.format == "imaginAIry" and reading.image_format == "PNG"
    assert reading.fields["scheduler"] == "PNDMScheduler" and reading.fields["seed"] == 42


def test_several_weighted_prompts_are_written_as_its_summary_shows_them():
    comment = as_dict_2022(prompts=((1, "a cat"), (0.5, "a dog")))
    reading = read_metadata(image_bytes(comment, description_2022("1*(a cat)|0.5*(a dog)")))
    assert reading.fields["prompt"] == "1*(a cat)|0.5*(a dog)"
    assert any("2 weighted parts" in note for note in reading.notes)


@pytest.mark.parametrize(("sampler", "scheduler"), [
    ("k_dpmpp_2m", "DPM++ 2M"), ("k_euler_a", "Euler a"), ("k_lms", "LMS"), ("k_dpm_adaptive", "DPM adaptive"),
    ("plms", "PNDMScheduler"), ("DDIM", "DDIMScheduler"), ("dpmpp", "DPMSolverMultistepScheduler"),
    ("k_unheard_of", "default"),
])
def test_its_samplers_and_solvers(sampler, scheduler):
    reading = read_metadata(image_bytes(as_dict_2022(sampler=sampler), None))
    assert reading.fields["scheduler"] == scheduler
    if scheduler == "default":
        assert any("k_unheard_of" in note for note in reading.notes)


def test_the_summary_alone_when_software_names_imaginairy():
    reading = read_metadata(image_bytes(None, "?  : " + description_2022("leaves", 527733581, "PLMS")))
    assert reading.format == "imaginAIry"
    assert (reading.fields["prompt"], reading.fields["seed"], reading.fields["width"]) == ("leaves", 527733581, 576)


def test_a_comfyui_graph_in_the_user_comment_stays_a_graph():
    graph = {"3": {"class_type": "KSampler", "inputs": {"seed": 1}}}
    assert not is_imaginairy(graph) and not is_imaginairy(graph, "Imaginairy / Stable Diffusion v1.4")
    assert is_imaginairy(as_dict_2022()["prompt"]) and not is_imaginairy("a fox")


def test_hostile_summaries_and_json_cost_little_and_fail_in_one_line():
    junk = "\x1b[32m" * 7000 + '"' + " " * 10_000 + "seed:" * 1000
    started = time.perf_counter()
    found = read_summary(junk[:63_000])
    assert len(found["seed"]) <= 60 and time.perf_counter() - started < 1  # a value of bounded length, later noted
    reading = read_metadata(image_bytes(None, junk[:63_000]))
    assert "seed" not in reading.fields and any("seed" in note for note in reading.notes)
    with pytest.raises(ValueError, match="at most"):
        read_summary("x" * 70_000)
    deep = {"prompt": {"prompt_strength": 7.5, "extra": json.loads("[" * 60 + "]" * 60)}}
    deep_text = json.dumps(deep).replace("[[", "[" * 5 + "[[", 1).replace("]]", "]]" + "]" * 5, 1)
    exif = Image.Exif()
    exif[0x9286] = deep_text
    exif[0x0131] = "Imaginairy / Stable Diffusion v1.4"
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, format="JPEG", exif=exif)
    with pytest.raises(ValueError, match="nests JSON more than") as error:
        read_metadata(out.getvalue())
    assert "\n" not in str(error.value)
