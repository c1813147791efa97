"""Tiny pipelines of other families, built from configs in code (after diffusers' own fast-test components):
SDXL, SD3, Flux, PixArt-Sigma, SD 2.x v-prediction, a turbo-style config and unconditional DDIM/DDPM.

Random fixed weights, tokenizers written locally, saved as hub-style folders and loaded with `--model DIR`
exactly as a user's checkpoint folder. SD3's T5 is a tiny T5 encoder; its tokenizer is a locally written
CLIP tokenizer (SD3 only asks it for ids padded to a length), so nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from diffusers import (
    AutoencoderKL,
    DDIMScheduler,
    DDPMScheduler,
    DPMSolverMultistepScheduler,
    EulerDiscreteScheduler,
    FlowMatchEulerDiscreteScheduler,
    FluxPipeline,
    FluxTransformer2DModel,
    PixArtSigmaPipeline,
    PixArtTransformer2DModel,
    SD3Transformer2DModel,
    StableDiffusion3Pipeline,
    StableDiffusionXLPipeline,
    UNet2DConditionModel,
    UNet2DModel,
)
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, T5Config, T5EncoderModel

from training.tokenizer import write_clip_tokenizer

WORDS = ["a", "red", "blue", "circle", "square"]


def _clip_config(tokenizer, hidden: int, projection: int | None = None) -> CLIPTextConfig:
    extra = {"projection_dim": projection} if projection else {}
    return CLIPTextConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                          num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=16,
                          bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                          pad_token_id=tokenizer.pad_token_id, hidden_act="gelu", **extra)


def _t5(tokenizer) -> T5EncoderModel:
    """A one-layer T5 encoder (32 wide) over `tokenizer`'s vocabulary: SD3's, Flux's and PixArt's text encoder."""
    return T5EncoderModel(T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=37, num_layers=1, num_heads=4,
                                   relative_attention_num_buckets=8, pad_token_id=tokenizer.pad_token_id))


def _vae(latent_channels: int = 4, **config) -> AutoencoderKL:
    return AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(8, 16), latent_channels=latent_channels,
                         down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                         norm_num_groups=8, layers_per_block=1, mid_block_add_attention=False, sample_size=32, **config)


def save_tiny_sdxl(folder: str | Path, seed: int = 0) -> Path:
    """A tiny SDXL pipeline (two CLIP encoders, a text_time UNet): 32x32 images."""
    folder = Path(folder)
    torch.manual_seed(seed)  # only the random weights; generation draws from each recipe's own generator
    tokenizer = write_clip_tokenizer(folder / "tokenizer_src", WORDS, max_length=16)
    tokenizer_2 = write_clip_tokenizer(folder / "tokenizer_2_src", WORDS, max_length=16)
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, block_out_channels=(16, 32), layers_per_block=1,
        norm_num_groups=8, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(2, 4), use_linear_projection=True,
        addition_embed_type="text_time", addition_time_embed_dim=8, transformer_layers_per_block=(1, 1),
        projection_class_embeddings_input_dim=6 * 8 + 16, cross_attention_dim=32)
    pipe = StableDiffusionXLPipeline(
        vae=_vae().eval(), unet=unet.eval(), tokenizer=tokenizer, tokenizer_2=tokenizer_2,
        text_encoder=CLIPTextModel(_clip_config(tokenizer, 16)).eval(),
        text_encoder_2=CLIPTextModelWithProjection(_clip_config(tokenizer_2, 16, 16)).eval(),
        scheduler=EulerDiscreteScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                                         steps_offset=1, timestep_spacing="leading"),
        force_zeros_for_empty_prompt=True)
    pipe.save_pretrained(folder)
    return folder


def save_tiny_sd3(folder: str | Path, seed: int = 0) -> Path:
    """A tiny SD3 pipeline (two CLIP encoders with projections, a T5 encoder, an MMDiT transformer): 32x32 images."""
    folder = Path(folder)
    torch.manual_seed(seed)
    tokenizer = write_clip_tokenizer(folder / "tokenizer_src", WORDS, max_length=16)
    tokenizer_2 = write_clip_tokenizer(folder / "tokenizer_2_src", WORDS, max_length=16)
    tokenizer_3 = write_clip_tokenizer(folder / "tokenizer_3_src", WORDS, max_length=32)
    t5 = _t5(tokenizer_3)
    transformer = SD3Transformer2DModel(
        sample_size=16, patch_size=1, in_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=4,
        caption_projection_dim=32, joint_attention_dim=32, pooled_projection_dim=32, out_channels=4)
    pipe = StableDiffusion3Pipeline(
        transformer=transformer.eval(), vae=_vae(scaling_factor=1.5305, shift_factor=0.0609).eval(),
        scheduler=FlowMatchEulerDiscreteScheduler(),
        text_encoder=CLIPTextModelWithProjection(_clip_config(tokenizer, 16, 16)).eval(), tokenizer=tokenizer,
        text_encoder_2=CLIPTextModelWithProjection(_clip_config(tokenizer_2, 16, 16)).eval(), tokenizer_2=tokenizer_2,
        text_encoder_3=t5.eval(), tokenizer_3=tokenizer_3)
    pipe.save_pretrained(folder)
    return folder


def save_tiny_sd2_vpred(folder: str | Path, seed: int = 0) -> Path:
    """A tiny SD 2.x-style pipeline whose scheduler predicts v (v-prediction), as SD 2.x 768 checkpoints do."""
    from tests.tiny import save_tiny_pipeline

    folder = save_tiny_pipeline(Path(folder), seed)
    config_path = folder / "scheduler" / "scheduler_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "prediction_type": "v_prediction", "rescale_betas_zero_snr": False}))
    return folder


def save_tiny_flux(folder: str | Path, seed: int = 0) -> Path:
    """A tiny Flux pipeline (CLIP for the pooled prompt, a T5 for the tokens, packed latents): 32x32 images.

    The VAE's 4 latent channels become 16 per token (2x2 patches), as Flux packs its 16 into 64.
    """
    folder = Path(folder)
    torch.manual_seed(seed)
    tokenizer = write_clip_tokenizer(folder / "tokenizer_src", WORDS, max_length=16)
    tokenizer_2 = write_clip_tokenizer(folder / "tokenizer_2_src", WORDS, max_length=32)
    t5 = _t5(tokenizer_2)
    transformer = FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=32, pooled_projection_dim=32, guidance_embeds=True, axes_dims_rope=(4, 4, 8))
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0, use_dynamic_shifting=True, base_image_seq_len=256,
                                                max_image_seq_len=4096, base_shift=0.5, max_shift=1.15)
    pipe = FluxPipeline(
        transformer=transformer.eval(), scheduler=scheduler,
        vae=_vae(scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False, use_post_quant_conv=False).eval(),
        text_encoder=CLIPTextModel(_clip_config(tokenizer, 32)).eval(), tokenizer=tokenizer,
        text_encoder_2=t5.eval(), tokenizer_2=tokenizer_2)
    pipe.save_pretrained(folder)
    return folder


def save_tiny_pixart_sigma(folder: str | Path, seed: int = 0) -> Path:
    """A tiny PixArt-Sigma pipeline (a T5 encoder with attention masks, a DiT that learns its variance): 32x32
    images."""
    folder = Path(folder)
    torch.manual_seed(seed)
    tokenizer = write_clip_tokenizer(folder / "tokenizer_src", WORDS, max_length=32)
    t5 = _t5(tokenizer)
    transformer = PixArtTransformer2DModel(
        sample_size=16, num_layers=1, patch_size=2, attention_head_dim=8, num_attention_heads=3, caption_channels=32,
        in_channels=4, cross_attention_dim=24, out_channels=8, attention_bias=True, activation_fn="gelu-approximate",
        num_embeds_ada_norm=1000, norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6)
    scheduler = DPMSolverMultistepScheduler(beta_schedule="linear", beta_start=0.0001, beta_end=0.02)
    pipe = PixArtSigmaPipeline(tokenizer=tokenizer, text_encoder=t5.eval(), vae=_vae().eval(),
                               transformer=transformer.eval(), scheduler=scheduler)
    pipe.save_pretrained(folder)
    return folder


def save_tiny_turbo(folder: str | Path, seed: int = 0) -> Path:
    """A tiny SD pipeline configured as sd-turbo ships: Euler with "trailing" timesteps (1-4 steps, guidance 0)."""
    from tests.tiny import save_tiny_pipeline

    folder = save_tiny_pipeline(Path(folder), seed)
    config_path = folder / "scheduler" / "scheduler_config.json"
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "timestep_spacing": "trailing"}))
    return folder


def save_tiny_ddim(folder: str | Path, seed: int = 0, pipeline: str = "DDIMPipeline") -> Path:
    """A tiny unconditional pixel-space pipeline, as in diffusers' reproducibility guide (google/ddpm-cifar10-32):
    a UNet2DModel and no prompt, 32x32 images. `pipeline` "DDPMPipeline" gives DDPM's (its steps draw noise)."""
    import diffusers

    folder = Path(folder)
    torch.manual_seed(seed)
    unet = UNet2DModel(sample_size=32, in_channels=3, out_channels=3, block_out_channels=(8, 16), layers_per_block=1,
                       norm_num_groups=8, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"), attention_head_dim=8)
    scheduler = DDIMScheduler() if pipeline == "DDIMPipeline" else DDPMScheduler()
    getattr(diffusers, pipeline)(unet=unet.eval(), scheduler=scheduler).save_pretrained(folder)
    return folder
