"""The last step, to 8 bits: "round" as diffusers does, "truncate" as A1111 and ComfyUI do (seedlab/engine/pixels.py).

The references below are written from each tool's own code, not from SeedLab's conversion: A1111's
modules/processing.py (`torch.clamp((x + 1.0) / 2.0, ...)`, `255. * np.moveaxis(...)`, `astype(np.uint8)`) and
ComfyUI's comfy/sd.py VAE.decode with nodes.py SaveImage (`255. * image.cpu().numpy()`, `np.clip(...)`). They are
fed the decoder's output of the very run they are compared with (caught on its way out of the VAE).
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers.image_processor import VaeImageProcessor
from PIL import Image

import seedlab
from seedlab import Recipe
from seedlab.files.links import decode_link, encode_link
from seedlab.files.metadata import parameters_text, read_chunks, read_metadata, read_png, save_png
from tests.helpers import read_parameters, run_here, torch_threads
from tests.test_corpus import CORPUS
from tests.test_corpus import EXPECTED as CORPUS_FILES
from tests.test_corpus_comfyui import EXPECTED as CUSTOM_NODE_FILES
from tests.tiny import save_tiny_pipeline

FIXTURES = Path(__file__).parent / "fixtures"
FP = "0" * 64


def a1111_8bit(decoded: torch.Tensor) -> np.ndarray:
    """A1111's process_images_inner: the decoded batch as float32, clamped (x + 1) / 2, then 255. * and astype."""
    x_samples = torch.clamp((decoded.float() + 1.0) / 2.0, min=0.0, max=1.0)
    x_sample = 255. * np.moveaxis(x_samples[0].cpu().numpy(), 0, 2)
    return x_sample.astype(np.uint8)


def comfyui_8bit(decoded: torch.Tensor) -> np.ndarray:
    """ComfyUI's VAE.decode (process_output on the float output, channels last) and SaveImage."""
    pixel_samples = torch.clamp((decoded.float() + 1.0) / 2.0, min=0.0, max=1.0).movedim(1, -1)
    i = 255. * pixel_samples[0].cpu().numpy()
    return np.clip(i, 0, 255).astype(np.uint8)


def diffusers_8bit(decoded: torch.Tensor) -> np.ndarray:
    """diffusers' own conversion, as SeedLab made every image before `to_8bit`: numpy_to_pil's round."""
    return np.asarray(VaeImageProcessor().postprocess(decoded, output_type="pil")[0].convert("RGB"))


def generate_decoded(model, recipe, monkeypatch) -> tuple[np.ndarray, torch.Tensor]:
    """The image SeedLab makes for `recipe`, and the VAE's output it was made from."""
    vae, caught = model.pipeline.vae, []
    decode = vae.decode

    def catching(*args, **kwargs):
        output = decode(*args, **kwargs)
        caught.append((output[0] if isinstance(output, tuple) else output.sample).detach().clone())
        return output

    monkeypatch.setattr(vae, "decode", catching)
    result = seedlab.generate(model, recipe)
    monkeypatch.undo()
    assert len(caught) == 1
    return np.asarray(result.image), caught[0]


CASES = {  # an A1111 sampler (the k-diffusion loop, decoded by SeedLab) and a diffusers scheduler (the pipeline)
    "Euler a": dict(scheduler="Euler a", num_inference_steps=6, guidance_scale=7.0),
    "DDIM": dict(scheduler="DDIMScheduler", num_inference_steps=6, guidance_scale=5.0, negative_prompt="red"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_truncate_is_a1111s_and_comfyuis_step_and_round_is_diffusers(model, monkeypatch, case):
    recipe = Recipe(prompt="a blue square", seed=42, **CASES[case])
    truncated, decoded = generate_decoded(model, recipe.replace(to_8bit="truncate"), monkeypatch)
    assert np.array_equal(truncated, a1111_8bit(decoded))
    assert np.array_equal(truncated, comfyui_8bit(decoded))
    rounded, decoded_again = generate_decoded(model, recipe, monkeypatch)
    assert torch.equal(decoded, decoded_again)  # the step is the only difference
    assert np.array_equal(rounded, diffusers_8bit(decoded))


def test_round_is_todays_image_plain_diffusers(model):
    recipe = Recipe(prompt="a blue square", negative_prompt="red", seed=42, scheduler="DDIMScheduler",
                    num_inference_steps=5, guidance_scale=5.0)
    pipe = model.pipeline
    pipe.scheduler = model.schedulers[recipe.scheduler].from_config(model.info.scheduler_config)
    theirs = pipe(recipe.prompt, negative_prompt=recipe.negative_prompt, num_inference_steps=5, guidance_scale=5.0,
                  width=64, height=64, generator=torch.Generator("cpu").manual_seed(42)).images[0]
    assert np.array_equal(np.asarray(seedlab.generate(model, recipe).image), np.asarray(theirs.convert("RGB")))


@pytest.mark.parametrize("scheduler", ["Euler a", "DPM++ 2M", "DDIMScheduler", "EulerDiscreteScheduler"])
def test_truncate_is_round_or_one_level_below_it(model, scheduler):
    recipe = Recipe(prompt="a red circle", seed=7, scheduler=scheduler, num_inference_steps=5)
    rounded = np.asarray(seedlab.generate(model, recipe).image).astype(int)
    truncated = np.asarray(seedlab.generate(model, recipe.replace(to_8bit="truncate")).image).astype(int)
    assert (truncated <= rounded).all() and (rounded - truncated <= 1).all()
    assert (truncated != rounded).any()


def test_diffusers_denormalize_is_a1111s_clamp_bit_for_bit():
    generator = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(1_000_000, generator=generator) * 1.5,
                   torch.rand(100_000, generator=generator) * 2 - 1,  # the range that survives the clamp
                   torch.tensor([-1.0, 1.0, 0.0, -0.0, 1e-8, -1 + 1e-7, 1 - 6e-8, 3e-39])])
    assert torch.equal(VaeImageProcessor.denormalize(x), torch.clamp((x + 1.0) / 2.0, min=0.0, max=1.0))
    array = VaeImageProcessor.pt_to_numpy(x.reshape(1, 1, 1, -1))
    assert (255. * array).dtype == np.float32  # numpy 2: a Python float does not widen float32


