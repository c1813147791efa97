"""A1111's own samplers (DDIM, DDIM CFG++, PLMS, UniPC, LCM) against a re-creation of A1111 1.10's code
(tests/reference/a1111_timesteps.py), bit for bit on a tiny random-weight SD pipeline; how A1111's texts, SeedLab's
texts and links name them, and what they refuse."""

from __future__ import annotations

import copy

import pytest
import torch

from seedlab.engine.recipe import Recipe, RecipeError
from seedlab.engine.samplers import a1111 as ksampling
from seedlab.engine.samplers import timesteps
from seedlab.engine.samplers.names import A1111_OWN_SAMPLERS, model_calls
from seedlab.files.infotext import parameters_text, read_infotext
from seedlab.files.links import decode_link, encode_link
from tests.helpers import compvis_alphas_cumprod
from tests.reference.a1111_timesteps import a1111_own_txt2img

STEPS = 6


@pytest.fixture(scope="module")
def setup(prompted):
    pipe, cond, uncond = prompted
    return pipe, cond, uncond, compvis_alphas_cumprod()


def ours(setup, sampler: str, calls: list | None = None, pipe=None, cond=None, **fields) -> torch.Tensor:
    tiny, default_cond, uncond, _ = setup
    recipe = Recipe(prompt="unused: the embeddings are given", width=64, height=64, guidance_scale=7.0,
                    scheduler=sampler + " (A1111)", num_inference_steps=fields.pop("steps", STEPS),
                    seed=fields.pop("seed", 5), rng="cpu", **fields)
    pipe = pipe or tiny
    calls = [] if calls is None else calls
    with torch.inference_mode():
        return timesteps.sample(pipe, ksampling.model_sigmas(pipe), recipe, default_cond if cond is None else cond,
                                uncond, lambda: calls.append(1))


def reference(setup, sampler: str, cond=None, **options) -> torch.Tensor:
    pipe, default_cond, uncond, alphas_cumprod = setup
    with torch.inference_mode():  # the tiny VAE scales by 4, A1111's by 8: 128 pixels are 16x16 latents
        return a1111_own_txt2img(pipe.unet, alphas_cumprod, cond=default_cond if cond is None else cond,
                                 uncond=uncond, seed=options.pop("seed", 5), width=128, height=128,
                                 steps=options.pop("steps", STEPS), cfg_scale=7.0, sampler=sampler, **options)


# 7 steps: 1000 // 7 = 142, so 8 timesteps (A1111's 1, 143, ..., 995); 1 step: DDIM and PLMS make no call.
@pytest.mark.parametrize("steps", [1, 3, 7, 10])
@pytest.mark.parametrize("sampler", ["DDIM", "DDIM CFG++", "PLMS", "UniPC", "LCM"])
def test_every_sampler_matches_a1111_and_calls_the_model_as_priced(setup, sampler, steps):
    if sampler == "UniPC" and steps < 3:
        pytest.skip("A1111's UniPC asserts 3 steps at least (refused below)")
    calls = []
    got = ours(setup, sampler, calls, steps=steps)
    assert torch.equal(got, reference(setup, sampler, steps=steps))
    assert len(calls) == model_calls(sampler + " (A1111)", steps)


@pytest.mark.parametrize("sampler, eta, ensd", [("DDIM", 0.5, 0), ("DDIM", 1.0, 31337), ("DDIM CFG++", 0.3, 0)])
def test_eta_ddim_draws_the_images_noise_as_a1111_does(setup, sampler, eta, ensd):
    got = ours(setup, sampler, eta_ddim=eta, eta_noise_seed_delta=ensd, seed=11)
    assert torch.equal(got, reference(setup, sampler, eta_ddim=eta, ensd=ensd, seed=11))
    assert not torch.equal(got, ours(setup, sampler, seed=11))


@pytest.mark.parametrize("schedule", ["Karras", "Exponential", "SGM Uniform", "Normal", "Simple", "DDIM", "Beta",
                                      "KL Optimal", "Uniform"])
