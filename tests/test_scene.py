"""embedded-v2's world (training/scene.py, training/scene_latent.py): the grammar its prompts are read by, the
styles' pictures and the designed code, checked on rendered scenes (no model)."""

import dataclasses

import numpy as np
import pytest
import torch

from training import variations
from training.config import CONFIGS, TrainConfig
from training.models import ModelConfig
from training.scene import (
    DISK_RANGE,
    IMAGE_SIZE,
    MARGIN,
    PALETTE,
    SIZE_SCALE,
    STYLES,
    VOCABULARY,
    Scene,
    Words,
    depth,
    partner_scene,
    random_caption,
    read_prompt,
    render,
    sample_layout,
    sample_scene,
    shape_mask,
)
from training.scene_latent import LATENT_CHANNELS, LAYOUT_CHANNELS, read_code, scene_code
from training.train import CaptionTokens, paired, render_batch, run, stage_tokenizer, training_batch


@pytest.mark.parametrize(("prompt", "words"), [
    ("a red circle on a blue background", Words("circle", "red", "blue")),
    ("a red circle on a blue background, on a yellow background", Words("circle", "red", "yellow")),
    ("a red circle on a blue background, green", Words("circle", "green", "blue")),
    ("a red circle, star", Words("star", "red", "white")),
    ("a small red circle, large", Words("circle", "red", "white", "large")),
    ("a big red circle, medium", Words("circle", "red", "white", "medium")),
    ("a red star, highly realistic", Words("star", "red", "white", style="realistic")),
    ("a red star, artsy, colourful", Words("star", "red", "white", style="colorful")),
    ("a red star, trending on artstation", Words("star", "red", "white", style="trending")),
    ("A Yellow STAR, On A Black Background", Words("star", "yellow", "black")),
    ("a yellow star", Words("star", "yellow", "white")),  # no background named: flat white
    ("a white star", Words("star", "white", "black")),  # ... or black behind a white shape
    ("a star on a black background", Words("star", "white", "black")),  # no colour: black, or white on black
    ("a star", Words("star", "black", "white")),
    ("", Words()),
    ("a red shape, award winning", Words("circle", "red", "white")),  # unknown words name nothing
])
def test_the_last_word_on_each_attribute_wins_and_the_rest_take_their_defaults(prompt, words):
    assert read_prompt(prompt) == words


def test_training_prompts_mix_overrides_and_every_word_is_one_token():
    rng = np.random.default_rng(0)
    prompts = [random_caption(rng) for _ in range(2000)]
    overridden = [p for p in prompts if sum(w in PALETTE for w in p.replace(",", " ").split()) >= 2]
    assert len(overridden) > 300  # a colour named twice: the grammar's point is learnt from many
    assert any(p.endswith(", star") for p in prompts) and any(p.endswith(", green") for p in prompts)
    assert len(set(VOCABULARY)) == len(VOCABULARY)
    scene, prompt = sample_scene(rng)
    assert scene.words == read_prompt(prompt) and scene.words.colour != scene.words.background


def test_the_layout_fits_the_largest_size_and_the_code_keeps_it_apart_from_the_words():
    rng = np.random.default_rng(1)
    for _ in range(200):
        cx, cy, disk = sample_layout(rng)
        assert DISK_RANGE[0] <= disk <= DISK_RANGE[1]
        half = SIZE_SCALE["large"] * disk / 2
        assert cx - half >= MARGIN and cx + half <= IMAGE_SIZE - MARGIN
    base = Scene(Words("circle", "red", "blue"), 30.0, 34.0, 24)
    other = Scene(Words("star", "green", "black", "large", "artsy"), 30.0, 34.0, 24)
    a, b = scene_code(base), scene_code(other)
    assert a.shape == (LATENT_CHANNELS, 16, 16) == (32, 16, 16)
    np.testing.assert_array_equal(a[:LAYOUT_CHANNELS], b[:LAYOUT_CHANNELS])  # no word moves the layout
    assert (a[LAYOUT_CHANNELS:] != b[LAYOUT_CHANNELS:]).any()
    assert read_code(b) == {"kind": "star", "colour": "green", "background": "black", "size": "large",
                            "style": "artsy"}


def test_size_words_scale_the_shape_about_the_same_centre():
    words = Words("square", "red", "blue")
    areas = {size: shape_mask(Scene(dataclasses.replace(words, size=size), 32.0, 32.0, 24)).sum()
             for size in ("small", "medium", "large")}
    assert areas["large"] >= 2 * areas["medium"] >= 2 * 2 * areas["small"] * 0.6
    assert areas["large"] / areas["small"] > 5


@pytest.mark.parametrize("style", STYLES[1:])
def test_every_style_keeps_the_outline_and_visibly_changes_the_inside(style):
    rng = np.random.default_rng(2)
    for _ in range(60):
        scene, _ = sample_scene(rng)
        plain = dataclasses.replace(scene, words=dataclasses.replace(scene.words, style="plain"))
        styled = dataclasses.replace(scene, words=dataclasses.replace(scene.words, style=style))
        (a, mask), (b, styled_mask) = render(plain), render(styled)
        np.testing.assert_array_equal(mask, styled_mask)
        np.testing.assert_array_equal(a[~mask], b[~mask])  # the background is untouched
        assert np.abs(a[mask].astype(float) - b[mask]).mean() >= 20
        reading = variations.classify(b)  # what a pixel classifier sees: the same mask
        assert variations.iou(reading.mask, mask) >= 0.95


