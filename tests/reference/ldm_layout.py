"""Write a diffusers pipeline as ONE safetensors file in the original LDM key layout, as A1111 and ComfyUI keep them.

The inverse of diffusers' LDM-to-diffusers converters (diffusers/loaders/single_file_utils.py), written
from the layouts themselves:
- UNet `model.diffusion_model.*`: `input_blocks.N.0` resnets (in_layers/emb_layers/out_layers/skip_connection),
  `input_blocks.N.1` spatial transformers, `input_blocks.N.0.op` downsamplers, `middle_block.0/1/2`,
  `output_blocks.N.{0,1,2}` (the upsampler after the attention when there is one), `time_embed.0/2`,
  `label_emb.0.0/0.2` (SDXL's text_time embedding), `out.0/2`;
- VAE `first_stage_model.*`: `encoder.down.N.block.M`, `decoder.up.N` counted from the bottom, `mid.block_1/2`,
  `mid.attn_1` with 1x1 convolutions for q/k/v/proj_out, `nin_shortcut`, `norm_out`;
- SD 1.x text encoder `cond_stage_model.transformer.text_model.*` (Hugging Face CLIP names);
- SD 2.x text encoder `cond_stage_model.model.*` and SDXL's second `conditioner.embedders.1.model.*` (OpenCLIP
  names: `resblocks.N.attn.in_proj_weight` = q, k, v stacked, `ln_1`, `mlp.c_fc`, `text_projection` transposed);
- SDXL's first encoder `conditioner.embedders.0.transformer.text_model.*`.
Real files also hold buffers no loader needs (the DDPM schedule, CLIP's position_ids, OpenCLIP's logit_scale):
`extras=True` writes some so the loader is tested against them too.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from safetensors.torch import save_file

RESNET = {"norm1": "in_layers.0", "conv1": "in_layers.2", "time_emb_proj": "emb_layers.1", "norm2": "out_layers.0",
          "conv2": "out_layers.3", "conv_shortcut": "skip_connection"}
UNET_TOP = {"conv_in": "input_blocks.0.0", "time_embedding.linear_1": "time_embed.0",
            "time_embedding.linear_2": "time_embed.2", "add_embedding.linear_1": "label_emb.0.0",
            "add_embedding.linear_2": "label_emb.0.2", "conv_norm_out": "out.0", "conv_out": "out.2"}
VAE_ATTENTION = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out.0": "proj_out"}
OPEN_CLIP_LAYER = {"layer_norm1": "ln_1", "layer_norm2": "ln_2", "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj",
                   "self_attn.out_proj": "attn.out_proj"}
TEXT_PREFIX = {"sd1": "cond_stage_model.transformer.text_model.", "sd2": "cond_stage_model.model.",
               "sdxl": "conditioner.embedders.0.transformer.text_model.", "sdxl_2": "conditioner.embedders.1.model."}


def _resnet(rest: str) -> str:
    name, _, tail = rest.partition(".")
    return f"{RESNET.get(name, name)}.{tail}"


def unet_keys(unet) -> dict[str, torch.Tensor]:
    """The UNet's weights under LDM names (without the `model.diffusion_model.` prefix)."""
    per_block = unet.config.layers_per_block + 1
    attended = [hasattr(block, "attentions") for block in unet.up_blocks]
    out = {}
    for key, value in unet.state_dict().items():
        out[_unet_key(key, per_block, attended)] = value
    return out


def _unet_key(key: str, per_block: int, attended: list[bool]) -> str:
    for old, new in UNET_TOP.items():
        if key.startswith(old + "."):
            return new + key[len(old):]
    if match := re.match(r"down_blocks\.(\d+)\.(resnets|attentions|downsamplers)\.(\d+)\.(.+)", key):
        block, kind, index, rest = int(match[1]), match[2], int(match[3]), match[4]
        if kind == "downsamplers":
            return f"input_blocks.{1 + block * per_block + per_block - 1}.0.op.{rest.removeprefix('conv.')}"
        position = 1 + block * per_block + index
        return (f"input_blocks.{position}.0.{_resnet(rest)}" if kind == "resnets"
                else f"input_blocks.{position}.1.{rest}")
    if match := re.match(r"mid_block\.(resnets|attentions)\.(\d+)\.(.+)", key):
        if match[1] == "attentions":
            return f"middle_block.1.{match[3]}"
        return f"middle_block.{2 * int(match[2])}.{_resnet(match[3])}"
    if match := re.match(r"up_blocks\.(\d+)\.(resnets|attentions|upsamplers)\.(\d+)\.(.+)", key):
        block, kind, index, rest = int(match[1]), match[2], int(match[3]), match[4]
        if kind == "upsamplers":
            return f"output_blocks.{block * per_block + per_block - 1}.{2 if attended[block] else 1}.{rest}"
        position = block * per_block + index
        return (f"output_blocks.{position}.0.{_resnet(rest)}" if kind == "resnets"
                else f"output_blocks.{position}.1.{rest}")
    raise ValueError(f"no LDM name for UNet weight {key}")


def vae_keys(vae) -> dict[str, torch.Tensor]:
    """The VAE's weights under LDM names (without `first_stage_model.`); attention weights as 1x1 convolutions."""
    count = len(vae.config.up_block_types)
    out = {}
    for key, value in vae.state_dict().items():
        new = _vae_key(key, count)
        if ".mid.attn_1." in new and new.endswith(".weight") and value.ndim == 2:
            value = value[:, :, None, None]
        out[new] = value
    return out


