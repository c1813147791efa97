"""ComfyUI's samplers and schedulers against a re-creation of ComfyUI's KSampler node.

The reference (tests/reference/comfyui.py) follows ComfyUI's own sources step by step (KSampler,
ModelSamplingDiscrete, calc_cond_batch, its copies of the k-diffusion samplers); SeedLab's implementation
(seedlab/engine/samplers/comfyui/) must give the same latents bit for bit, on a tiny random-weight SD pipeline.
"""

from __future__ import annotations

import pytest
import torch

from seedlab.engine.recipe import Recipe
from seedlab.engine.samplers.comfyui import COMFY_SAMPLERS, COMFY_SCHEDULES, comfy_sigmas, sample_comfy
from seedlab.engine.samplers.names import model_calls
from tests.reference.comfyui import (
    SAMPLERS,
    SCHEDULERS,
    SD1_LATENT_SCALE_FACTOR,
    comfyui_ksampler,
    comfyui_latent_upscale_by,
    comfyui_sigmas,
)
from tests.tiny import tiny_pipeline

STEPS = 4  # enough for every multistep order (3M SDE reaches its third order at the third step)


def recipe(**fields):
    values = {"seed": 5, "width": 64, "height": 64, "num_inference_steps": STEPS, "guidance_scale": 7.0,
              "scheduler": "euler", "schedule": "normal", "rng": "cpu"}
    return Recipe(prompt="a red circle", **{**values, **fields})


def ours(prompted, **fields) -> torch.Tensor:
    pipe, cond, uncond = prompted
    calls = []
    with torch.inference_mode():
        latents = sample_comfy(pipe, recipe(**fields), cond, uncond, lambda: calls.append(1))
    assert calls, "on_step is called"
    return latents / SD1_LATENT_SCALE_FACTOR  # as the reference's process_latent_out


def reference(prompted, sampler="euler", scheduler="normal", seed=5, steps=STEPS, cfg=7.0) -> torch.Tensor:
    pipe, cond, uncond = prompted
    with torch.inference_mode():
        return comfyui_ksampler(pipe.unet, dict(pipe.scheduler.config), cond=cond, uncond=uncond, seed=seed,
                                latent=torch.zeros(1, 4, 16, 16), steps=steps, cfg=cfg, sampler_name=sampler,
                                scheduler=scheduler)


def test_the_names_are_the_references():
    assert set(COMFY_SAMPLERS) == set(SAMPLERS)
    assert set(COMFY_SCHEDULES) == set(SCHEDULERS)


@pytest.mark.parametrize("sampler", COMFY_SAMPLERS)
@pytest.mark.parametrize("schedule", ["normal", "karras"])
def test_every_sampler_matches_comfyui(prompted, sampler, schedule):
    assert torch.equal(ours(prompted, scheduler=sampler, schedule=schedule), reference(prompted, sampler, schedule))


@pytest.mark.parametrize("schedule", [name for name in COMFY_SCHEDULES if name not in ("normal", "karras")])
@pytest.mark.parametrize("sampler", ["euler", "dpmpp_2m_sde", "dpm_2_ancestral"])
def test_every_schedule_matches_comfyui(prompted, sampler, schedule):
    assert torch.equal(ours(prompted, scheduler=sampler, schedule=schedule), reference(prompted, sampler, schedule))


@pytest.mark.parametrize("sampler", ["euler", "euler_ancestral", "dpmpp_3m_sde"])
def test_cfg_one_skips_the_negative_prompt_as_comfyui_does(prompted, sampler):
    got = ours(prompted, scheduler=sampler, guidance_scale=1.0)
    assert torch.equal(got, reference(prompted, sampler, cfg=1.0))
    assert not torch.equal(got, ours(prompted, scheduler=sampler, guidance_scale=1.5))


@pytest.mark.parametrize("sampler, seed", [("euler_ancestral", 0), ("dpmpp_2m_sde_gpu", 123456789),
                                           ("lms", 2 ** 32 + 7)])
def test_seeds(prompted, sampler, seed):
    assert torch.equal(ours(prompted, scheduler=sampler, seed=seed), reference(prompted, sampler, seed=seed))


# kl_optimal divides by steps - 1: one step is NaN, in ComfyUI as here.
@pytest.mark.parametrize("sampler, schedule, steps", [("dpmpp_3m_sde", "exponential", 1), ("heun", "beta", 1),
                                                      ("dpm_2", "ddim_uniform", 2), ("lms", "simple", 9),
                                                      ("dpmpp_2s_ancestral", "kl_optimal", 2)])
def test_step_counts(prompted, sampler, schedule, steps):
    assert torch.equal(ours(prompted, scheduler=sampler, schedule=schedule, num_inference_steps=steps),
                       reference(prompted, sampler, schedule, steps=steps))


