"""Checks of the committed embedded model, loaded with plain diffusers (skipped until it exists)."""

from pathlib import Path

import numpy as np
import pytest
import torch

from training.evaluate import classify, generate, iou

MODEL = Path(__file__).resolve().parent.parent / "seedlab" / "embedded_model"
GUIDANCE = 5.0  # the guidance scale the README reports the evaluation at
STEPS = 20

pytestmark = pytest.mark.skipif(
    not (MODEL / "model_index.json").exists(), reason=f"no embedded model at {MODEL} yet (run python -m training.train)"
)


@pytest.fixture(scope="module")
def pipe():
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(MODEL)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def test_folder_is_small_and_safetensors_only():
    files = [p for p in MODEL.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 20 * 1024 * 1024
    weights = [p for p in files if p.suffix in {".safetensors", ".bin", ".pt", ".ckpt", ".pth"}]
    assert {p.parent.name for p in weights} == {"unet", "vae", "text_encoder"}
    assert all(p.suffix == ".safetensors" for p in weights)


def test_red_circle_on_blue(pipe):
    torch.manual_seed(0)
    image = generate(pipe, "a red circle on a blue background", seed=7, guidance=GUIDANCE, steps=STEPS)
    assert image.shape == (64, 64, 3)
    reading = classify(image)
    border = np.concatenate([image[:2].reshape(-1, 3), image[-2:].reshape(-1, 3)])
    blue = np.array([40, 90, 220])
    assert np.mean(np.linalg.norm(border - blue, axis=1) < 60) > 0.8, "border should be mostly blue"
    assert reading.background == "blue"
    assert reading.colour == "red"


def test_background_variations_keep_the_composition(pipe):
    masks = [
        classify(generate(pipe, f"a red circle, on a {background} background", seed=11, guidance=GUIDANCE, steps=STEPS)).mask
        for background in ("blue", "white")
    ]
    assert masks[0].sum() > 0
    assert iou(*masks) >= 0.5
