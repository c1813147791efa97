"""ComfyUI's uni_pc and uni_pc_bh2 against a re-creation of ComfyUI's own code (tests/reference/unipc.py, driven by
tests/reference/comfyui.py's KSampler node), bit for bit, on a tiny random-weight SD pipeline, with every ComfyUI
scheduler; and the model calls the budget prices are the calls made."""

from __future__ import annotations

import pytest
import torch

from seedlab.engine.recipe import COMFY_SCHEDULES, Recipe
from seedlab.engine.samplers.comfyui import sample_comfy
from seedlab.engine.samplers.names import model_calls
from tests.reference.comfyui import SD1_LATENT_SCALE_FACTOR, comfyui_ksampler, comfyui_latent_upscale_by


def ours(prompted, calls: list | None = None, **fields) -> torch.Tensor:
    pipe, cond, uncond = prompted
    values = {"seed": 5, "width": 64, "height": 64, "num_inference_steps": 4, "guidance_scale": 7.0, "rng": "cpu",
              "scheduler": "uni_pc", "schedule": "normal", **fields}
    calls = [] if calls is None else calls
    with torch.inference_mode():
        latents = sample_comfy(pipe, Recipe(prompt="a red circle", **values), cond, uncond, lambda: calls.append(1))
    return latents / SD1_LATENT_SCALE_FACTOR


def reference(prompted, sampler="uni_pc", scheduler="normal", steps=4, cfg=7.0, **options) -> torch.Tensor:
    pipe, cond, uncond = prompted
    with torch.inference_mode():
        return comfyui_ksampler(pipe.unet, dict(pipe.scheduler.config), cond=cond, uncond=uncond, seed=5,
                                latent=torch.zeros(1, 4, 16, 16), steps=steps, cfg=cfg, sampler_name=sampler,
                                scheduler=scheduler, **options)


@pytest.mark.parametrize("schedule", COMFY_SCHEDULES)
@pytest.mark.parametrize("sampler", ["uni_pc", "uni_pc_bh2"])
def test_uni_pc_matches_comfyui_with_every_scheduler(prompted, sampler, schedule):
    assert torch.equal(ours(prompted, scheduler=sampler, schedule=schedule), reference(prompted, sampler, schedule))


# One step: a model call and no update (ComfyUI's order 0); two: order 1; three and more: orders 2 and 3.
@pytest.mark.parametrize("sampler, steps", [("uni_pc", 1), ("uni_pc", 2), ("uni_pc_bh2", 3), ("uni_pc", 9),
                                            ("uni_pc_bh2", 12)])
def test_step_counts_and_model_calls(prompted, sampler, steps):
    calls = []
    got = ours(prompted, calls, scheduler=sampler, num_inference_steps=steps, schedule="karras")
    assert torch.equal(got, reference(prompted, sampler, "karras", steps=steps))
    assert len(calls) == steps == model_calls(sampler, steps)


def test_bh1_and_bh2_differ_and_cfg_one_skips_the_negative_prompt(prompted):
    assert not torch.equal(ours(prompted), ours(prompted, scheduler="uni_pc_bh2"))
    assert torch.equal(ours(prompted, guidance_scale=1.0), reference(prompted, cfg=1.0))


def test_a_shortened_schedule_and_a_two_pass_graph(prompted):
    """KSamplerAdvanced's start and end steps, and a second KSampler at denoise < 1 after LatentUpscaleBy: the
    schedule's tail, from noise scaled by its first sigma (not sqrt(1 + sigma ** 2)), walked the same way."""
    assert torch.equal(ours(prompted, num_inference_steps=6, start_step=2, end_step=5),
                       reference(prompted, steps=6, start_step=2, last_step=5, force_full_denoise=True))
    got = ours(prompted, hires_scale=1.5, hires_upscaler="bilinear", denoising_strength=0.55,
               hires_sampler="uni_pc_bh2", hires_schedule="beta", hires_steps=5, hires_seed=9, hires_cfg=6.0)
    pipe, cond, uncond = prompted
    with torch.inference_mode():
        upscaled = comfyui_latent_upscale_by(reference(prompted), "bilinear", 1.5)
        want = comfyui_ksampler(pipe.unet, dict(pipe.scheduler.config), cond=cond, uncond=uncond, seed=9,
                                latent=upscaled, steps=5, cfg=6.0, sampler_name="uni_pc_bh2", scheduler="beta",
                                denoise=0.55)
    assert torch.equal(got, want)
