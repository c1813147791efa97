"""ComfyUI's noise by version (issue 42): default_noise_sampler seeds its CPU generator with seed + 1 since ComfyUI
PR 11528 and with the seed before it; a file does not say which ComfyUI made it, so its pixels decide."""

import numpy as np
import pytest
import torch

import seedlab
from seedlab import Recipe
from seedlab.engine.samplers.comfyui.loop import _seeded_noise
from seedlab.serving.conventions import retry_conventions as retry_comfyui_noise
from seedlab.serving.reproduction import Original, compare
from tests.helpers import pixels


def comfyui_before_11528(x: torch.Tensor, seed: int) -> torch.Tensor:
    """comfy/k_diffusion/sampling.py default_noise_sampler before PR 11528: a generator on x's device, the seed."""
    generator = torch.Generator(device=x.device)
    generator.manual_seed(seed)
    return torch.randn(x.size(), dtype=x.dtype, layout=x.layout, device=x.device, generator=generator)


def comfyui_since_11528(x: torch.Tensor, seed: int) -> torch.Tensor:
    """The same since PR 11528: a CPU generator seeded with seed + 1."""
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed + 1)
    return torch.randn(x.size(), dtype=x.dtype, layout=x.layout, device="cpu", generator=generator).to(x.device)


@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1, 156680208700286])
def test_each_convention_draws_what_that_comfyui_draws(seed):
    x = torch.zeros(1, 4, 8, 8)
    assert torch.equal(_seeded_noise(x, seed)(), comfyui_since_11528(x, seed))
    assert torch.equal(_seeded_noise(x, seed, offset=0)(), comfyui_before_11528(x, seed))


def recipe(sampler: str, **fields) -> Recipe:
    fields = {"seed": 7, **fields}
    return Recipe(prompt="a red circle", scheduler=sampler, schedule="normal", num_inference_steps=3, width=32,
                  height=32, model="tiny", guidance_scale=3.0, **fields)


def test_the_convention_changes_an_ancestral_samplers_image_only(model):
    for sampler, differs in (("euler_ancestral", True), ("dpm_2_ancestral", True), ("euler", False)):
        today = seedlab.generate(model, recipe(sampler))
        before = seedlab.generate(model, recipe(sampler, comfyui_noise="seed"))
        assert (not np.array_equal(pixels(today), pixels(before))) == differs, sampler
    link = seedlab.encode_link(recipe("euler_ancestral", comfyui_noise="seed"), "0" * 64, None, "http://h/")
    assert "cnoise=seed" in link and seedlab.decode_link(link)[0].comfyui_noise == "seed"


def test_a_file_from_a_comfyui_before_pr_11528_is_matched_and_named(model):
    made = seedlab.generate(model, recipe("euler_ancestral", comfyui_noise="seed"))  # what that ComfyUI saved
    read = recipe("euler_ancestral")  # the file says nothing of its version: today's convention first
    original = Original(read, made.fingerprint, None, pixels(made))
    first = seedlab.generate(model, read)
    verdict = compare(first, original)
    assert not verdict.exact
    result, verdict = retry_comfyui_noise(first, verdict, original, model)
    assert verdict.exact and result.fingerprint == made.fingerprint and result.recipe.comfyui_noise == "seed"
    assert any("made by a ComfyUI from before PR 11528" in note for note in verdict.notes)


def test_a_file_neither_convention_matches_says_so_and_a_seedlab_original_is_never_retried(model):
    other = seedlab.generate(model, recipe("euler_ancestral", seed=8))
    read = recipe("euler_ancestral")
    first = seedlab.generate(model, read)
    original = Original(read, other.fingerprint, None, pixels(other))
    result, verdict = retry_comfyui_noise(first, compare(first, original), original, model)
    assert not verdict.exact and result is first
    assert any("under both ComfyUI conventions" in note for note in verdict.notes)
    ours = Original(read, other.fingerprint, first.environment, pixels(other))  # SeedLab's own: its field is said
    assert retry_comfyui_noise(first, compare(first, ours), ours, model)[0] is first


@pytest.mark.parametrize("sampler", ["er_sde", "seeds_2", "res_multistep_ancestral", "lcm"])
def test_every_sampler_drawing_from_default_noise_sampler_is_retried(model, sampler):
    """Not only the three ancestral samplers of old: every ComfyUI sampler that draws from default_noise_sampler."""
    made = seedlab.generate(model, recipe(sampler, comfyui_noise="seed"))
    original = Original(recipe(sampler), made.fingerprint, None, pixels(made))
    first = seedlab.generate(model, recipe(sampler))
    result, verdict = retry_comfyui_noise(first, compare(first, original), original, model)
    assert verdict.exact and result.recipe.comfyui_noise == "seed"


def test_an_a1111_text_without_rng_made_with_cpu_noise_is_matched_and_named(model, tmp_path):
    """A1111 writes no "RNG:" for its default GPU noise, and older A1111 none at all: read as GPU (cuda-philox), a
    file whose pixels are CPU noise's is found by them."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    # The tiny model's text encoder gives NaN under A1111's emphasis: its prompt is read as plain text here.
    text = ("a red circle\nSteps: 3, Sampler: Euler, CFG scale: 3, Seed: 7, Size: 32x32, Model: tiny, "
            "Prompt syntax: plain")

    def png(image, name: str):
        info = PngInfo()
        info.add_text("parameters", text)
        image.save(tmp_path / name, pnginfo=info)
        return seedlab.original_from_png(tmp_path / name)  # as `reproduce` and the page read a dropped file

    read = png(Image.new("RGB", (32, 32)), "blank.png").recipe
    assert read.rng == "cuda-philox"
    made = seedlab.generate(model, read.replace(rng="cpu"))  # an A1111 set to CPU noise, or on a Mac
    original = png(made.image, "a1111.png")
    assert any("(no RNG field)" in note for note in original.notes)
    first = seedlab.generate(model, read)
    verdict = compare(first, original)
    assert not verdict.exact
    result, verdict = retry_comfyui_noise(first, verdict, original, model)
    assert verdict.exact and result.recipe.rng == "cpu"
    assert any("made with A1111's CPU noise" in note for note in verdict.notes)
    stated = Original(read, made.fingerprint, None, pixels(made))  # "RNG: GPU" written: nothing to find
    assert retry_comfyui_noise(first, compare(first, stated), stated, model)[0] is first
