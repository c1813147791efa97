"""Fast tests of the embedded-model training code: renderer, captions, hold-out, loop, export."""

import json
import re

import numpy as np
import pytest
import torch

from training.evaluate import classify, size_of
from training.models import ModelConfig, build_text_encoder, build_unet
from training.shapes import (
    COLOURS,
    IMAGE_SIZE,
    KINDS,
    MARGIN,
    PALETTE,
    Shape,
    SIZES,
    caption,
    held_out_triples,
    place_shape,
    render,
    sample_shape,
    shape_height,
    training_triples,
)
from training.train import (
    CaptionTokens,
    TrainConfig,
    coupled_batch,
    coupled_shapes,
    diffusion_loss,
    noise_layout,
    noise_schedule,
    run,
    stage_tokenizer,
)

TINY_MODEL = ModelConfig(
    vae_channels=(8, 8, 8),
    unet_channels=(16, 32),
    unet_attention_head_dim=16,
    text_hidden=32,
    text_layers=1,
    text_heads=2,
    text_intermediate=64,
)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (and stay fast on a busy machine); restore afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_renderer_draws_exact_palette_colours_and_the_shape_mask():
    rng = np.random.default_rng(0)
    for _ in range(200):
        shape = sample_shape(rng, training_triples())
        image, mask = render(shape)
        assert image.shape == (IMAGE_SIZE, IMAGE_SIZE, 3) and image.dtype == np.uint8
        assert np.all(image[mask] == PALETTE[shape.colour])
        assert np.all(image[~mask] == PALETTE[shape.background])
        ys, xs = np.nonzero(mask)
        # The drawn shape spans its box (to a pixel; star tips are thinner than a pixel) and stays off the border.
        tolerance = 3 if shape.kind == "star" else 1
        assert abs((xs.max() - xs.min() + 1) - shape.width) <= tolerance
        assert abs((ys.max() - ys.min() + 1) - shape_height(shape.kind, shape.width)) <= tolerance
        assert xs.min() >= MARGIN and ys.min() >= MARGIN
        assert xs.max() < IMAGE_SIZE - MARGIN and ys.max() < IMAGE_SIZE - MARGIN


def test_kinds_differ_in_area_as_their_geometry_says():
    areas = {kind: render(Shape("red", kind, "large", "blue", 40, 10, 10))[1].sum() for kind in KINDS}
    assert areas["square"] == 1600
    assert areas["circle"] == pytest.approx(np.pi * 400, rel=0.03)
    assert areas["triangle"] == pytest.approx(0.5 * 40 * 36, rel=0.05)
    assert areas["star"] < areas["triangle"]


def test_classifier_reads_rendered_images_exactly():
    rng = np.random.default_rng(1)
    for _ in range(300):
        shape = sample_shape(rng, training_triples())
        reading = classify(render(shape)[0])
        assert (reading.background, reading.colour, reading.kind) == (shape.background, shape.colour, shape.kind)
        assert size_of(reading.width) == shape.size


def test_captions_cover_every_form_and_always_name_colour_and_kind():
    rng = np.random.default_rng(2)
    forms = {
        "size before colour": r"^(an? )?(small|large) \w+ \w+",
        "size appended": r", (small|large)(,|$)",
        "background inline": r"^[^,]* on an? \w+ background",
        "background appended": r", on an? \w+ background",
        "no background": r"^(?!.*background)",
        "no size": r"^(?!.*(small|large))",
        "an orange": r"^an orange",
    }
    seen = {name: 0 for name in forms}
    for _ in range(2000):
        shape = sample_shape(rng, training_triples())
        text = caption(shape, rng)
        assert f"{shape.colour} {shape.kind}" in text
        if "background" in text:
            assert f"{shape.background} background" in text
        for name, pattern in forms.items():
            seen[name] += bool(re.search(pattern, text))
    assert all(count > 0 for count in seen.values()), seen


