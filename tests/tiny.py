"""Tiny Stable Diffusion pipelines built from configs in code: random weights, no downloads."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline, UNet2DConditionModel
from transformers import CLIPTextConfig, CLIPTextModel

from training.tokenizer import write_clip_tokenizer


def tiny_pipeline(tokenizer_dir: str | Path, seed: int = 0) -> StableDiffusionPipeline:
    """A randomly initialised SD pipeline (64x64 images, 16x16 latents) that runs in milliseconds."""
    # The global RNG is fine here: it only initialises these random weights; generation always
    # draws from the recipe's own generator, never from the global one.
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        block_out_channels=(16, 32),
        layers_per_block=1,
        norm_num_groups=8,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=16,
        attention_head_dim=4,
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16, 16),
        down_block_types=("DownEncoderBlock2D",) * 3,
        up_block_types=("UpDecoderBlock2D",) * 3,
        latent_channels=4,
        norm_num_groups=8,
        layers_per_block=1,
        mid_block_add_attention=False,
    )
    tokenizer = write_clip_tokenizer(tokenizer_dir, ["a", "red", "blue", "circle", "square"], max_length=16)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=16,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    )
    pipe = StableDiffusionPipeline(
        unet=unet.eval(),
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        scheduler=EulerDiscreteScheduler(
            beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, steps_offset=1
        ),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def save_tiny_pipeline(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny pipeline as a diffusers folder, loadable with `--model FOLDER`."""
    folder = Path(folder)
    tiny_pipeline(folder / "tokenizer_src", seed).save_pretrained(folder)
    return folder
