"""Previews and finishing (engine/previews.py): a finished preview is the full render bit for bit, for every kind of
sampler; a preview is its short render, marked so in its recipe, link and PNG; composition order is deterministic."""

import json

import numpy as np
import pytest
from PIL import Image

import seedlab
from seedlab import Recipe
from seedlab.engine.previews import as_preview, composition, finished, preview_steps
from seedlab.files.links import decode_link, encode_link
from seedlab.files.metadata import read_png, save_png
from tests.helpers import cli_here, pixels

STEPS = 6


BASE = {"prompt": "a red circle", "negative_prompt": "blue", "seed": 11, "num_inference_steps": STEPS,
        "guidance_scale": 6.0}
CASES = {
    "diffusers Euler": {"scheduler": "EulerDiscreteScheduler"},
    "diffusers ancestral": {"scheduler": "EulerAncestralDiscreteScheduler"},
    "A1111 DPM++ 2M": {"scheduler": "DPM++ 2M"},
    "A1111 Euler a, ENSD": {"scheduler": "Euler a", "eta_noise_seed_delta": 31337},
    "A1111 SDE (Brownian tree)": {"scheduler": "DPM++ SDE"},
    "ComfyUI ancestral": {"scheduler": "euler_ancestral", "schedule": "karras"},
    "ComfyUI SDE": {"scheduler": "dpmpp_2m_sde", "schedule": "exponential"},
    "variation seed, resize": {"scheduler": "DPM++ 2M", "variation_seed": 5, "variation_strength": 0.4,
                               "seed_resize_from": (48, 64)},
    "cuda-philox": {"scheduler": "Euler a", "rng": "cuda-philox"},
    "hires fix": {"scheduler": "DPM++ 2M", "hires_scale": 1.5, "hires_steps": 3, "denoising_strength": 0.5},
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_finished_preview_is_the_full_render_bit_for_bit(model, case):
    recipe = Recipe(**BASE, **CASES[case])
    full = seedlab.generate(model, recipe)
    look = seedlab.preview(model, recipe, steps=2)
    assert look.recipe.preview_steps == 2 and look.recipe.num_inference_steps == STEPS
    assert look.fingerprint != full.fingerprint, "a preview is not the full image"
    done = seedlab.finish(model, look)
    assert np.array_equal(pixels(done), pixels(full))
    assert (done.fingerprint, done.recipe) == (full.fingerprint, full.recipe)
    again = seedlab.finish(model, look.recipe)  # from its recipe alone (a link, another process): the same
    assert again.fingerprint == full.fingerprint


def test_a_preview_is_the_short_render_of_the_same_noise(model):
    recipe = Recipe(**BASE, scheduler="DPM++ 2M")
    look = seedlab.preview(model, recipe, steps=3)
    short = seedlab.generate(model, recipe.replace(num_inference_steps=3))
    assert np.array_equal(pixels(look), pixels(short))
    assert look.recipe == recipe.replace(model=look.recipe.model, preview_steps=3)
    progress = []
    seedlab.preview(model, recipe, steps=3, progress=lambda done, total: progress.append(total))
    assert progress and set(progress) == {3}, "progress counts the preview's own steps"


def test_a_hires_preview_is_its_first_pass_and_keeps_the_hires_recipe(model):
    recipe = Recipe(**BASE, scheduler="DPM++ 2M", hires_scale=1.5, hires_steps=3)
    look = seedlab.preview(model, recipe, steps=2)
    assert look.image.size == (recipe.width, recipe.height)
    assert look.recipe.hires_scale == 1.5 and look.recipe.total_steps == 2
    assert seedlab.finish(model, look).image.size == recipe.hires_size


def test_a_preview_travels_by_link_and_png_and_opens_as_that_preview(model, tmp_path):
    look = seedlab.preview(model, Recipe(**BASE, scheduler="Euler a"), steps=2)
    link = encode_link(look.recipe, look.fingerprint, look.environment, "http://127.0.0.1:7860/")
    assert "preview=2" in link
    assert decode_link(link)[:2] == (look.recipe, look.fingerprint)
    path = tmp_path / "preview.png"
    save_png(look, path)
    read, fingerprint, _, _ = read_png(path)
    assert (read, fingerprint) == (look.recipe, look.fingerprint)
    assert "Preview steps: 2" in Image.open(path).text["parameters"]
    assert seedlab.generate(model, read).fingerprint == look.fingerprint


def test_what_cannot_preview_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"preview_steps must be below Steps \(6\)"):
        Recipe(**BASE, preview_steps=STEPS)
    with pytest.raises(ValueError, match="preview_steps must be 0 with Start at step"):
        Recipe(**BASE, scheduler="euler", start_step=2, preview_steps=2)
    with pytest.raises(ValueError, match="preview_steps: a 1-step image has no shorter preview"):
        as_preview(Recipe(**{**BASE, "num_inference_steps": 1}))
    assert preview_steps(20) == 5 and preview_steps(4) == 3 and preview_steps(20, 8) == 8
    marked = as_preview(Recipe(**BASE))
    assert marked.preview_steps == 5 and finished(marked) == Recipe(**BASE)


