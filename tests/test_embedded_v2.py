"""embedded-v2, the default model for new images (issue 53): the CLI and a server make new images with it, links
made with the first embedded model keep opening with that one, and the shipped weights do what the demo shows (the
words change what, the seed keeps where), read by training/variations.py's classifier on seeds training never saw."""

import numpy as np
import pytest
import torch

from seedlab.engine.models import ModelStore
from seedlab.engine.recipe import DEFAULT_MODEL, EMBEDDED_NAMES, NEW_IMAGE_MODEL
from seedlab.engine.weights.model_info import EMBEDDED_V2_DIR, EMBEDDED_V2_GUIDANCE
from seedlab.files.links import decode_link
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from tests.helpers import run_here
from training import variations

pytestmark = pytest.mark.skipif(not (EMBEDDED_V2_DIR / "model_index.json").exists(), reason="no embedded-v2 here")
PROMPT = "a red star on a blue background"


@pytest.fixture(scope="module")
def pipe():
    from diffusers import StableDiffusionPipeline

    pipeline = StableDiffusionPipeline.from_pretrained(EMBEDDED_V2_DIR)
    pipeline.set_progress_bar_config(disable=True)
    return pipeline


def test_the_cli_makes_new_images_with_embedded_v2_and_they_are_plain_diffusers_pixels(pipe, tmp_path):
    import json

    done = run_here("grid", "--prompt", PROMPT, "--seeds", "5", "--out", tmp_path, "--json", "--threads", "1")
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.splitlines()[0])
    assert line["recipe"]["model"] == NEW_IMAGE_MODEL == "embedded-v2"
    assert "model=embedded-v2" in line["link"]  # not the links' default: a link names embedded-v2
    torch.set_num_threads(1)
    expected = pipe(PROMPT, num_inference_steps=20, guidance_scale=EMBEDDED_V2_GUIDANCE,
                    generator=torch.Generator("cpu").manual_seed(5)).images[0]
    from PIL import Image

    made = Image.open(next(tmp_path.glob("*.png"))).convert("RGB")
    np.testing.assert_array_equal(np.asarray(made), np.asarray(expected.convert("RGB")))


def test_a_server_starts_on_embedded_v2_and_old_links_keep_the_first_embedded_model():
    store = ModelStore([NEW_IMAGE_MODEL, *EMBEDDED_NAMES], torch.device("cpu"))
    admission = Admission(store, Limits())
    assert admission.recipe({"prompt": PROMPT}).model == "embedded-v2"
    assert admission.recipe({"prompt": PROMPT, "model": "embedded"}).model == DEFAULT_MODEL == "embedded"
    recipe, _, _ = decode_link("http://127.0.0.1:7860/?v=1&prompt=a+red+circle&seed=3&fp=" + "0" * 64)
    assert recipe.model == "embedded"  # a link that names no model was made with the first one


@pytest.fixture(scope="module")
def readings(pipe):
    """Eight unseen seeds, each with the base prompt and every variation the evaluation makes."""
    torch.set_num_threads(2)
    rng = np.random.default_rng(7)
    seeds = []
    for i in range(8):
        prompts = variations.cases(rng)
        images = variations.generate(pipe, [p for p, _ in prompts.values()], 300_000 + i, EMBEDDED_V2_GUIDANCE, 20)
        seeds.append((prompts, dict(zip(prompts, images)), {k: variations.classify(v) for k, v in
                                                             zip(prompts, images)}))
    return seeds


@pytest.mark.parametrize("attribute", ["background", "colour", "kind"])
def test_a_variation_changes_its_attribute_where_the_seed_put_the_shape(readings, attribute):
    changed = kept = 0
    for prompts, _, read in readings:
        changed += getattr(read[attribute], attribute) == prompts[attribute][1]
        keeps = variations.kept(read["base"], read[attribute])
        kept += keeps["centroid"] and keeps["box_centre"] and (keeps["mask_iou"] or attribute == "kind")
    assert changed >= 7 and kept >= 7, (changed, kept)


def test_size_words_and_style_words_act_and_a_prompt_without_background_is_flat(readings):
    ratios = styled = flat = 0
    for _, images, read in readings:
        ratios += read["large"].mask.sum() >= 2 * read["small"].mask.sum() > 0
        base = read["base"].mask
        for style in variations.STYLE_VARIATIONS:
            difference = np.abs(images[style].astype(float) - images["base"].astype(float))[base].mean()
            styled += difference >= 20 and variations.iou(base, read[style].mask) >= 0.8
        flat += read["no_background"].flat >= 0.95 and read["no_background"].background in ("white", "black")
    assert ratios >= 7 and flat >= 7 and styled >= 7 * len(variations.STYLE_VARIATIONS), (ratios, styled, flat)