def test_lcm_takes_a1111s_schedules_over_its_50_timesteps(setup, schedule):
    assert torch.equal(ours(setup, "LCM", schedule=schedule), reference(setup, "LCM", schedule=schedule))


@pytest.mark.parametrize("sampler", ["DDIM", "PLMS", "UniPC"])
def test_v_prediction(setup, sampler):
    pipe, cond, uncond, alphas_cumprod = setup
    v_pipe = copy.copy(pipe)
    v_pipe.scheduler = type(pipe.scheduler).from_config(pipe.scheduler.config, prediction_type="v_prediction")
    got = ours(setup, sampler, pipe=v_pipe)
    assert torch.equal(got, reference(setup, sampler, prediction_type="v_prediction"))
    assert not torch.equal(got, ours(setup, sampler))


@pytest.mark.parametrize("sampler", ["DDIM CFG++", "UniPC"])
def test_prompts_of_different_lengths_are_two_calls(setup, sampler):
    """CFG++ steps along the negative prompt's noise: the uncond call's, when the prompts are not batched."""
    longer = torch.cat([setup[1], setup[1] * 0.5], dim=1)
    assert torch.equal(ours(setup, sampler, cond=longer), reference(setup, sampler, cond=longer))


# --- names: A1111's texts, SeedLab's texts and links -------------------------------------------------------------

def a1111_text(sampler: str, extra: str = "") -> str:
    return f"a cat\nSteps: 20, Sampler: {sampler}, CFG scale: 7, Seed: 5, Size: 64x64, RNG: CPU{extra}"


@pytest.mark.parametrize("sampler", ["DDIM", "DDIM CFG++", "PLMS", "UniPC", "LCM"])
def test_an_a1111_text_naming_its_own_sampler_runs_it_with_no_substitution_note(sampler):
    fields, notes, _ = read_infotext(a1111_text(sampler, ", Schedule type: Automatic"))
    assert (fields["scheduler"], fields["schedule"], notes) == (sampler + " (A1111)", "Automatic", [])


def test_schedule_type_is_ignored_by_timestep_samplers_and_kept_for_lcm():
    assert read_infotext(a1111_text("DDIM", ", Schedule type: Karras"))[0]["schedule"] == "Automatic"
    assert read_infotext(a1111_text("UniPC Karras"))[0]["scheduler"] == "UniPC (A1111)"  # before 1.9's spelling
    fields, notes, _ = read_infotext(a1111_text("LCM", ", Schedule type: SGM Uniform"))
    assert (fields["scheduler"], fields["schedule"], notes) == ("LCM (A1111)", "SGM Uniform", [])


def test_eta_ddim_and_hires_fix_in_an_a1111_text():
    fields, notes, _ = read_infotext(a1111_text("DDIM", ", Eta DDIM: 0.25"))
    assert (fields["scheduler"], fields["eta_ddim"], notes) == ("DDIM (A1111)", 0.25, [])
    fields, notes, _ = read_infotext(a1111_text("PLMS", ", Denoising strength: 0.5, Hires upscale: 2"))
    assert "hires_scale" not in fields and any("hires fix with A1111's PLMS is not run here" in n for n in notes)


@pytest.mark.parametrize("sampler", list(A1111_OWN_SAMPLERS))
def test_seedlab_writes_a1111s_name_and_reads_it_back(sampler):
    recipe = Recipe(prompt="a cat", scheduler=sampler, eta_ddim=0.5 if sampler.startswith("DDIM") else 0.0)
    text = parameters_text(recipe, version="test")
    assert f"Sampler: {sampler.removesuffix(' (A1111)')}," in text
    fields, notes, _ = read_infotext(text)
    assert (fields["scheduler"], fields.get("eta_ddim", 0.0), notes) == (sampler, recipe.eta_ddim, [])
    link = encode_link(recipe, "0" * 64, None, "http://x/")
    assert decode_link(link)[0] == recipe


