"""Apple's Core ML pipeline's schedulers (seedlab/engine/samplers/apple.py) against tests/reference/apple.py, bit for
bit, on the tiny pipeline; where they differ from diffusers' classes; and the names a recipe gives them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seedlab.engine.noise import make_noise
from seedlab.engine.recipe import Recipe
from seedlab.engine.samplers import apple
from seedlab.engine.samplers.names import APPLE_SAMPLERS, draws_each_step, is_ksampler, model_calls
from seedlab.engine.validation import sampling_errors
from tests.reference.apple import generate_images, scheduler_init


def recipe(**fields) -> Recipe:
    values = {"seed": 5, "width": 64, "height": 64, "num_inference_steps": 4, "guidance_scale": 7.0,
              "scheduler": "PNDM (Apple)", "rng": "numpy-mt19937"}
    return Recipe(prompt="a red circle", **{**values, **fields})


@pytest.mark.parametrize("label", ["PNDM", "DPM-Solver++"])
@pytest.mark.parametrize("steps", [4, 6])
def test_latents_equal_the_reference(prompted, label, steps):
    pipe, cond, uncond = prompted
    r = recipe(scheduler=label + " (Apple)", num_inference_steps=steps)
    calls = []
    with torch.inference_mode():
        ours = apple.sample(pipe, None, r, cond, uncond, lambda: calls.append(1))
        noise = make_noise(pipe, seed=5, width=64, height=64, device="cpu", dtype=torch.float32,
                           rng="numpy-mt19937").latents
        theirs = generate_images(pipe.unet, cond, uncond, noise, steps, 7.0, label)
    assert torch.equal(ours, theirs)
    assert len(calls) == model_calls(r.scheduler, steps)


def test_the_table_equals_the_reference():
    table, theirs = apple.AppleTable(), scheduler_init()
    for ours, key in ((table.alphas_cumprod, "cumprod"), (table.alpha_t, "alpha_t"), (table.sigma_t, "sigma_t"),
                      (table.lambda_t, "lambda_t")):
        assert np.array_equal(ours, np.array(theirs[key], dtype=np.float32)), key


def test_where_apple_differs_from_diffusers():
    from diffusers import DPMSolverMultistepScheduler, PNDMScheduler

    config = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "steps_offset": 1}
    dpm = DPMSolverMultistepScheduler(**config, timestep_spacing="linspace")
    dpm.set_timesteps(6)
    assert dpm.timesteps.tolist() == [999, 832, 666, 500, 333, 166]  # numpy rounds half to even
    assert apple.dpm_timesteps(6) == [999, 833, 666, 500, 333, 167]  # Swift's round: half away from zero
    pndm = PNDMScheduler(**config, skip_prk_steps=True)
    pndm.set_timesteps(5)
    assert pndm.timesteps.tolist() == apple.pndm_timesteps(5)  # the same PLMS timesteps (leading, offset 1)
    # Float running product vs torch's cumprod (a double accumulator on the CPU): not the same table
    assert not np.array_equal(apple.AppleTable().alphas_cumprod, pndm.alphas_cumprod.numpy())


def test_names_and_refusals():
    assert set(APPLE_SAMPLERS) == set(apple.SCHEDULERS) and all(is_ksampler(name) for name in APPLE_SAMPLERS)
    assert model_calls("PNDM (Apple)", 4) == 5 and model_calls("DPM-Solver++ (Apple)", 4) == 4
    assert not draws_each_step("PNDM (Apple)") and not sampling_errors(recipe())
    fields = {error.field for error in sampling_errors(recipe(schedule="Karras", hires_scale=2.0))}
    assert fields == {"schedule", "hires_scale"}
    assert {error.field for error in sampling_errors(recipe(num_inference_steps=1))} == {"num_inference_steps"}
    assert not sampling_errors(recipe(scheduler="DPM-Solver++ (Apple)", num_inference_steps=1))


def test_an_apple_hires_sampler_is_refused_with_a_message(prompted):
    from seedlab.engine.samplers import a1111

    with pytest.raises(ValueError, match="hires_sampler must be one of"):
        a1111.check_recipe(prompted[0], recipe(scheduler="Euler", hires_sampler="PNDM (Apple)", hires_scale=2.0))
