"""Fast tests of the embedded-model training code: renderer, captions, hold-out, loop, export."""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from seedlab.engine.weights.model_info import EMBEDDED_GUIDANCE
from training import evaluate
from training.evaluate import classify, size_of
from training.latent import LATENT_CHANNELS, latent_code, layout_disk, shape_code, unfold_layout
from training.models import ModelConfig, build_text_encoder, build_unet, build_vae
from training.shapes import (
    COLOURS,
    IMAGE_SIZE,
    KINDS,
    MARGIN,
    PALETTE,
    Shape,
    caption,
    held_out_triples,
    render,
    sample_shape,
    shape_height,
    training_triples,
)
from training.train import (
    CONFIGS,
    CaptionTokens,
    TrainConfig,
    diffusion_loss,
    noise_schedule,
    outline_weight,
    parse_args,
    run,
    stage_tokenizer,
    stage_unet,
    training_batch,
    vae_loss,
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


def test_code_folds_the_32px_layout_disk_like_pixel_unshuffle_and_holds_constant_words():
    rng = np.random.default_rng(4)
    for _ in range(50):
        shape = sample_shape(rng, training_triples())
        image, code = shape_code(shape)
        coverage = torch.from_numpy(layout_disk(shape).reshape(32, 2, 32, 2).mean(axis=(1, 3)) * 2 - 1).float()
        assert code.shape == (LATENT_CHANNELS, 16, 16) and code.dtype == np.float32
        torch.testing.assert_close(torch.from_numpy(code[:4]), F.pixel_unshuffle(coverage[None], 2))
        np.testing.assert_array_equal(unfold_layout(code), coverage.numpy())
        kind = [1.0 if k == shape.kind else -1.0 for k in KINDS]
        colours = np.array([*PALETTE[shape.colour], *PALETTE[shape.background]]) / 127.5 - 1
        constants = np.concatenate([kind, colours])
        np.testing.assert_allclose(code[4:], np.broadcast_to(constants[:, None, None], (10, 16, 16)), atol=1e-6)
        np.testing.assert_array_equal(image, render(shape)[0])


def test_layout_disk_spans_the_shape_box_and_ignores_kind_and_colours():
    mask = render(Shape("red", "square", "large", "blue", 40, 9, 13))[1]
    codes = [latent_code(Shape(colour, kind, "large", background, 40, 9, 13))
             for colour, kind, background in [("red", "square", "blue"), ("green", "square", "black"),
                                              ("red", "circle", "white")]]
    for code in codes[1:]:
        np.testing.assert_array_equal(code[:4], codes[0][:4])
        assert not np.array_equal(code[4:], codes[0][4:])
    disk = layout_disk(Shape("red", "square", "large", "blue", 40, 9, 13))
    assert disk.sum() == pytest.approx(np.pi * 400, rel=0.03) and not (disk & ~mask).any()  # inscribed in the square
    # A triangle is shorter than wide: its disk is centred on its box, so it pokes out evenly above and below.
    triangle = render(Shape("red", "triangle", "large", "blue", 40, 9, 13))[1]
    rows = np.nonzero(layout_disk(Shape("red", "triangle", "large", "blue", 40, 9, 13)).any(axis=1))[0]
    shape_rows = np.nonzero(triangle.any(axis=1))[0]
    assert abs((shape_rows.min() - rows.min()) - (rows.max() - shape_rows.max())) <= 1


def test_training_batch_renders_codes_and_replays_on_resume(tmp_path):
    config = TrainConfig(model=TINY_MODEL, batch=40)
    tokens = CaptionTokens(stage_tokenizer(tmp_path, config))
    codes, token_ids = training_batch(config, 7, tokens)
    again = training_batch(config, 7, tokens)
    assert codes.shape == (40, LATENT_CHANNELS, 16, 16) and token_ids.shape == (40, 32)
    assert torch.equal(codes, again[0]) and torch.equal(token_ids, again[1])
    assert not torch.equal(codes, training_batch(config, 8, tokens)[0])
    assert codes[:, :4].min() == -1 and codes[:, :4].max() == 1  # every batch holds background and shape
    assert (codes[:, 4:8, 0, 0] == 1).sum(dim=1).eq(1).all()  # one kind each


def losses_on_a_fixed_batch(loss_of, params, lr: float, steps: int) -> list[float]:
    """Take `steps` AdamW steps on loss_of() (the same batch, noise and timesteps each time); return the losses."""
    optimizer = torch.optim.AdamW(params, lr=lr)
    losses = []
    for _ in range(steps):
        loss = loss_of()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(np.isfinite(losses))
    return losses


def test_vae_learns_to_decode_codes_on_a_fixed_batch():
    torch.manual_seed(0)
    vae = build_vae(TINY_MODEL)
    rng = np.random.default_rng(6)
    images, codes = zip(*(shape_code(sample_shape(rng, training_triples())) for _ in range(4)))
    images = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float() / 127.5 - 1
    codes = torch.from_numpy(np.stack(codes))
    losses = losses_on_a_fixed_batch(
        lambda: vae_loss(vae, images, codes, torch.Generator().manual_seed(0), code_noise=0.3)[0], vae.parameters(),
        3e-3, 20
    )
    assert np.mean(losses[-3:]) < 0.7 * np.mean(losses[:3])


def test_diffusion_loss_falls_on_a_fixed_batch(tmp_path):
    torch.manual_seed(0)
    tokenizer = stage_tokenizer(tmp_path, TrainConfig(model=TINY_MODEL))
    unet = build_unet(TINY_MODEL)
    text_encoder = build_text_encoder(TINY_MODEL, len(tokenizer))
    latents = torch.randn(8, LATENT_CHANNELS, 16, 16)
    token_ids = CaptionTokens(tokenizer)(["a red circle", "a blue star on a white background"] * 4)
    schedule = noise_schedule(TrainConfig())
    losses = losses_on_a_fixed_batch(
        lambda: diffusion_loss(unet, text_encoder, schedule, latents, token_ids, torch.Generator().manual_seed(0),
                               5.0, 0.25),
        [*unet.parameters(), *text_encoder.parameters()], 2e-3, 15,
    )
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])