@pytest.mark.parametrize("sampler, steps", [("dpm_fast", 5), ("dpm_fast", 6), ("dpm_adaptive", 3)])
def test_dpm_fast_and_adaptive_stay_within_their_priced_model_calls(prompted, sampler, steps):
    """dpm_fast: steps calls in steps of order 3 and a last one or two lower; dpm_adaptive: its own count, bounded."""
    pipe, cond, uncond = prompted
    calls = []
    with torch.inference_mode():
        got = sample_comfy(pipe, recipe(scheduler=sampler, num_inference_steps=steps), cond, uncond,
                           lambda: calls.append(1))
    assert 0 < len(calls) <= model_calls(sampler, steps)
    assert len(calls) == steps or sampler == "dpm_adaptive"
    assert torch.equal(got / SD1_LATENT_SCALE_FACTOR, reference(prompted, sampler, steps=steps))


def test_automatic_is_normal(prompted):
    assert torch.equal(ours(prompted, scheduler="dpmpp_2m", schedule="Automatic"), reference(prompted, "dpmpp_2m"))


@pytest.mark.parametrize("schedule", COMFY_SCHEDULES)
@pytest.mark.parametrize("sampler, steps, denoise", [("euler", 20, 1.0), ("dpm_2", 7, 1.0), ("euler", 10, 0.6),
                                                      ("dpm_2_ancestral", 9, 0.35), ("euler", 3, 0.0)])
def test_sigmas_match_comfyui(prompted, schedule, sampler, steps, denoise):
    from tests.reference.comfyui import _ksampler_sigmas, _ModelSampling

    config = dict(prompted[0].scheduler.config)
    want = _ksampler_sigmas(_ModelSampling(config), sampler, schedule, steps, denoise)
    assert torch.equal(comfy_sigmas(config, sampler, schedule, steps, denoise), want)
    if denoise == 1.0 and sampler == "euler":
        assert torch.equal(comfy_sigmas(config, sampler, schedule, steps), comfyui_sigmas(config, schedule, steps))


def test_a_prompt_and_negative_of_different_lengths(prompted):
    pipe, cond, uncond = prompted
    longer = torch.cat([cond, cond * 0.5], dim=1)  # padded to a shared length, as ComfyUI concatenates them
    with torch.inference_mode():
        mine = sample_comfy(pipe, recipe(scheduler="dpmpp_2m"), longer, uncond, lambda: None)
        theirs = comfyui_ksampler(pipe.unet, dict(pipe.scheduler.config), cond=longer, uncond=uncond, seed=5,
                                  latent=torch.zeros(1, 4, 16, 16), steps=STEPS, cfg=7.0, sampler_name="dpmpp_2m",
                                  scheduler="normal")
    assert torch.equal(mine / SD1_LATENT_SCALE_FACTOR, theirs)


@pytest.mark.parametrize("fields, message", [
    ({"rng": "cuda-philox"}, "rng must be cpu"),
    ({"scheduler": "Euler a"}, "sampler must be one of euler"),
    ({"schedule": "Karras"}, "schedule must be one of normal"),
])
def test_bad_values_are_refused(prompted, fields, message):
    with pytest.raises(ValueError, match=message):
        ours(prompted, **fields)


def test_comfyui_names_in_a_recipe_run_as_comfyui_and_a_cell_is_its_solo_image(tmp_path):
    """Recipes name ComfyUI's sampler and scheduler as ComfyUI writes them ("dpmpp_2m_sde" + "karras")."""
    from seedlab.engine.generation import generate, iter_generate
    from seedlab.engine.models import describe
    from seedlab.engine.recipe import Recipe

    model = describe("tiny", tiny_pipeline(tmp_path), torch.device("cpu"))
    recipes = [Recipe(prompt="a red circle", seed=seed, scheduler=name, schedule=schedule, num_inference_steps=3)
               for seed in (1, 2) for name, schedule in (("dpmpp_2m_sde", "karras"), ("euler_ancestral", "normal"))]
    together = [result.fingerprint for result in iter_generate(model, recipes)]
    assert together == [generate(model, recipe).fingerprint for recipe in recipes]
    assert len(set(together)) == 4
    for fields, message in (({"rng": "cuda-philox"}, "rng must be cpu for ComfyUI's euler"),
                            ({"hires_scale": 2.0, "hires_sampler": "Euler a"}, "hires_sampler must be empty"),
                            ({"schedule": "Karras"}, "schedule must be one of normal, karras")):
        with pytest.raises(ValueError, match=message):
            generate(model, Recipe(prompt="a", scheduler="euler", num_inference_steps=2, **fields))


# Two-pass graphs as hires fix: KSampler -> LatentUpscaleBy -> KSampler (denoise < 1), each with its own settings.
TWO_PASS = {  # name: (first sampler, first scheduler, method, scale, second pass's overrides)
    "same_settings": ("euler", "normal", "bilinear", 1.5, {}),
    "own_seed_cfg_sampler": ("dpmpp_2m", "karras", "nearest-exact", 2.0,
                             {"hires_seed": 99, "hires_cfg": 4.5, "hires_sampler": "euler_ancestral",
                              "hires_schedule": "exponential", "hires_steps": 3}),
    "sde_bicubic_area": ("dpmpp_2m_sde", "normal", "bicubic", 1.25, {"hires_sampler": "dpmpp_sde"}),
    "area": ("lms", "simple", "area", 1.5, {"hires_steps": 2}),
    "bislerp": ("euler", "karras", "bislerp", 1.5, {}),
}


