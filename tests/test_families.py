"""Other diffusers families, loaded with `--model DIR` as a user's folder: SDXL, SD3 (with its T5), SD 2.x v-prediction.

For each: the CLI's grid equals plain diffusers at the same thread count, a grid cell equals its solo image,
a variation seed runs (and changes the image), and a PNG the CLI wrote reproduces exactly.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from diffusers import DiffusionPipeline

from seedlab import Recipe, fingerprint, generate, load_model
from tests.helpers import torch_threads
from tests.tiny_families import save_tiny_sd2_vpred, save_tiny_sd3, save_tiny_sdxl

BUILDERS = {"sdxl": save_tiny_sdxl, "sd3": save_tiny_sd3, "sd2-v": save_tiny_sd2_vpred}
SETTINGS = {"prompt": "a red circle", "steps": 2, "guidance": 3.0, "width": 32, "height": 32}


@pytest.fixture(scope="module", params=list(BUILDERS))
def family(request, tmp_path_factory):
    folder = BUILDERS[request.param](tmp_path_factory.mktemp(request.param) / "model")
    return request.param, folder


def cli(*args):
    return subprocess.run([sys.executable, "-m", "seedlab", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def recipe(folder, seed: int, **changes) -> Recipe:
    return Recipe(prompt=SETTINGS["prompt"], seed=seed, model=str(folder), num_inference_steps=SETTINGS["steps"],
                  guidance_scale=SETTINGS["guidance"], width=SETTINGS["width"], height=SETTINGS["height"], **changes)


def test_grid_equals_plain_diffusers_cell_equals_solo_and_its_png_reproduces(family, tmp_path):
    name, folder = family
    done = cli("grid", "--model", folder, "--prompt", SETTINGS["prompt"], "--seeds", "0-1", "--steps", SETTINGS["steps"],
               "--guidance", SETTINGS["guidance"], "--width", 32, "--height", 32, "--out", tmp_path, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["seed"] for line in lines] == ["0", "1"]

    plain = DiffusionPipeline.from_pretrained(folder)
    plain.set_progress_bar_config(disable=True)
    model = load_model(str(folder), torch.device("cpu"))
    with torch_threads(1):  # the CLI's grid runs one thread per image
        for line in lines:
            seed = int(line["seed"])
            image = plain(SETTINGS["prompt"], num_inference_steps=SETTINGS["steps"], guidance_scale=SETTINGS["guidance"],
                          width=32, height=32, generator=torch.Generator("cpu").manual_seed(seed)).images[0]
            assert fingerprint(np.asarray(image.convert("RGB"))) == line["fingerprint"], (name, seed)
        solo = generate(model, recipe(folder, 1))  # the second cell, made alone
        varied = generate(model, recipe(folder, 1, variation_seed=5, variation_strength=0.3))
    assert solo.fingerprint == lines[1]["fingerprint"]
    assert varied.fingerprint != solo.fingerprint and varied.recipe.variation_seed == 5

    done = cli("reproduce", lines[1]["path"], "--model", folder, "--json")
    verdict = json.loads(done.stdout)
    assert done.returncode == 0 and verdict["exact"], (done.stdout + done.stderr)[-2000:]


def test_the_prompt_is_encoded_once_with_the_familys_own_encoder(family):
    """SDXL and SD3 return pooled embeddings too, and SD3 asks for prompt_2 and prompt_3: reused, same pixels."""
    from seedlab.generation import _Embeddings

    name, folder = family
    model = load_model(str(folder), torch.device("cpu"))
    embeddings = _Embeddings(model)
    arguments = embeddings.arguments(recipe(folder, 0))
    pooled = {"sdxl": True, "sd3": True, "sd2-v": False}[name]  # SD 1.x/2.x encoders return no pooled pair
    assert embeddings.usable and "prompt_embeds" in arguments and ("pooled_prompt_embeds" in arguments) == pooled