def _vae_key(key: str, count: int) -> str:
    key = key.replace("conv_norm_out", "norm_out").replace("conv_shortcut", "nin_shortcut")
    if match := re.match(r"encoder\.down_blocks\.(\d+)\.(resnets|downsamplers)\.(\d+)\.(.+)", key):
        if match[2] == "downsamplers":
            return f"encoder.down.{match[1]}.downsample.{match[4]}"
        return f"encoder.down.{match[1]}.block.{match[3]}.{match[4]}"
    if match := re.match(r"decoder\.up_blocks\.(\d+)\.(resnets|upsamplers)\.(\d+)\.(.+)", key):
        level = count - 1 - int(match[1])
        if match[2] == "upsamplers":
            return f"decoder.up.{level}.upsample.{match[4]}"
        return f"decoder.up.{level}.block.{match[3]}.{match[4]}"
    if match := re.match(r"(encoder|decoder)\.mid_block\.resnets\.(\d+)\.(.+)", key):
        return f"{match[1]}.mid.block_{int(match[2]) + 1}.{match[3]}"
    if match := re.match(r"(encoder|decoder)\.mid_block\.attentions\.0\.(.+)\.(weight|bias)", key):
        return f"{match[1]}.mid.attn_1.{VAE_ATTENTION[match[2]]}.{match[3]}"
    return key


def open_clip_keys(text_encoder) -> dict[str, torch.Tensor]:
    """A CLIP text model's weights under OpenCLIP names (q, k, v stacked into in_proj; text_projection transposed)."""
    state = {key.removeprefix("text_model."): value for key, value in text_encoder.state_dict().items()}
    out = {"token_embedding.weight": state.pop("embeddings.token_embedding.weight"),
           "positional_embedding": state.pop("embeddings.position_embedding.weight"),
           "ln_final.weight": state.pop("final_layer_norm.weight"), "ln_final.bias": state.pop("final_layer_norm.bias")}
    if "text_projection.weight" in state:
        out["text_projection"] = state.pop("text_projection.weight").T.contiguous()
    for layer in range(text_encoder.config.num_hidden_layers):
        old, new = f"encoder.layers.{layer}.", f"transformer.resblocks.{layer}."
        for part in ("weight", "bias"):
            out[f"{new}attn.in_proj_{part}"] = torch.cat([state.pop(f"{old}self_attn.{p}_proj.{part}") for p in "qkv"])
        for key in [key for key in state if key.startswith(old)]:
            rest = key[len(old):]
            for name, ldm in OPEN_CLIP_LAYER.items():
                rest = rest.replace(name, ldm)
            out[new + rest] = state.pop(key)
    if state:
        raise ValueError(f"no OpenCLIP name for {sorted(state)[:3]}")
    return out


def clip_keys(text_encoder) -> dict[str, torch.Tensor]:
    """A CLIP text model's weights under Hugging Face's names below `text_model.` (the SD 1.x layout)."""
    return {key.removeprefix("text_model."): value for key, value in text_encoder.state_dict().items()}


def ldm_state_dict(pipeline, family: str = "sd1", extras: bool = True) -> dict[str, torch.Tensor]:
    """Every weight of `pipeline` under its name in an LDM checkpoint of `family` ("sd1", "sd2", "sdxl")."""
    out = {f"model.diffusion_model.{k}": v for k, v in unet_keys(pipeline.unet).items()}
    out |= {f"first_stage_model.{k}": v for k, v in vae_keys(pipeline.vae).items()}
    first = open_clip_keys(pipeline.text_encoder) if family == "sd2" else clip_keys(pipeline.text_encoder)
    out |= {TEXT_PREFIX[family] + k: v for k, v in first.items()}
    if family == "sdxl":
        out |= {TEXT_PREFIX["sdxl_2"] + k: v for k, v in open_clip_keys(pipeline.text_encoder_2).items()}
    if extras:
        out |= _extras(pipeline, family)
    return out


def _extras(pipeline, family: str) -> dict[str, torch.Tensor]:
    """Buffers real checkpoints carry and loaders ignore."""
    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=torch.float64) ** 2
    extras = {"betas": betas.float(), "alphas_cumprod": torch.cumprod(1 - betas, 0).float()}
    positions = pipeline.text_encoder.config.max_position_embeddings
    if family == "sd1":
        extras[TEXT_PREFIX["sd1"] + "embeddings.position_ids"] = torch.arange(positions)[None]
    else:
        extras[TEXT_PREFIX["sdxl_2" if family == "sdxl" else "sd2"] + "logit_scale"] = torch.tensor(4.6052)
    return extras


def save_ldm_checkpoint(pipeline, path: str | Path, family: str = "sd1", extras: bool = True,
                        dtype: torch.dtype | None = None) -> Path:
    """Write `pipeline` as one LDM-layout safetensors file at `path` (A1111's
    `models/Stable-diffusion/NAME.safetensors`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = ldm_state_dict(pipeline, family, extras)
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    save_file({k: v.contiguous() for k, v in state.items()}, str(path), metadata={"format": "pt"})
    return path


def save_config_folder(pipeline, folder: str | Path) -> Path:
    """The pipeline's configs and tokenizers without weights: what a single file of an unusual shape needs beside it."""
    folder = Path(folder)
    pipeline.save_pretrained(folder)
    for weights in [*folder.rglob("*.safetensors"), *folder.rglob("*.bin")]:
        weights.unlink()
    return folder
