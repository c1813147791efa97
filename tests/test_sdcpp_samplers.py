"""stable-diffusion.cpp's samplers (seedlab/engine/samplers/sdcpp.py) against tests/reference/sdcpp.py, bit for bit,
on the tiny pipeline; and sd.cpp's text read into a recipe that runs them, with honest notes."""

from __future__ import annotations

import math

import pytest
import torch

from seedlab.engine import random_sources
from seedlab.engine.noise import make_noise
from seedlab.engine.recipe import Recipe
from seedlab.engine.samplers import sdcpp
from seedlab.engine.samplers.names import SDCPP_SAMPLERS, draws_each_step, model_calls
from seedlab.engine.validation import sampling_errors
from seedlab.files.infotext import read_infotext
from tests.reference.sdcpp import ANCESTRAL, SAMPLERS, sdcpp_txt2img

STEPS = 4


def recipe(**fields) -> Recipe:
    values = {"seed": 5, "width": 64, "height": 64, "num_inference_steps": STEPS, "guidance_scale": 7.0,
              "scheduler": "euler (sd.cpp)", "rng": "cpu"}
    return Recipe(prompt="a red circle", **{**values, **fields})


def test_every_runnable_name_has_a_reference():
    assert {name.removesuffix(" (sd.cpp)") for name in SDCPP_SAMPLERS} == set(SAMPLERS) == set(sdcpp.SAMPLERS)


@pytest.mark.parametrize("method", sorted(set(SAMPLERS) - set(ANCESTRAL)))
@pytest.mark.parametrize("schedule", ["Automatic", "Karras"])
def test_latents_equal_the_reference(prompted, method, schedule):
    pipe, cond, uncond = prompted
    r = recipe(scheduler=method + " (sd.cpp)", schedule=schedule, rng="std-libstdc++")
    calls = []
    with torch.inference_mode():
        ours = sdcpp.sample(pipe, None, r, cond, uncond, lambda: calls.append(1))
        noise = make_noise(pipe, seed=5, width=64, height=64, device="cpu", dtype=torch.float32,
                           rng="std-libstdc++").latents
        theirs = sdcpp_txt2img(pipe.unet, dict(pipe.scheduler.config), cond, uncond, noise, STEPS, 7.0, method,
                               "karras" if schedule == "Karras" else "discrete")
    assert torch.equal(ours, theirs)
    assert len(calls) <= model_calls(r.scheduler, STEPS)


def reference_rng(rng: str, seed: int, shape: tuple[int, ...]):
    """sd.cpp's rng object after the latents' randn call: its next calls, one latent's worth each."""
    if rng == "cpu":  # MT19937RNG follows torch's CPU generator word for word
        generator = torch.Generator("cpu").manual_seed(seed)
        torch.randn(shape, generator=generator)
        return lambda: torch.randn(shape, generator=generator)
    stream = random_sources.Stream(rng, seed)  # tests/test_random_sources.py checks it against the real libraries
    stream.randn(math.prod(shape))
    return lambda: torch.from_numpy(stream.randn(math.prod(shape)).reshape(shape))


@pytest.mark.parametrize("method, schedule, rng, eta", [
    ("euler_a", "Automatic", "std-libstdc++", 1.0), ("euler_a", "Karras", "cpu", 1.0),
    ("euler_a", "Automatic", "cuda-philox", 0.5), ("euler_a", "Karras", "std-msvc", 0.0),
    ("dpm++2s_a", "Automatic", "std-libc++", 1.0), ("dpm++2s_a", "Karras", "cuda-philox", 1.0),
    ("dpm++2s_a", "Automatic", "cpu", 0.0)])