def test_a_preview_costs_its_own_steps_in_the_budget():
    from seedlab.serving.budget import Speed

    speed = Speed(a=1e-6, b=0.0, measured=64 * 64)
    full = Recipe(**{**BASE, "num_inference_steps": 20})
    look = as_preview(full)
    assert speed.seconds(look) < 0.5 * speed.seconds(full)


def blocks(colour: tuple[int, int, int], corner: int) -> Image.Image:
    image = Image.new("RGB", (32, 32), (20, 20, 200))
    x, y = (corner % 2) * 16, (corner // 2) * 16
    image.paste(Image.new("RGB", (16, 16), colour), (x, y))
    return image


def test_composition_shows_one_of_each_layout_first_and_is_deterministic():
    layouts = [blocks((220, 30, 30), corner) for corner in range(4)]
    images = [layouts[i % 4] for i in range(12)]  # 4 layouts, 3 copies each
    grouped = composition(images, groups=4)
    assert sorted(i % 4 for i in grouped.order[:4]) == [0, 1, 2, 3], "the first screen holds every layout once"
    assert sorted(grouped.order) == list(range(12))
    assert all(grouped.group[i] == grouped.group[i % 4] for i in range(12)), "copies share their group"
    assert composition(images, groups=4) == grouped
    assert composition([], groups=4).order == []


def test_cli_grid_preview_then_finish_gives_the_grid_s_images(capsys, tiny_model_dir, tmp_path):
    common = ["--prompt", "a red circle", "--seeds", "3-4", "--steps", "6", "--model", str(tiny_model_dir)]
    assert cli_here(capsys, "grid", *common, "--out", str(tmp_path / "full"), "--json").returncode == 0
    made = cli_here(capsys, "grid", *common, "--preview", "--preview-steps", "2", "--out", str(tmp_path / "pre"),
                    "--json")
    assert made.returncode == 0, made.stderr
    previews = [json.loads(line) for line in made.stdout.splitlines()]
    assert all("preview=2" in line["link"] for line in previews)
    done = cli_here(capsys, "finish", *(line["path"] for line in previews), "--out", str(tmp_path / "done"),
                    "--model", str(tiny_model_dir), "--json")
    assert done.returncode == 0, done.stderr
    for path in sorted((tmp_path / "full").glob("*.png")):
        full, fin = Image.open(path), Image.open(tmp_path / "done" / path.name)
        assert np.array_equal(np.asarray(full), np.asarray(fin))
        assert full.text == fin.text
    refused = cli_here(capsys, "finish", previews[0]["path"], "--out", str(tmp_path / "x"))
    assert refused.returncode == 2 and "--model" in refused.stderr, "another model is loaded only with --model"
    zero = cli_here(capsys, "finish", previews[0]["path"], "--out", str(tmp_path / "x"), "--threads", "0")
    assert zero.returncode == 2 and "--threads must be a positive integer" in zero.stderr
