"""A1111's samplers, schedules, noise conventions and hires fix against k-diffusion driven as A1111 1.10 drives it.

The reference (tests/reference/a1111.py) calls k-diffusion 0.1.1's own sampler and schedule functions
the way A1111's modules do (CFGDenoiser, ImageRNG, TorchHijack, BrownianTreeNoiseSampler, get_sigmas,
sample_hr_pass); SeedLab's own implementation (seedlab/engine/samplers/a1111.py) must give the same latents
bit for bit, on a tiny random-weight SD pipeline.
"""

from __future__ import annotations

import pytest
import torch

from seedlab.engine.generation import generate
from seedlab.engine.models import describe
from seedlab.engine.recipe import LATENT_UPSCALERS, SCHEDULES, Recipe, RecipeError
from seedlab.engine.samplers import a1111 as ksampling
from seedlab.engine.samplers import names as sampler_names
from seedlab.engine.samplers.kdiffusion import TooManyCalls
from seedlab.engine.samplers.names import A1111_SAMPLERS, model_calls, split_sampler
from seedlab.serving import budget
from tests.helpers import compvis_alphas_cumprod
from tests.reference.a1111 import a1111_txt2img

STEPS = 6


@pytest.fixture(scope="module")
def setup(prompted):
    pipe, cond, uncond = prompted
    return pipe, cond, uncond, torch.tensor(compvis_alphas_cumprod(), dtype=torch.float32)


def ours(setup, on_step=lambda: None, **fields) -> torch.Tensor:
    pipe, cond, uncond, _ = setup
    recipe = Recipe(prompt="unused: the embeddings are given", width=64, height=64, guidance_scale=7.0,
                    num_inference_steps=fields.pop("steps", STEPS), seed=fields.pop("seed", 5), **fields)
    with torch.inference_mode():
        return ksampling.sample(pipe, ksampling.model_sigmas(pipe), recipe, cond, uncond, on_step)


def reference(setup, **options) -> torch.Tensor:
    pipe, cond, uncond, alphas_cumprod = setup
    # The tiny VAE scales by 4, A1111 by 8: a 128-pixel A1111 image has the tiny pipeline's 16x16 latents.
    with torch.inference_mode():
        return a1111_txt2img(pipe.unet, alphas_cumprod, cond=cond, uncond=uncond, seed=options.pop("seed", 5),
                             width=128, height=128, steps=options.pop("steps", STEPS), cfg_scale=7.0, **options)


@pytest.mark.parametrize("sampler", list(A1111_SAMPLERS))
@pytest.mark.parametrize("schedule", ["Automatic", "Karras", "Exponential"])
def test_every_sampler_matches_k_diffusion_as_a1111_drives_it(setup, sampler, schedule):
    assert torch.equal(ours(setup, scheduler=sampler, schedule=schedule),
                       reference(setup, sampler=sampler, schedule=schedule))


@pytest.mark.parametrize("schedule", [name for name in SCHEDULES if name not in ("Automatic", "Karras", "Exponential")])
@pytest.mark.parametrize("sampler", ["DPM++ 2M", "Euler a", "DPM++ 3M SDE"])
def test_every_schedule_type_matches(setup, sampler, schedule):
    assert torch.equal(ours(setup, scheduler=sampler, schedule=schedule),
                       reference(setup, sampler=sampler, schedule=schedule))


@pytest.mark.parametrize("old, new, schedule", [("DPM++ 2M Karras", "DPM++ 2M", "Automatic"),
                                                ("DPM++ 2M SDE Heun Karras", "DPM++ 2M SDE Heun", "Karras"),
                                                ("Euler a Exponential", "Euler a", "Exponential"),
                                                ("k_dpmpp_2m", "DPM++ 2M", "Automatic")])
def test_old_names_carry_their_schedule(setup, old, new, schedule):
    assert split_sampler(old)[0].label == new
    assert torch.equal(ours(setup, scheduler=old), ours(setup, scheduler=new, schedule=schedule))
    if not old.startswith("k_"):  # aliases are A1111's API spellings, not names its reader resolves
        assert torch.equal(ours(setup, scheduler=old), reference(setup, sampler=old))