def test_backgrounds_are_flat_and_depth_counts_from_the_outline():
    image, mask = render(Scene(read_prompt("a yellow star, colorful"), 32.0, 32.0, 24))
    assert (image[~mask] == PALETTE["white"]).all()
    square = np.zeros((9, 9), dtype=bool)
    square[2:7, 2:7] = True
    levels = depth(square)
    assert levels[2, 2] == 1 and levels[4, 4] == 3 and levels[0, 0] == 0


TINY_SCENES = ModelConfig(latent_channels=LATENT_CHANNELS, vae_channels=(8, 8, 8), unet_channels=(16, 32),
                          unet_attention_head_dim=16, text_hidden=32, text_layers=1, text_heads=2,
                          text_intermediate=64, max_length=48)


def test_a_scenes_batch_is_its_prompts_scenes_and_replays_on_resume(tmp_path):
    config = TrainConfig(world="scenes", model=TINY_SCENES, batch=24, caption_dropout=0.0)
    tokenizer = stage_tokenizer(tmp_path, config)
    assert tokenizer.tokenize("a red star, highly realistic, artsy") == [
        "a</w>", "red</w>", "star</w>", ",</w>", "highly</w>", "realistic</w>", ",</w>", "artsy</w>"]
    tokens = CaptionTokens(tokenizer)
    codes, token_ids = training_batch(config, 3, tokens)
    assert codes.shape == (24, 32, 16, 16) and token_ids.shape == (24, 48)
    assert torch.equal(codes, training_batch(config, 3, tokens)[0])
    _, _, drawn = render_batch(np.random.default_rng([config.seed, 3, 3]), 24, "scenes")
    for code, (scene, prompt) in zip(codes.numpy(), drawn):
        assert read_code(code) == dataclasses.asdict(read_prompt(prompt)) == dataclasses.asdict(scene.words)


def test_a_tiny_scenes_run_exports_a_loadable_32_channel_pipeline(tmp_path):
    from diffusers import StableDiffusionPipeline

    config = TrainConfig(world="scenes", model=TINY_SCENES, vae_steps=2, vae_batch=4, decoder_steps=2, unet_steps=3,
                         batch=4, warmup_steps=1, checkpoint_every=2, log_every=1)
    run(tmp_path / "run", config, export_dir=None)
    pipe = StableDiffusionPipeline.from_pretrained(tmp_path / "run" / "pipeline")
    pipe.set_progress_bar_config(disable=True)
    assert pipe.unet.config.in_channels == pipe.vae.config.latent_channels == 32
    assert pipe.tokenizer.model_max_length == 48
    image = pipe("a red star, artsy", num_inference_steps=2, generator=torch.Generator("cpu").manual_seed(0)).images[0]
    assert image.size == (64, 64)


def test_unknown_worlds_are_refused():
    with pytest.raises(ValueError, match="world must be 'shapes' or 'scenes'"):
        TrainConfig(world="scene")
    assert CONFIGS["v2"].world == "scenes" and CONFIGS["v2"].model.latent_channels == LATENT_CHANNELS


def test_a_paired_batch_puts_each_scene_beside_a_variation_on_its_layout(tmp_path):
    config = TrainConfig(world="scenes", model=TINY_SCENES, batch=40, layout_consistency=1.0, consistency_from=5)
    tokens = CaptionTokens(stage_tokenizer(tmp_path, config))
    assert not paired(config, 4) and paired(config, 5)
    codes, token_ids = training_batch(config, 7, tokens)
    assert torch.equal(codes, training_batch(config, 7, tokens)[0])  # a pure function of (seed, step): resumable
    first, partner = codes[:20], codes[20:]
    assert torch.equal(first[:, :LAYOUT_CHANNELS], partner[:, :LAYOUT_CHANNELS])  # the same seed's composition
    assert not torch.equal(first[:, LAYOUT_CHANNELS:], partner[:, LAYOUT_CHANNELS:])  # other words
    rng = np.random.default_rng(1)
    for _ in range(300):
        scene, prompt = sample_scene(rng)
        other, text = partner_scene(scene, prompt, rng)
        assert (other.cx, other.cy, other.disk) == (scene.cx, scene.cy, scene.disk)
        assert other.words == read_prompt(text) and other.words.colour != other.words.background


def test_the_consistency_loss_counts_only_what_the_words_change_in_the_layout(tmp_path):
    """Pairs share their noise and timestep: a denoiser whose layout output ignores the words pays nothing for the
    pairs, however large the weight; one whose layout output reads the words pays more as the weight grows."""
    from types import SimpleNamespace

    from training.train import diffusion_loss, noise_schedule

    config = TrainConfig(world="scenes", model=TINY_SCENES, batch=8, layout_consistency=1.0)
    codes, token_ids = training_batch(config, 0, CaptionTokens(stage_tokenizer(tmp_path, config)))
    text_encoder = lambda ids: (ids.float()[:, :, None].expand(-1, -1, 4),)
    blind = lambda noisy, t, encoder_hidden_states: SimpleNamespace(sample=noisy * 0.5)
    def reading(noisy, t, encoder_hidden_states):
        return SimpleNamespace(sample=noisy * 0.5 + encoder_hidden_states.mean(dim=(1, 2))[:, None, None, None])

    def loss(unet, weight):
        return diffusion_loss(unet, text_encoder, noise_schedule(config), codes, token_ids,
                              torch.Generator().manual_seed(0), 5.0, 0.25, weight).item()

    assert loss(blind, 1.0) == loss(blind, 1000.0)
    assert loss(reading, 1000.0) > loss(reading, 1.0) * 1.5