def test_held_out_triples_never_reach_training():
    held = set(held_out_triples())
    assert len(held) == 16 and not held & set(training_triples())
    assert {c for c, _, _ in held} == set(COLOURS) and {k for _, k, _ in held} == set(KINDS)
    rng = np.random.default_rng(3)
    for _ in range(3000):
        shape = sample_shape(rng, training_triples())
        assert (shape.colour, shape.kind, shape.background) not in held
        text = caption(shape, rng)
        named = re.search(r"(\w+) (\w+)(?:,.*| on .*|$)", text)
        background = re.search(r"(\w+) background", text)
        if background:
            assert (named.group(1), named.group(2), background.group(1)) not in held


def test_place_shape_spans_every_position_and_width_and_stays_inside():
    for kind, size in [(k, s) for k in KINDS for s in SIZES]:
        corners = [place_shape("red", kind, size, "blue", (u, u, u)) for u in (0.0, 0.5, 1.0)]
        low, high = SIZES[size]
        assert [c.width for c in corners] == [low, (low + high + 1) // 2, high]
        assert corners[0].x0 == corners[0].y0 == MARGIN
        for shape in corners:
            _, mask = render(shape)
            rows, cols = np.nonzero(mask)
            assert rows.min() >= MARGIN and cols.min() >= MARGIN
            assert rows.max() < IMAGE_SIZE - MARGIN and cols.max() < IMAGE_SIZE - MARGIN
        # the far corner reaches the far margin (to within the pixel rounding of the outline)
        _, mask = render(corners[-1])
        rows, cols = np.nonzero(mask)
        assert cols.max() >= IMAGE_SIZE - MARGIN - 2 and rows.max() >= IMAGE_SIZE - MARGIN - 2


def test_noise_layout_is_uniform_smooth_and_blind_to_offset_noise():
    noise = torch.randn(4000, 4, 16, 16, generator=torch.Generator().manual_seed(0))
    layout = noise_layout(noise)
    assert layout.shape == (4000, 4) and layout.min() >= 0 and layout.max() < 1
    for column in layout.T:  # uniform: every fifth of [0, 1) holds about a fifth of the draws
        counts = np.histogram(column, bins=5, range=(0, 1))[0]
        assert counts.min() > 0.17 * len(column) and counts.max() < 0.23 * len(column)
    shifted = noise + 0.3 * torch.randn(4000, 4, 1, 1, generator=torch.Generator().manual_seed(1))
    np.testing.assert_allclose(noise_layout(shifted), layout, atol=1e-5)
    # The right half brighter in channel 0 moves the shape right; nothing else changes.
    nudged = noise.clone()
    nudged[:, 0, :, 8:] += 0.1
    moved = noise_layout(nudged)
    assert (moved[:, 0] > layout[:, 0]).all()
    np.testing.assert_allclose(moved[:, 1:], layout[:, 1:], atol=1e-6)


def test_coupled_shapes_sit_where_their_noise_says_and_obey_named_sizes():
    noise = torch.randn(600, 4, 16, 16, generator=torch.Generator().manual_seed(2))
    layouts = noise_layout(noise)
    pairs = coupled_shapes(np.random.default_rng(5), layouts, caption_dropout=0.1)
    held = set(held_out_triples())
    silent = 0
    for (shape, text), (ux, uy, uw, uclass) in zip(pairs, layouts):
        assert (shape.colour, shape.kind, shape.background) not in held
        named = {"small", "large"} & set(text.replace(",", " ").split())
        if named:
            assert {shape.size} == named  # the words decide the size class...
        else:
            silent += 1
            assert shape.size == ("small" if uclass < 0.5 else "large")  # ...else the noise does
        assert shape == place_shape(shape.colour, shape.kind, shape.size, shape.background, (ux, uy, uw))
    assert 0.3 * len(pairs) < silent < 0.7 * len(pairs)
    assert 20 < sum(text == "" for _, text in pairs) < 100


def test_coupled_batch_encodes_its_renders_and_replays_on_resume(tmp_path):
    from training.models import build_vae

    config = TrainConfig(model=TINY_MODEL, batch=6)
    tokens = CaptionTokens(stage_tokenizer(tmp_path, config))
    vae = build_vae(TINY_MODEL).eval()
    first = coupled_batch(vae, {"scaling_factor": 0.5}, config, 7, tokens, torch.Generator().manual_seed(3))
    again = coupled_batch(vae, {"scaling_factor": 0.5}, config, 7, tokens, torch.Generator().manual_seed(3))
    latents, token_ids, noise = first
    assert latents.shape == noise.shape == (6, 4, 16, 16) and token_ids.shape == (6, 32)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    pairs = coupled_shapes(np.random.default_rng([config.seed, 4, 7]), noise_layout(noise), config.caption_dropout)
    images = np.stack([render(shape)[0] for shape, _ in pairs])
    with torch.no_grad():
        expected = vae.encode(torch.from_numpy(images).permute(0, 3, 1, 2).float() / 127.5 - 1).latent_dist.mean * 0.5
    torch.testing.assert_close(latents, expected)


def test_loss_is_finite_and_falls_on_a_fixed_batch(tmp_path):
    torch.manual_seed(0)
    config = TrainConfig(model=TINY_MODEL)
    tokenizer = stage_tokenizer(tmp_path, config)
    unet = build_unet(TINY_MODEL)
    text_encoder = build_text_encoder(TINY_MODEL, len(tokenizer))
    params = list(unet.parameters()) + list(text_encoder.parameters())
    optimizer = torch.optim.AdamW(params, lr=2e-3)
    latents = torch.randn(8, 4, 16, 16)
    token_ids = CaptionTokens(tokenizer)(["a red circle", "a blue star on a white background"] * 4)
    losses = []
    for _ in range(15):
        generator = torch.Generator().manual_seed(0)  # same noise and timesteps every step
        loss = diffusion_loss(unet, text_encoder, noise_schedule(config), latents, token_ids, generator, 5.0, 0.25)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(np.isfinite(losses))
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])