@pytest.mark.parametrize("sampler, fields, options", [
    ("Euler a", {"eta_noise_seed_delta": 31337}, {"ensd": 31337}),
    ("DPM2 a", {"eta_noise_seed_delta": 1, "eta": 0.7}, {"ensd": 1, "eta": 0.7}),
    ("Euler", {"s_churn": 1.0, "s_noise": 0.9, "s_tmin": 0.5, "s_tmax": 10.0},
     {"s_churn": 1.0, "s_noise": 0.9, "s_tmin": 0.5, "s_tmax": 10.0}),
    ("Heun", {"s_churn": 2.0}, {"s_churn": 2.0}),
    ("DPM++ 2M SDE", {"eta": 0.5, "s_noise": 0.9}, {"eta": 0.5, "s_noise": 0.9}),
    ("DPM++ SDE", {"eta_noise_seed_delta": 31337}, {"ensd": 31337}),
    ("Euler a", {"eta": 0.0}, {"eta": 0.0}),
    ("DPM++ 2M", {"schedule": "Karras", "schedule_sigma_min": 0.1, "schedule_sigma_max": 10.0, "schedule_rho": 5.0},
     {"schedule": "Karras", "sigma_min": 0.1, "sigma_max": 10.0, "rho": 5.0}),
    # DPM fast and adaptive take eta (A1111's default 1: ancestral noise, ENSD's generator); DPM fast takes s_noise,
    # DPM adaptive and Restart ignore it; the schedule only scales their first noise (sigmas[0]).
    ("DPM fast", {"eta": 0.5, "s_noise": 0.9, "eta_noise_seed_delta": 31337},
     {"eta": 0.5, "s_noise": 0.9, "ensd": 31337}),
    ("DPM fast", {"eta": 0.0, "schedule": "Align Your Steps"}, {"eta": 0.0, "schedule": "Align Your Steps"}),
    ("DPM adaptive", {"eta": 0.0}, {"eta": 0.0}),
    ("DPM adaptive", {"s_noise": 0.5, "eta_noise_seed_delta": 1}, {"s_noise": 0.5, "ensd": 1}),
    ("Restart", {"steps": 20, "eta_noise_seed_delta": 31337, "s_noise": 0.5, "eta": 0.3},  # restarts once, draws
     {"steps": 20, "ensd": 31337, "s_noise": 0.5, "eta": 0.3}),
])
def test_sampler_settings_act_as_in_a1111(setup, sampler, fields, options):
    assert torch.equal(ours(setup, scheduler=sampler, **fields), reference(setup, sampler=sampler, **options))


def test_ensd_moves_only_the_noise_drawn_after_the_first(setup):
    assert not torch.equal(ours(setup, scheduler="Euler a"), ours(setup, scheduler="Euler a", eta_noise_seed_delta=7))
    assert torch.equal(ours(setup, scheduler="Euler"), ours(setup, scheduler="Euler", eta_noise_seed_delta=7))
    # SDE samplers' Brownian tree is seeded with the seed itself, not seed + ENSD.
    assert torch.equal(ours(setup, scheduler="DPM++ 2M SDE"), ours(setup, scheduler="DPM++ 2M SDE",
                                                                   eta_noise_seed_delta=7))


@pytest.mark.parametrize("upscaler", [name for name in LATENT_UPSCALERS if name.startswith("Latent")])  # A1111's own
def test_hires_fix_with_each_latent_upscaler(setup, upscaler):
    got = ours(setup, scheduler="Euler a", hires_scale=2.0, hires_upscaler=upscaler, hires_steps=4,
               denoising_strength=0.6)
    want = reference(setup, sampler="Euler a",
                     hires={"scale": 2.0, "upscaler": upscaler, "steps": 4, "denoising_strength": 0.6})
    assert got.shape == (1, 4, 32, 32)
    assert torch.equal(got, want)


def test_hires_fix_with_its_own_sampler_and_schedule(setup):
    got = ours(setup, scheduler="DPM++ 2M SDE", hires_scale=1.5, hires_sampler="DPM2 a", hires_schedule="Karras",
               denoising_strength=0.5, eta_noise_seed_delta=31337)
    want = reference(setup, sampler="DPM++ 2M SDE", ensd=31337, hires={
        "scale": 1.5, "upscaler": "Latent", "steps": 0, "denoising_strength": 0.5, "sampler": "DPM2 a",
        "schedule": "Karras"})
    assert torch.equal(got, want)