def test_ancestral_latents_equal_the_reference_with_the_continued_stream(prompted, method, schedule, rng, eta):
    pipe, cond, uncond = prompted
    r = recipe(scheduler=method + " (sd.cpp)", schedule=schedule, rng=rng, eta=eta)
    calls = []
    with torch.inference_mode():
        ours = sdcpp.sample(pipe, None, r, cond, uncond, lambda: calls.append(1))
        noise = make_noise(pipe, seed=5, width=64, height=64, device="cpu", dtype=torch.float32, rng=rng).latents
        steps = reference_rng(rng, 5, tuple(noise.shape))
        sched = "karras" if schedule == "Karras" else "discrete"
        theirs = sdcpp_txt2img(pipe.unet, dict(pipe.scheduler.config), cond, uncond, noise, STEPS, 7.0, method,
                               sched, steps, eta)
        fresh = sdcpp_txt2img(pipe.unet, dict(pipe.scheduler.config), cond, uncond, noise, STEPS, 7.0, method,
                              sched, lambda: noise, eta)
    assert torch.equal(ours, theirs)
    assert eta == 0 or not torch.equal(ours, fresh)  # the step noise is not the latents' noise again
    assert len(calls) <= model_calls(r.scheduler, STEPS)


def test_ancestral_samplers_refuse_sources_without_a_stream():
    for rng in ("numpy-pcg64", "numpy-mt19937"):
        assert "rng" in {error.field for error in sampling_errors(recipe(scheduler="euler_a (sd.cpp)", rng=rng))}
    assert not sampling_errors(recipe(scheduler="dpm++2s_a (sd.cpp)", rng="std-msvc"))
    assert draws_each_step("euler_a (sd.cpp)") and not draws_each_step("euler (sd.cpp)")


def test_schedules_and_hires_are_refused_by_name():
    fields = {error.field for error in sampling_errors(recipe(schedule="Exponential", hires_scale=2.0))}
    assert {"schedule", "hires_scale"} <= fields


def text(sampler: str, rng: str) -> str:
    return (f"a cat\nNegative prompt: ugly\nSteps: 20, CFG scale: 7.000000, Guidance: 3.500000, Eta: 0.000000, "
            f"Seed: 42, Size: 512x512, Model: v1-5.safetensors, RNG: {rng}, Sampler: {sampler}, "
            "Version: stable-diffusion.cpp, SDCPP: {\"seed\": 42}")


@pytest.mark.parametrize("word, rng, says", [("cuda", "cuda-philox", "float32"), ("std_default", "std-libstdc++",
                                                                                   "std-msvc"), ("cpu", "cpu", None)])
def test_rng_words(word, rng, says):
    fields, notes, _ = read_infotext(text("euler", word))
    assert fields["rng"] == rng
    assert not any("no SeedLab equivalent: the noise" in note for note in notes)
    assert (says is None and not any("RNG" in note for note in notes)) or any(says in note for note in notes)


@pytest.mark.parametrize("sampler, scheduler, schedule", [("euler", "euler (sd.cpp)", "Automatic"),
                                                          ("dpm++2m karras", "dpm++2m (sd.cpp)", "Karras"),
                                                          ("heun discrete", "heun (sd.cpp)", "Automatic")])
def test_runnable_samplers_are_read_into_a_runnable_recipe(sampler, scheduler, schedule):
    fields, notes, _ = read_infotext(text(sampler, "cpu"))
    assert (fields["scheduler"], fields["schedule"]) == (scheduler, schedule)
    assert not any("sd.cpp's sampler" in note or "schedule is not run" in note for note in notes)
    recipe_read = Recipe(**{k: v for k, v in fields.items() if k != "model"})
    assert not sampling_errors(recipe_read)


def test_what_is_not_run_is_named():
    for sampler, scheduler in (("euler_a", "euler_a (sd.cpp)"), ("dpm++2s_a karras", "dpm++2s_a (sd.cpp)")):
        fields, notes, _ = read_infotext(text(sampler, "std_default"))
        assert fields["scheduler"] == scheduler and not any("sd.cpp's sampler" in note for note in notes)
        assert not sampling_errors(Recipe(**{k: v for k, v in fields.items() if k != "model"}))
    fields, notes, _ = read_infotext(text("lms", "cpu"))
    assert fields["scheduler"] == "LMS" and any("'lms'" in note for note in notes)
    fields, notes, _ = read_infotext(text("dpm++2m ays", "cpu"))
    assert fields["scheduler"] == "dpm++2m (sd.cpp)" and any("ays schedule is not run" in note for note in notes)
    fields, notes, _ = read_infotext(text("ipndm", "cpu"))
    assert fields["scheduler"] == "default" and any("'ipndm'" in note for note in notes)
