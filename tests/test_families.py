"""Other diffusers families, loaded with `--model DIR` as a user's folder: SDXL, SD3 (with its T5), Flux (packed
latents), PixArt-Sigma, SD 2.x v-prediction, a turbo-style config and the unconditional DDIM/DDPM pipelines.

For each: the CLI's grid equals plain diffusers at the same thread count, a grid cell equals its solo image,
a variation seed runs (and changes the image), and a PNG the CLI wrote reproduces exactly; every family x
every promise (tests/family_features.py) is what the family table in docs/models.md says; a folder's own defaults.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import DiffusionPipeline

from seedlab import Recipe, fingerprint, generate, load_model
from seedlab.engine.weights.model_info import model_defaults, read_info
from tests import family_features
from tests.helpers import cli_here, torch_threads
from tests.tiny import save_tiny_pipeline
from tests.tiny_families import (
    save_tiny_ddim,
    save_tiny_flux,
    save_tiny_pixart_sigma,
    save_tiny_sd2_vpred,
    save_tiny_sd3,
    save_tiny_sdxl,
    save_tiny_turbo,
)

BUILDERS = {"sdxl": save_tiny_sdxl, "sd3": save_tiny_sd3, "sd2-v": save_tiny_sd2_vpred, "flux": save_tiny_flux,
            "pixart-sigma": save_tiny_pixart_sigma}
# PixArt would make a 32x32 image at its nearest trained size and resize it: SeedLab makes it at the size asked for.
PLAIN_OPTIONS = {"pixart-sigma": {"use_resolution_binning": False}}
SETTINGS = {"prompt": "a red circle", "steps": 2, "guidance": 3.0, "width": 32, "height": 32}


# Through the CLI (its grid in this process, its reproduce in a process as a user runs it): the families of the hidden
# checks and Flux.
# Every family, SD 2.x and PixArt included, goes through the same promises in process (family_features below).
@pytest.fixture(scope="module", params=["sdxl", "sd3", "flux"])
def family(request, tmp_path_factory):
    folder = BUILDERS[request.param](tmp_path_factory.mktemp(request.param) / "model")
    return request.param, folder


def cli(*args):
    """`python -m seedlab` in a process of its own, as a user runs it: `reproduce` pins its baseline and threads."""
    return subprocess.run([sys.executable, "-m", "seedlab", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def here(capsys, *args):
    """The same command line in this process (a process start costs ~5 s of CPU; test_cli covers the process)."""
    return cli_here(capsys, *map(str, args))


def recipe(folder, seed: int, **changes) -> Recipe:
    return Recipe(prompt=SETTINGS["prompt"], seed=seed, model=str(folder), num_inference_steps=SETTINGS["steps"],
                  guidance_scale=SETTINGS["guidance"], width=SETTINGS["width"], height=SETTINGS["height"], **changes)


def test_grid_equals_plain_diffusers_cell_equals_solo_and_its_png_reproduces(family, tmp_path, capsys):
    name, folder = family
    done = here(capsys, "grid", "--model", folder, "--prompt", SETTINGS["prompt"], "--seeds", "0-1",
               "--steps", SETTINGS["steps"], "--guidance", SETTINGS["guidance"], "--width", 32, "--height", 32,
               "--out", tmp_path, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["seed"] for line in lines] == ["0", "1"]

    plain = DiffusionPipeline.from_pretrained(folder)
    plain.set_progress_bar_config(disable=True)
    model = load_model(str(folder), torch.device("cpu"))
    with torch_threads(1):  # the CLI's grid runs one thread per image
        for line in lines:
            seed = int(line["seed"])
            image = plain(SETTINGS["prompt"], num_inference_steps=SETTINGS["steps"],
                          guidance_scale=SETTINGS["guidance"], width=32, height=32,
                          generator=torch.Generator("cpu").manual_seed(seed),
                          **PLAIN_OPTIONS.get(name, {})).images[0]
            assert fingerprint(np.asarray(image.convert("RGB"))) == line["fingerprint"], (name, seed)
        solo = generate(model, recipe(folder, 1))  # the second cell, made alone
        varied = generate(model, recipe(folder, 1, variation_seed=5, variation_strength=0.3))
    assert solo.fingerprint == lines[1]["fingerprint"]
    assert varied.fingerprint != solo.fingerprint and varied.recipe.variation_seed == 5

    done = cli("reproduce", lines[1]["path"], "--model", folder, "--json")
    verdict = json.loads(done.stdout)
    assert done.returncode == 0 and verdict["exact"], (done.stdout + done.stderr)[-2000:]


def test_the_prompt_is_encoded_once_with_the_familys_own_encoder(family):
    """SDXL, SD3 and Flux return pooled embeddings too (Flux alone: no negative), and SD3 asks for prompt_2 and
    prompt_3: reused, same pixels (the grid test compares them with plain diffusers)."""
    from seedlab.engine.prompts.embeddings import Embeddings

    name, folder = family
    model = load_model(str(folder), torch.device("cpu"))
    embeddings = Embeddings(model)
    arguments = embeddings.arguments(recipe(folder, 0))
    pooled = name in ("sdxl", "sd3", "flux")  # SD 1.x/2.x and PixArt return no pooled pair
    negative = name != "flux"  # Flux's guidance is distilled: no negative embeddings
    assert embeddings.usable and "prompt_embeds" in arguments and ("pooled_prompt_embeds" in arguments) == pooled
    assert ("negative_prompt_embeds" in arguments) == negative


# --- every family x every promise: the checks behind docs/models.md's table (tests/family_features.py) ---

# What SeedLab refuses, and for which families: anything else must be "yes" (or a description, not "NO: ...").
REFUSED = {
    "ddim": {"rng numpy-pcg64", "rng cuda-philox", "variation seed", "seed resize"},  # it draws its own noise
    "ddpm": {"rng numpy-pcg64", "rng cuda-philox", "variation seed", "seed resize"},  # ... and draws at every step
}


@pytest.fixture(scope="module")
def outcomes():
    return family_features.all_outcomes()


@pytest.mark.parametrize("name", list(family_features.FAMILIES))
def test_every_family_keeps_every_promise_or_refuses_it_by_name(outcomes, name):
    results = outcomes[name]
    assert set(results) == set(family_features.FEATURES)
    for feature, outcome in results.items():
        assert not outcome.startswith("NO"), (name, feature, outcome)
        if feature in REFUSED.get(name, ()):
            pipeline = {"ddim": "DDIMPipeline", "ddpm": "DDPM"}[name]
            assert outcome.startswith("refused: ") and pipeline in outcome, (name, feature, outcome)
        elif feature in ("grid = plain diffusers", "cell = solo", "rng numpy-pcg64", "rng cuda-philox",
                         "variation seed", "seed resize", "PNG and link reproduce"):
            assert outcome == family_features.YES, (name, feature, outcome)


def test_the_documented_family_table_is_what_the_checks_give_now(outcomes):
    models_guide = (Path(__file__).parent.parent / "docs" / "models.md").read_text()
    assert family_features.documented_table(models_guide) == family_features.table(outcomes), (
        "the family table in docs/models.md is stale: python -m tests.family_features --write docs/models.md")


# --- a model's own defaults, read from its folder ---

def test_a_turbo_folder_starts_at_its_steps_and_guidance_and_the_cli_uses_them(tmp_path, capsys):
    """Named turbo: 1 step, guidance 0 (its model card); trailing timesteps alone: 4 steps, guidance 0."""
    turbo = save_tiny_turbo(tmp_path / "sd-turbo")
    fast = save_tiny_turbo(tmp_path / "fast")
    plain_sd = save_tiny_pipeline(tmp_path / "plain")
    for folder, expected in ((turbo, (1, 0.0)), (fast, (4, 0.0)), (plain_sd, (20, 7.5))):
        loaded = load_model(str(folder), torch.device("cpu"))
        assert (loaded.default_steps, loaded.default_guidance) == expected, folder
        assert read_info(str(folder)) == loaded.info  # the same, from the config files alone
    done = here(capsys, "grid", "--model", turbo, "--prompt", "a red circle", "--seeds", "3", "--out", tmp_path / "out",
               "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    line = json.loads(done.stdout)
    assert (line["recipe"]["num_inference_steps"], line["recipe"]["guidance_scale"]) == (1, 0.0)
    plain = DiffusionPipeline.from_pretrained(turbo)
    plain.set_progress_bar_config(disable=True)
    with torch_threads(1):
        image = plain("a red circle", num_inference_steps=1, guidance_scale=0.0,
                      generator=torch.Generator("cpu").manual_seed(3)).images[0]
    assert fingerprint(image) == line["fingerprint"]


@pytest.mark.parametrize("pipeline, config", [
    ("StableDiffusionPipeline", {"timestep_spacing": "leading"}),
    ("StableDiffusionXLPipeline", {}),
    ("StableDiffusion3Pipeline", {}),
    ("FluxPipeline", {"use_dynamic_shifting": True}),
    ("LatentConsistencyModelPipeline", {}),
])
def test_defaults_follow_the_pipelines_own(pipeline, config):
    import diffusers

    expected = {"StableDiffusionPipeline": (20, 7.5), "StableDiffusionXLPipeline": (20, 5.0),
                "StableDiffusion3Pipeline": (20, 7.0), "FluxPipeline": (20, 3.5),
                "LatentConsistencyModelPipeline": (4, 8.5)}[pipeline]
    scheduler = "LCMScheduler" if pipeline.startswith("Latent") else "EulerDiscreteScheduler"
    assert model_defaults("me/model", getattr(diffusers, pipeline), scheduler, config) == expected
    assert model_defaults("stabilityai/sdxl-turbo", getattr(diffusers, pipeline), scheduler, config)[0] == 1


# --- pipelines without a prompt (the reproducibility guide's DDIMPipeline) ---

def test_an_unconditional_folder_runs_without_a_prompt_and_its_png_reproduces(tmp_path, capsys):
    folder = save_tiny_ddim(tmp_path / "ddim")
    done = here(capsys, "grid", "--model", folder, "--seeds", "0-1", "--steps", 2, "--out", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    plain = DiffusionPipeline.from_pretrained(folder)
    plain.set_progress_bar_config(disable=True)
    with torch_threads(1):
        for line in lines:
            image = plain(num_inference_steps=2,
                          generator=torch.Generator("cpu").manual_seed(int(line["seed"]))).images[0]
            assert fingerprint(image) == line["fingerprint"]
    assert lines[0]["recipe"]["prompt"] == "" and lines[0]["recipe"]["width"] == 32
    done = cli("reproduce", lines[1]["path"], "--model", folder, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["exact"], (done.stdout + done.stderr)[-2000:]


@pytest.mark.parametrize("options, messages", [
    (("--prompt", "a red circle", "--width", 64),  # every bad field at once, each by name
     ["--prompt must be empty for model .*: it is unconditional",
      "--width must be 32 for model .*: an unconditional pipeline makes its native size only"]),
    (("--variation-seed", 5, "--variation-strength", 0.5), ["DDIMPipeline draws its own starting noise"]),
])
def test_what_an_unconditional_pipeline_cannot_do_is_refused_in_one_line(tmp_path_factory, capsys, options, messages):
    folder = save_tiny_ddim(tmp_path_factory.mktemp("ddim") / "model")
    done = here(capsys, "grid", "--model", folder, "--seeds", "0", "--steps", 2, *options,
               "--out", tmp_path_factory.mktemp("out"))
    assert done.returncode != 0 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    for message in messages:
        assert re.search(message, done.stderr), done.stderr[-2000:]