def test_tokenizer_keeps_vocabulary_words_whole(tmp_path):
    tokenizer = stage_tokenizer(tmp_path, TrainConfig(model=TINY_MODEL))
    tokens = tokenizer.tokenize("a small orange star, on a purple background")
    assert tokens == ["a</w>", "small</w>", "orange</w>", "star</w>", ",</w>", "on</w>", "a</w>", "purple</w>", "background</w>"]
    assert tokenizer.model_max_length == 32


def test_tiny_run_exports_a_loadable_pipeline(tmp_path):
    from diffusers import StableDiffusionPipeline

    config = TrainConfig(
        model=TINY_MODEL, vae_steps=2, vae_batch=4, dataset_size=32, decoder_steps=2, unet_steps=3, batch=4,
        warmup_steps=1, checkpoint_every=2, log_every=1,
    )
    run(tmp_path / "run", config, export_dir=None)
    folder = tmp_path / "run" / "pipeline"
    index = json.loads((folder / "model_index.json").read_text())
    assert index["safety_checker"] == [None, None] and index["requires_safety_checker"] is False
    weights = [p for p in folder.rglob("*") if p.suffix in {".safetensors", ".bin", ".pt", ".ckpt"}]
    assert weights and all(p.suffix == ".safetensors" for p in weights)

    pipe = StableDiffusionPipeline.from_pretrained(folder)
    pipe.set_progress_bar_config(disable=True)
    image = pipe("a red circle", num_inference_steps=2, generator=torch.Generator("cpu").manual_seed(0)).images[0]
    assert image.size == (64, 64)
    assert pipe.vae.config.scaling_factor != 0.18215  # set from the data, not the SD default

    # Resuming a finished run is a no-op for training and exports the same weights again.
    run(tmp_path / "run", config, export_dir=tmp_path / "again")
    assert (tmp_path / "again" / "unet" / "diffusion_pytorch_model.safetensors").exists()