@pytest.mark.parametrize("hires_sampler", ["DPM fast", "DPM adaptive", "Restart"])
def test_hires_fix_with_dpm_fast_adaptive_or_restart(setup, hires_sampler):
    """The hires pass gives DPM fast and adaptive the tail's ends (sigma_sched[-2], [0]) and its length."""
    got = ours(setup, scheduler="Euler a", hires_scale=1.5, hires_sampler=hires_sampler, hires_steps=4,
               denoising_strength=0.6, eta_noise_seed_delta=31337)
    want = reference(setup, sampler="Euler a", ensd=31337, hires={
        "scale": 1.5, "upscaler": "Latent", "steps": 4, "denoising_strength": 0.6, "sampler": hires_sampler})
    assert torch.equal(got, want)


@pytest.mark.parametrize("steps", [36, 41])
def test_restart_twice_matches_a1111s_restart_sampler(steps):
    """From 36 steps Restart restarts twice, steps // 4 steps each time: SeedLab's function against the reference's
    re-creation of A1111's, on a cheap stand-in denoiser, with the same noise source (A1111's ImageRNG, ENSD)."""
    from seedlab.engine.samplers.kdiffusion import restart
    from seedlab.engine.samplers.sigmas import karras
    from tests.reference import a1111 as a1111

    def model(x, sigma):
        return torch.tanh(x) * 0.8 / (1 + sigma[:, None, None, None] ** 2)

    sigmas, calls = karras(steps, 0.0292, 14.6146), []
    start = torch.randn((1, 4, 8, 8), generator=torch.Generator().manual_seed(3)) * sigmas[0]
    rng = a1111._ImageRNG((4, 8, 8), 3, 7, "cpu")
    rng.next()  # the first noise, drawn before sampling
    with a1111._hijacked(a1111.load_k_diffusion()[0], rng):
        want = a1111._restart_sampler(lambda x, sigma: calls.append(1) or model(x, sigma), start, sigmas)
    step_noise = ksampling.StepNoise(Recipe(prompt="a", seed=3, eta_noise_seed_delta=7), torch.Generator(),
                                     (1, 4, 8, 8), start)
    assert torch.equal(restart(model, start, sigmas, step_noise), want)
    assert len(calls) == 2 * steps - 1 <= model_calls("Restart", steps)


@pytest.mark.parametrize("sampler, steps, fields", [
    ("DPM fast", 7, {}), ("DPM adaptive", 6, {"eta": 0.0}), ("Restart", 20, {}),
    ("Euler", 3, {"hires_scale": 1.5, "hires_sampler": "DPM adaptive", "hires_steps": 2})])
def test_model_calls_bound_the_denoiser_calls(setup, sampler, steps, fields):
    """The compute budget prices a request by model_calls: never fewer than the denoiser calls really made."""
    calls = []
    ours(setup, on_step=lambda: calls.append(1), scheduler=sampler, steps=steps, **fields)  # once a denoiser call
    hires = fields.get("hires_sampler")
    bound = model_calls(sampler, steps) + (model_calls(hires, fields["hires_steps"]) if hires else 0)
    assert 0 < len(calls) <= bound
    if sampler == "DPM fast":
        assert len(calls) == steps  # the orders of its steps add up to the step count
    if sampler == "Restart":
        assert len(calls) == 2 * steps - 1  # Heun steps, the last one Euler's
    if sampler == "DPM adaptive":
        assert bound == sampler_names.ADAPTIVE_CALLS_PER_STEP * sampler_names.ADAPTIVE_MIN_STEPS
        assert budget.model_calls(sampler, steps) == bound


def test_dpm_adaptive_stops_at_its_bound(setup, monkeypatch):
    monkeypatch.setattr(sampler_names, "ADAPTIVE_MIN_STEPS", 1)  # 3 x 6 calls; it needs 30 here
    with pytest.raises(TooManyCalls, match="DPM adaptive needs more than 18 model calls for this image"):
        ours(setup, scheduler="DPM adaptive")