def test_old_spellings_keep_their_diffusers_classes():
    """Before, an A1111 DDIM ran as diffusers' DDIMScheduler: SeedLab's texts and links named the class, and keep it;
    a plot axis typed "DDIM" is diffusers' DDIM as before (tests/test_plot.py)."""
    text = a1111_text("DDIM", ", Schedule type: Uniform, Scheduler: DDIMScheduler, SeedLab: 0.1.0")
    assert read_infotext(text)[0]["scheduler"] == "DDIMScheduler"
    link = "http://127.0.0.1:7860/?v=1&prompt=a+green+square&seed=7&cfg=3&sampler=DDIMScheduler&fp=" + "c" * 64
    assert decode_link(link)[0].scheduler == "DDIMScheduler"
    from seedlab.explore.axes import parse_axis

    assert parse_axis("Sampler: DDIM, DDIM (A1111)").values == ("DDIMScheduler", "DDIM (A1111)")


@pytest.mark.parametrize("fields, field", [
    ({"scheduler": "DDIM (A1111)", "schedule": "Karras"}, "schedule"),
    ({"scheduler": "PLMS (A1111)", "hires_scale": 1.5}, "hires_scale"),
    ({"scheduler": "Euler", "hires_scale": 1.5, "hires_sampler": "LCM (A1111)"}, "hires_scale"),
    ({"scheduler": "UniPC (A1111)", "num_inference_steps": 2}, "num_inference_steps"),
    ({"scheduler": "Euler a", "eta_ddim": 0.5}, "eta_ddim"),
])
def test_what_a1111s_own_samplers_refuse(fields, field):
    from seedlab.engine.validation import sampling_errors

    errors = sampling_errors(Recipe(prompt="a cat", **fields))
    assert [error.field for error in errors] == [field], errors


def test_numpy_noise_is_refused_where_they_draw(setup):
    pipe = setup[0]
    ksampling.check_recipe(pipe, Recipe(prompt="a", scheduler="DDIM (A1111)", rng="numpy-pcg64"))
    for fields in ({"scheduler": "DDIM (A1111)", "eta_ddim": 0.1}, {"scheduler": "LCM (A1111)"}):
        with pytest.raises(ValueError, match="rng numpy-pcg64 cannot draw"):
            ksampling.check_recipe(pipe, Recipe(prompt="a", rng="numpy-pcg64", **fields))
    with pytest.raises(RecipeError, match="eta_ddim"):
        Recipe(prompt="a", eta_ddim=1.5)


def test_an_a1111_text_generates_with_its_sampler_and_a_cell_is_its_solo_image(setup):
    """The whole path: A1111's text -> recipe -> generation (timesteps.sample), each image its own noise."""
    from seedlab.engine.generation import generate, iter_generate
    from seedlab.engine.models import describe
    from tests.helpers import read_parameters

    model = describe("tiny", setup[0], torch.device("cpu"))
    recipe = read_parameters(a1111_text("DDIM", ", Eta DDIM: 0.5").replace("Steps: 20", "Steps: 4"))[0]
    recipe = recipe.replace(prompt="a red circle", prompt_syntax="plain")  # A1111's syntax wants A1111's tokens
    recipes = [recipe.replace(seed=seed, scheduler=sampler, eta_ddim=recipe.eta_ddim * sampler.startswith("DDIM"))
               for seed in (1, 2) for sampler in ("DDIM (A1111)", "LCM (A1111)")]
    progress: list = []
    together = [result.fingerprint for result in iter_generate(model, recipes, progress=lambda *a: progress.append(a))]
    assert together == [generate(model, one).fingerprint for one in recipes] and len(set(together)) == 4
    calls = 2 * (model_calls("DDIM (A1111)", 4) + model_calls("LCM (A1111)", 4))  # 3 + 4, twice
    assert progress[-1][0] == calls == 14  # DDIM's 4 steps are 4 timesteps, stepped between: 3 calls