@pytest.mark.parametrize("name", TWO_PASS)
def test_a_two_pass_graph_runs_as_comfyui_runs_it(prompted, name):
    sampler, scheduler, method, scale, second = TWO_PASS[name]
    denoise = 0.55
    got = ours(prompted, scheduler=sampler, schedule=scheduler, hires_scale=scale, hires_upscaler=method,
               denoising_strength=denoise, **second)
    pipe, cond, uncond = prompted
    with torch.inference_mode():
        first = reference(prompted, sampler, scheduler)
        upscaled = comfyui_latent_upscale_by(first, method, scale)
        expected = comfyui_ksampler(
            pipe.unet, dict(pipe.scheduler.config), cond=cond, uncond=uncond, seed=second.get("hires_seed", 5),
            latent=upscaled, steps=second.get("hires_steps", STEPS), cfg=second.get("hires_cfg", 7.0),
            sampler_name=second.get("hires_sampler", sampler), scheduler=second.get("hires_schedule", scheduler),
            denoise=denoise)
    assert got.shape == expected.shape == (1, 4, int(16 * scale), int(16 * scale))
    assert torch.equal(got, expected)


@pytest.mark.parametrize("sampler", ["euler_ancestral", "Euler a"])  # ComfyUI's and A1111's
def test_the_second_passs_own_seed_and_cfg_act_and_equal_values_are_the_same_image(tmp_path, sampler):
    from seedlab.engine.generation import generate, iter_generate
    from seedlab.engine.models import describe

    model = describe("tiny", tiny_pipeline(tmp_path), torch.device("cpu"))
    base = Recipe(prompt="a red circle", seed=3, scheduler=sampler, num_inference_steps=3, guidance_scale=6.0,
                  hires_scale=1.5, hires_upscaler="bilinear", denoising_strength=0.6, hires_steps=2)
    plain = generate(model, base).fingerprint
    assert generate(model, base.replace(hires_seed=3, hires_cfg=6.0)).fingerprint == plain
    variants = [base.replace(hires_seed=4), base.replace(hires_cfg=2.0)]
    fingerprints = [generate(model, recipe).fingerprint for recipe in variants]
    assert len({plain, *fingerprints}) == 3
    assert [result.fingerprint for result in iter_generate(model, variants)] == fingerprints  # cells are solo images


# KSamplerAdvanced: (start_at_step, end_at_step) of a longer schedule, with add_noise and no leftover noise.
ADVANCED = {"end_early": ("euler", "normal", 0, 3), "start_late": ("dpmpp_2m", "karras", 1, 0),
            "both": ("euler_ancestral", "normal", 1, 3), "sde_both": ("dpmpp_2m_sde", "exponential", 1, 2),
            "dpm_2_end": ("dpm_2", "karras", 0, 2), "end_past_steps": ("heun", "normal", 0, 50)}


@pytest.mark.parametrize("name", ADVANCED)
def test_ksampler_advanced_start_and_end_steps_run_as_comfyui_runs_them(prompted, name):
    sampler, scheduler, start, end = ADVANCED[name]
    got = ours(prompted, scheduler=sampler, schedule=scheduler, start_step=start, end_step=end)
    pipe, cond, uncond = prompted
    with torch.inference_mode():
        expected = comfyui_ksampler(pipe.unet, dict(pipe.scheduler.config), cond=cond, uncond=uncond, seed=5,
                                    latent=torch.zeros(1, 4, 16, 16), steps=STEPS, cfg=7.0, sampler_name=sampler,
                                    scheduler=scheduler, start_step=start, last_step=end or 10_000,
                                    force_full_denoise=True)
    assert torch.equal(got, expected)
    if (start, end) != (0, 0) and end < STEPS:  # a part of the schedule is another image than the whole
        assert not torch.equal(got, reference(prompted, sampler, scheduler))


def test_start_and_end_steps_are_refused_where_they_mean_nothing():
    from seedlab.engine.recipe import FieldError
    from seedlab.engine.validation import sampling_errors

    def refused(**fields) -> list[str]:
        return [error.field for error in sampling_errors(recipe(**fields)) if isinstance(error, FieldError)]

    assert refused(start_step=1, end_step=3) == []
    assert refused(scheduler="Euler a", schedule="Automatic", start_step=1) == ["start_step"]
    assert refused(scheduler="EulerDiscreteScheduler", schedule="Automatic", end_step=2) == ["end_step"]
    assert refused(start_step=3, end_step=3) == ["start_step"]
    assert refused(start_step=STEPS) == ["start_step"]
    assert refused(start_step=STEPS - 1, end_step=50) == []
