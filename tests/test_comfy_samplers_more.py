"""ComfyUI's other samplers (CFG++, Heun++, DDPM, LCM, iPNDM, DEIS, RES multistep, gradient estimation, ER-SDE, SEEDS,
SA-Solver, exp_heun_2_x0) against their re-creation from ComfyUI's sources (tests/reference/comfyui_samplers.py),
bit for bit, on the tiny SD pipeline.

tests/test_comfy_samplers.py compares every ComfyUI sampler at the normal and karras schedules, cfg 7 and the seed + 1
noise of later ComfyUI; here: other schedules and step counts, cfg 1 (CFG++ evaluates the negative prompt then too),
October 2025's noise (the generator seeded with the seed), a two-pass graph, the model calls each makes, and
ComfyUI files that name them.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

import tests.reference.comfyui_samplers as more
from seedlab.engine.recipe import Recipe
from seedlab.engine.samplers.comfyui import sample_comfy
from seedlab.engine.samplers.names import COMFY_SAMPLERS, draws_each_step, model_calls
from seedlab.files.comfyui import read_comfyui
from tests.reference.comfyui import SD1_LATENT_SCALE_FACTOR, comfyui_ksampler, comfyui_latent_upscale_by
from tests.test_comfyui import DEFAULT_API

NEW = tuple(more.MORE)  # the samplers the reference file re-creates
CFG_PP = tuple(name for name in NEW if name.endswith("_cfg_pp"))


def ours(prompted, uncond=None, **fields) -> tuple[torch.Tensor, int]:
    """SeedLab's latents in the reference's space, and how often on_step was called."""
    pipe, cond, own_uncond = prompted
    values = {"seed": 5, "width": 64, "height": 64, "num_inference_steps": 4, "guidance_scale": 7.0,
              "scheduler": "euler", "schedule": "normal", "rng": "cpu", **fields}
    calls = []
    with torch.inference_mode():
        latents = sample_comfy(pipe, Recipe(prompt="a red circle", **values), cond,
                               own_uncond if uncond is None else uncond, lambda: calls.append(1))
    return latents / SD1_LATENT_SCALE_FACTOR, len(calls)


def reference(prompted, sampler, scheduler="normal", seed=5, steps=4, cfg=7.0, latent=None, denoise=1.0):
    pipe, cond, uncond = prompted
    with torch.inference_mode():
        return comfyui_ksampler(pipe.unet, dict(pipe.scheduler.config), cond=cond, uncond=uncond, seed=seed,
                                latent=torch.zeros(1, 4, 16, 16) if latent is None else latent, steps=steps, cfg=cfg,
                                sampler_name=sampler, scheduler=scheduler, denoise=denoise)


def test_every_sampler_of_the_reference_runs_here():
    assert set(NEW) <= set(COMFY_SAMPLERS)


@pytest.mark.parametrize("sampler", NEW)
@pytest.mark.parametrize("schedule, steps", [("exponential", 5), ("beta", 2), ("simple", 1)])
def test_more_schedules_and_step_counts_match_comfyui(prompted, sampler, schedule, steps):
    got, _ = ours(prompted, scheduler=sampler, schedule=schedule, num_inference_steps=steps, seed=2 ** 33 + steps)
    assert torch.equal(got, reference(prompted, sampler, schedule, seed=2 ** 33 + steps, steps=steps))


@pytest.mark.parametrize("sampler", CFG_PP)
def test_cfg_pp_at_cfg_one_still_evaluates_the_negative_prompt_as_comfyui_does(prompted, sampler):
    """disable_cfg1_optimization: at cfg 1 the negative prompt is still run, and its prediction steers the step."""
    got, calls = ours(prompted, scheduler=sampler, guidance_scale=1.0)
    assert torch.equal(got, reference(prompted, sampler, cfg=1.0))
    assert not torch.equal(got, ours(prompted, uncond=prompted[2] * 0.5, scheduler=sampler, guidance_scale=1.0)[0])
    assert calls == ours(prompted, scheduler=sampler)[1]  # one UNet batch a call, as at any cfg


@pytest.mark.parametrize("sampler", [name for name in NEW if draws_each_step(name)])
def test_octobers_noise_seeded_with_the_seed_matches_comfyui_of_october_2025(prompted, sampler, monkeypatch):
    """default_noise_sampler before PR 11528 (December 2025): recipe.comfyui_noise "seed"."""
    monkeypatch.setattr(more, "CPU_SEED_OFFSET", 0)
    got, _ = ours(prompted, scheduler=sampler, schedule="karras", comfyui_noise="seed")
    assert torch.equal(got, reference(prompted, sampler, "karras"))
    assert not torch.equal(got, ours(prompted, scheduler=sampler, schedule="karras")[0])


def calls_made(sampler: str, steps: int) -> int:
    """The model calls ComfyUI's loop makes in `steps` steps: its last step, to sigma 0, is one call; Heun++ makes
    two before it; SA-Solver's PECE has no corrector at its first step."""
    if sampler == "heunpp2":
        return 1 if steps == 1 else 3 * (steps - 2) + 2 + 1
    if sampler == "sa_solver_pece":
        return 2 * steps - 1
    return COMFY_SAMPLERS[sampler][0] * (steps - 1) + 1


@pytest.mark.parametrize("sampler", NEW)
def test_model_calls_bounds_the_calls_each_makes_and_on_step_counts_every_one(prompted, sampler):
    for steps in (1, 4):
        assert ours(prompted, scheduler=sampler, num_inference_steps=steps)[1] == calls_made(sampler, steps)
        assert calls_made(sampler, steps) <= model_calls(sampler, steps) <= 3 * steps


# Two-pass graphs as hires fix: KSampler -> LatentUpscaleBy -> KSampler (denoise < 1), each with its own sampler.
TWO_PASS = {"cfg_pp_then_sa_solver_pece": ("euler_ancestral_cfg_pp", "karras", "bilinear", 1.5,
                                           {"hires_sampler": "sa_solver_pece"}),
            "deis_then_seeds_3_at_cfg_one": ("deis", "normal", "nearest-exact", 2.0,
                                             {"hires_sampler": "seeds_3", "hires_steps": 3, "hires_cfg": 1.0})}


@pytest.mark.parametrize("name", TWO_PASS)
def test_a_two_pass_graph_runs_as_comfyui_runs_it(prompted, name):
    sampler, scheduler, method, scale, second = TWO_PASS[name]
    got, _ = ours(prompted, scheduler=sampler, schedule=scheduler, hires_scale=scale, hires_upscaler=method,
                  denoising_strength=0.55, **second)
    upscaled = comfyui_latent_upscale_by(reference(prompted, sampler, scheduler), method, scale)
    expected = reference(prompted, second["hires_sampler"], scheduler, steps=second.get("hires_steps", 4),
                         cfg=second.get("hires_cfg", 7.0), latent=upscaled, denoise=0.55)
    assert got.shape == expected.shape == (1, 4, int(16 * scale), int(16 * scale))
    assert torch.equal(got, expected)


@pytest.mark.parametrize("sampler", NEW)
def test_a_comfyui_file_naming_it_runs_it_with_no_substitution_note(sampler):
    graph = copy.deepcopy(DEFAULT_API)
    graph["3"]["inputs"].update(sampler_name=sampler, scheduler="karras")
    _, fields, notes = read_comfyui(json.dumps(graph))
    assert (fields["scheduler"], fields["schedule"]) == (sampler, "karras")
    assert not any("runs instead" in note or "not one SeedLab runs" in note for note in notes)