def test_tokenizer_keeps_vocabulary_words_whole(tmp_path):
    tokenizer = stage_tokenizer(tmp_path, TrainConfig(model=TINY_MODEL))
    tokens = tokenizer.tokenize("a small orange star, on a purple background")
    assert tokens == ["a</w>", "small</w>", "orange</w>", "star</w>", ",</w>", "on</w>", "a</w>", "purple</w>",
                      "background</w>"]
    assert tokenizer.model_max_length == 32


def test_tiny_run_exports_a_loadable_pipeline(tmp_path):
    from diffusers import StableDiffusionPipeline

    config = TrainConfig(
        model=TINY_MODEL, vae_steps=2, vae_batch=4, decoder_steps=2, unet_steps=3, batch=4, warmup_steps=1,
        checkpoint_every=2, log_every=1,
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
    assert pipe.vae.config.scaling_factor == 1.0  # the designed code is at unit scale, not SD's 0.18215
    assert pipe.unet.config.in_channels == pipe.vae.config.latent_channels == LATENT_CHANNELS

    # Resuming a finished run is a no-op for training and exports the same weights again.
    run(tmp_path / "run", config, export_dir=tmp_path / "again")
    assert (tmp_path / "again" / "unet" / "diffusion_pytorch_model.safetensors").exists()


def test_outline_weight_marks_a_band_around_the_shape_and_nothing_else():
    image, mask = render(Shape("red", "star", "large", "blue", 40, 9, 13))
    weight = outline_weight(torch.from_numpy(image[None]).permute(0, 3, 1, 2).float() / 127.5 - 1, 10.0)[0, 0].numpy()
    assert set(np.unique(weight)) == {1.0, 10.0}
    outline = mask & ~np.roll(mask, 1, axis=1)  # left edges of the star
    assert (weight[outline] == 10.0).all()
    assert (weight[:5] == 1.0).all() and (weight[:, :5] == 1.0).all()  # background far from the shape
    near = np.zeros_like(mask)  # within 2 px (a 5x5 window) of a shape pixel
    for dy, dx in np.ndindex(5, 5):
        near |= np.roll(mask, (dy - 2, dx - 2), axis=(0, 1))
    assert not (weight[~near] == 10.0).any()
    assert weight[13 + 20, 9 + 20] == 1.0  # deep inside the star


def test_train_config_is_frozen_and_replace_makes_a_new_one():
    config = TrainConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.unet_steps = 2000
    longer = dataclasses.replace(config, unet_steps=2000)
    assert longer.unet_steps == 2000 and config.unet_steps == 1200 and longer is not config
    assert longer == TrainConfig(unet_steps=2000) and hash(longer) == hash(TrainConfig(unet_steps=2000))


def test_shipped_config_is_the_readme_schedule_and_otherwise_the_defaults():
    shipped = CONFIGS["shipped"]
    # README "Models": VAE 1,500 steps, decoder fine-tune 2,000, UNet batches of 64, 1,200 UNet steps resumed to 2,000.
    assert (shipped.vae_steps, shipped.decoder_steps, shipped.batch) == (1500, 2000, 64)
    assert (shipped.unet_resumed_at, shipped.unet_steps) == ((1200,), 2000)
    assert dataclasses.replace(shipped, unet_steps=1200, unet_resumed_at=()) == TrainConfig() == CONFIGS["default"]
    assert shipped.model == ModelConfig()  # the shipped network sizes


@pytest.mark.parametrize("resumed_at, steps", [((0,), 5), ((5,), 5), ((6,), 5), ((3, 2), 5)])
def test_resume_points_outside_the_run_are_refused(resumed_at, steps):
    with pytest.raises(ValueError, match=rf"unet_resumed_at .* got \({resumed_at[0]},"):
        TrainConfig(unet_steps=steps, unet_resumed_at=resumed_at)


def test_the_cli_maps_flags_onto_the_named_config(capsys):
    assert parse_args([])[1] == CONFIGS["default"]
    args, config = parse_args(["--config", "shipped", "--out", "somewhere", "--export", "there"])
    assert config == CONFIGS["shipped"] and str(args.out) == "somewhere" and str(args.export) == "there"
    assert parse_args(["--config", "shipped", "--unet-steps", "3000"])[1] == dataclasses.replace(CONFIGS["shipped"],
                                                                                              unet_steps=3000)
    assert parse_args(["--unet-steps", "2000"])[1] == TrainConfig(unet_steps=2000)  # the README's old second command
    assert parse_args(["--pilot"])[1] == CONFIGS["pilot"] and CONFIGS["pilot"].unet_steps < 100
    for argv in (["--config", "shipped", "--unet-steps", "1000"], ["--pilot", "--config", "shipped"],
                 ["--config", "nope"]):
        with pytest.raises(SystemExit) as exit_info:
            parse_args(argv)
        assert exit_info.value.code == 2
    assert "--unet-steps 1000 does not fit --config shipped: unet_resumed_at" in capsys.readouterr().err


def test_one_run_with_a_resume_point_equals_the_two_part_run(tmp_path):
    """The shipped schedule in one command trains exactly what a run stopped early and resumed longer trains."""
    config = TrainConfig(model=TINY_MODEL, batch=4, unet_steps=6, warmup_steps=1, log_every=100, checkpoint_every=100)
    tokenizer = stage_tokenizer(tmp_path, config)

    def trained(name: str, *configs: TrainConfig) -> list[torch.Tensor]:
        (tmp_path / name).mkdir()
        for part in configs:  # each part rebuilds the models and resumes from the checkpoint, like a new process
            unet, text_encoder = stage_unet(tmp_path / name, part, tokenizer)
        return [p.detach().clone() for p in [*unet.parameters(), *text_encoder.parameters()]]

    two_parts = trained("two_parts", dataclasses.replace(config, unet_steps=3), config)
    one_run = trained("one_run", dataclasses.replace(config, unet_resumed_at=(3,)))
    plain = trained("plain", config)
    assert all(torch.equal(a, b) for a, b in zip(one_run, two_parts, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(plain, two_parts, strict=True))  # the resume point matters


def test_evaluation_defaults_to_the_shipped_guidance():
    assert evaluate.parse_args([]).guidance == [EMBEDDED_GUIDANCE]
    assert evaluate.parse_args(["--guidance", "2", "7.5"]).guidance == [2.0, 7.5]