def test_samplers_that_draw_refuse_numpy_noise(setup):
    pipe = setup[0]
    ksampling.check_recipe(pipe, Recipe(prompt="a", scheduler="DPM fast", eta=0.0, rng="numpy-pcg64"))
    for fields in ({"scheduler": "DPM fast"}, {"scheduler": "DPM adaptive"}, {"scheduler": "Restart", "eta": 0.0}):
        with pytest.raises(ValueError, match="rng numpy-pcg64 cannot draw"):
            ksampling.check_recipe(pipe, Recipe(prompt="a", rng="numpy-pcg64", **fields))


def test_a_grid_cell_is_its_solo_image(setup, tmp_path):
    """Cell == solo holds for A1111 samplers and hires fix: each image has its own generator and tree."""
    pipe = setup[0]
    model = describe("tiny", pipe, torch.device("cpu"))
    recipes = [Recipe(prompt="a red circle", seed=seed, scheduler=sampler, num_inference_steps=4, **extra)
               for seed in (1, 2) for sampler, extra in (("DPM++ SDE", {}), ("Euler a", {"hires_scale": 1.5}))]
    from seedlab.engine.generation import iter_generate

    together = [result.fingerprint for result in iter_generate(model, recipes)]
    alone = [generate(model, recipe).fingerprint for recipe in recipes]
    assert together == alone
    assert len(set(together)) == 4


def test_a1111_fields_are_refused_for_diffusers_schedulers(setup):
    model = describe("tiny", setup[0], torch.device("cpu"))
    runs = "works with the samplers SeedLab runs as A1111 or ComfyUI does: choose one in Scheduler"
    with pytest.raises(ValueError, match=f"schedule {runs}.*or set it back to Automatic"):
        generate(model, Recipe(prompt="a", scheduler="EulerDiscreteScheduler", schedule="Karras"))
    with pytest.raises(ValueError, match=f"hires_scale {runs}.*ComfyUI's euler.*or set it to 0 \\(off\\)") as error:
        generate(model, Recipe(prompt="a", hires_scale=2.0))
    assert "leave" not in str(error.value) and "hires_scale at" not in str(error.value), "the page's words"
    with pytest.raises(ValueError, match="hires_sampler must be one of DPM\\+\\+ 2M"):
        generate(model, Recipe(prompt="a", scheduler="Euler", hires_scale=2.0, hires_sampler="Euler z"))


@pytest.mark.parametrize("fields, message", [
    ({"hires_scale": 1.3}, "hires_scale must be 0 (off) or from 1 to 4"),
    ({"hires_scale": 0.5}, "hires_scale must be 0 (off) or from 1 to 4"),
    ({"hires_scale": 2.0, "denoising_strength": 0.0}, "denoising_strength must be above 0"),
    ({"schedule": "Karras Exponential"}, "schedule must be one of Automatic, Uniform, Karras"),
    ({"eta": 1.5}, "eta must be a number from 0 to 1"),
    ({"eta_noise_seed_delta": -1}, "eta_noise_seed_delta must be a whole number from 0 to 4294967295"),
])
def test_bad_values_name_the_field_and_the_range(fields, message):
    with pytest.raises(RecipeError, match=message.replace("(", "\\(").replace(")", "\\)").replace("+", "\\+")):
        Recipe(prompt="a", scheduler="Euler", **fields)


@pytest.mark.parametrize("sampler", ["Euler a", "DPM++ 2M", "DPM++ SDE"])
def test_a_prompt_and_negative_of_different_lengths_run_apart_as_in_a1111(setup, sampler):
    """A1111-syntax prompts of different chunk counts: one UNet call each per step, as A1111's CFGDenoiser does."""
    pipe, cond, uncond, alphas_cumprod = setup
    longer = torch.cat([cond, cond * 0.5], dim=1)  # two chunks against the negative's one
    recipe = Recipe(prompt="x", width=64, height=64, guidance_scale=7.0, num_inference_steps=STEPS, seed=5,
                    scheduler=sampler)
    with torch.inference_mode():
        mine = ksampling.sample(pipe, ksampling.model_sigmas(pipe), recipe, longer, uncond, lambda: None)
        theirs = a1111_txt2img(pipe.unet, alphas_cumprod, cond=longer, uncond=uncond, seed=5, width=128, height=128,
                               steps=STEPS, cfg_scale=7.0, sampler=sampler)
    assert torch.equal(mine, theirs)
