"""Builders for the three networks of the embedded model, from small explicit configs."""

from dataclasses import dataclass

from diffusers import AutoencoderKL, UNet2DConditionModel
from transformers import CLIPTextConfig, CLIPTextModel


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the VAE, UNet and text encoder. The defaults are the shipped model."""

    latent_channels: int = 14  # the designed code of training.latent
    vae_channels: tuple[int, ...] = (32, 64, 64)  # 3 levels: 64x64 -> 16x16 latents
    unet_channels: tuple[int, ...] = (64, 96)  # 2 levels: 16x16 and 8x8; sized for the 2 s grid
    unet_attention_head_dim: int = 32
    text_hidden: int = 64
    text_layers: int = 2
    text_heads: int = 4
    text_intermediate: int = 128
    max_length: int = 32  # tokenizer model_max_length; position embeddings must cover it


def build_vae(config: ModelConfig) -> AutoencoderKL:
    """AutoencoderKL with len(vae_channels)-1 downsamplings and no attention (flat shapes need none)."""
    levels = len(config.vae_channels)
    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * levels,
        up_block_types=("UpDecoderBlock2D",) * levels,
        block_out_channels=config.vae_channels,
        layers_per_block=1,
        latent_channels=config.latent_channels,
        # 4 channels per group at the thin 64x64 level: one channel per group (instance norm)
        # erases flat colours and measurably slowed reconstruction learning.
        norm_num_groups=4,
        sample_size=64,
        mid_block_add_attention=False,
    )


def build_unet(config: ModelConfig) -> UNet2DConditionModel:
    """Small conditional UNet on 16x16 latents: plain convs at full resolution, cross-attention below."""
    levels = len(config.unet_channels)
    down = ("DownBlock2D",) + ("CrossAttnDownBlock2D",) * (levels - 1)
    up = ("CrossAttnUpBlock2D",) * (levels - 1) + ("UpBlock2D",)
    return UNet2DConditionModel(
        sample_size=16,
        in_channels=config.latent_channels,
        out_channels=config.latent_channels,
        down_block_types=down,
        up_block_types=up,
        block_out_channels=config.unet_channels,
        layers_per_block=1,
        attention_head_dim=config.unet_attention_head_dim,
        cross_attention_dim=config.text_hidden,
        norm_num_groups=16,
    )


def build_text_encoder(config: ModelConfig, vocab_size: int) -> CLIPTextModel:
    """Tiny CLIP text transformer, trained from scratch together with the UNet."""
    text_config = CLIPTextConfig(
        vocab_size=vocab_size,
        hidden_size=config.text_hidden,
        intermediate_size=config.text_intermediate,
        num_hidden_layers=config.text_layers,
        num_attention_heads=config.text_heads,
        max_position_embeddings=config.max_length,
        # Token ids of the tokenizer written by training.tokenizer (set again by the caller).
        bos_token_id=vocab_size - 2,
        eos_token_id=vocab_size - 1,
        pad_token_id=vocab_size - 1,
    )
    return CLIPTextModel(text_config)