def test_readers_set_the_step_of_the_tool_that_made_the_file():
    a1111 = "a cat\nNegative prompt: dog\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 1, Size: 64x64"
    assert read_chunks({"parameters": a1111}).fields["to_8bit"] == "truncate"
    assert read_chunks({"parameters": a1111 + ", Version: ComfyUI"}).fields["to_8bit"] == "truncate"
    assert read_chunks({"parameters": a1111 + ", Version: f2.0.1v1.10.1"}).fields["to_8bit"] == "truncate"  # Forge
    ours = parameters_text(Recipe(prompt="a cat"), FP, "0.1.0")
    assert read_chunks({"parameters": ours}).fields["to_8bit"] == "round"
    assert read_chunks({"parameters": parameters_text(Recipe(prompt="a cat"))}).fields["to_8bit"] == "round"
    truncating = parameters_text(Recipe(prompt="a cat", to_8bit="truncate"), FP, "0.1.0")
    assert "8-bit step: truncate" in truncating and "8-bit step" not in ours  # written only when not the default
    assert read_chunks({"parameters": truncating}).fields["to_8bit"] == "truncate"
    assert read_metadata(CORPUS / "sd-parsers/automatic1111_cropped.png").fields["to_8bit"] == "truncate"
    assert read_metadata(CORPUS / "sd-metadata/comfyui.png").fields["to_8bit"] == "truncate"


# The tools whose code truncates (verified in their source, see docs/formats.md); the others say nothing (round).
TRUNCATING = {"A1111", "ComfyUI", "SwarmUI", "Fooocus", "RuinedFooocus"}


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_every_corpus_file_reads_its_tools_step(name):
    tool = CORPUS_FILES[name][0].split(" (")[0]
    expected = "truncate" if tool in TRUNCATING else None
    assert read_metadata(CORPUS / name).fields.get("to_8bit") == expected, tool


@pytest.mark.parametrize("name", sorted(CUSTOM_NODE_FILES))
def test_every_comfyui_graph_truncates(name):
    try:
        fields = read_metadata(CORPUS / name).fields
    except ValueError:
        pytest.skip("a graph SeedLab refuses")
    assert fields["to_8bit"] == "truncate"


def test_the_step_travels_in_links_pngs_and_a1111_text(model, tmp_path):
    recipe = Recipe(prompt="a red circle", seed=3, scheduler="Euler a", num_inference_steps=3, to_8bit="truncate")
    link = encode_link(recipe, FP, None, "http://x/")
    assert "&q8=truncate&" in link and decode_link(link)[0] == recipe
    assert "q8=" not in encode_link(recipe.replace(to_8bit="round"), FP, None, "http://x/")  # the default: left out
    result = seedlab.generate(model, recipe)
    path = save_png(result, tmp_path / "image.png")
    assert read_png(path)[0].to_8bit == "truncate"  # the seedlab chunk
    assert read_parameters(Image.open(path).info["parameters"])[0].to_8bit == "truncate"  # the A1111 text
    assert json.loads(Image.open(path).info["seedlab"])["recipe"]["to_8bit"] == "truncate"


def test_old_links_and_pngs_decode_to_round():
    for fixture in ("links_v1.json", "links_v2.json"):
        for case in json.loads((FIXTURES / fixture).read_text())["links"]:
            assert decode_link(case["link"])[0].to_8bit == "round"
    assert read_png(FIXTURES / "seedlab_v1.png")[0].to_8bit == "round"


def test_the_cli_truncates_on_request(tmp_path):
    model_dir = save_tiny_pipeline(tmp_path / "tiny")
    run = run_here("grid", "--prompt", "a red circle", "--seeds", "0-1", "--out", tmp_path / "out", "--model",
                   model_dir, "--steps", "3", "--scheduler", "Euler a", "--to-8bit", "truncate", "--json")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["recipe"]["to_8bit"] for line in lines] == ["truncate", "truncate"]
    assert all("q8=truncate" in line["link"] for line in lines)
    model = seedlab.load_model(str(model_dir), torch.device("cpu"))
    for line in lines:
        saved = np.asarray(Image.open(line["path"]).convert("RGB"))
        assert seedlab.fingerprint(saved) == line["fingerprint"]
        with torch_threads(1):  # the CLI's default on a CPU
            assert seedlab.generate(model, Recipe.from_dict(line["recipe"])).fingerprint == line["fingerprint"]
    bad = run_here("grid", "--prompt", "x", "--seeds", "0", "--out", tmp_path / "bad", "--model", model_dir,
                   "--to-8bit", "floor")
    assert bad.returncode == 2 and "--to-8bit" in bad.stderr and "round, truncate" in bad.stderr
