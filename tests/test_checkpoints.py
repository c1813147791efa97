"""Single-file checkpoints (A1111's and ComfyUI's .safetensors) load offline and make the pixels of their diffusers
folder.

The files are written by tests/reference/ldm_layout.py (the LDM key layout A1111 and ComfyUI keep) from the
tiny pipeline, tiny SD 2.x / SDXL layouts and the embedded model; a models folder in A1111's or ComfyUI's layout
is given by SEEDLAB_MODELS_DIR, as a user gives it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import socket
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import (
    AutoencoderKL,
    DiffusionPipeline,
    EulerDiscreteScheduler,
    StableDiffusionXLPipeline,
    UNet2DConditionModel,
)
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

from seedlab.engine.generation import generate
from seedlab.engine.models import describe, load_model
from seedlab.engine.recipe import FieldError, Recipe
from seedlab.engine.weights import checkpoint_files, library
from seedlab.engine.weights.checkpoint_files import CheckpointError, find_checkpoint, plan, remember_v
from seedlab.engine.weights.checkpoints import clip_tokenizer, load_single_file, predicts_v
from seedlab.engine.weights.model_info import EMBEDDED_MODEL_DIR, read_info
from tests.helpers import use_models_folder
from tests.reference.ldm_layout import save_config_folder, save_ldm_checkpoint
from tests.tiny import save_tiny_pipeline
from training.tokenizer import write_clip_tokenizer

RECIPES = [Recipe(prompt="a red circle", seed=7, num_inference_steps=2, guidance_scale=3.0),
           Recipe(prompt="a blue square", seed=11, num_inference_steps=2, guidance_scale=3.0, scheduler="Euler a")]
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def models(tmp_path, monkeypatch):
    """An empty models folder in A1111's layout, given as a user gives it, with SeedLab's hash cache beside it."""
    return use_models_folder(tmp_path, monkeypatch, "Stable-diffusion")


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_tiny_pipeline(tmp_path_factory.mktemp("tiny-folder"))


@pytest.fixture(scope="module")
def tiny(tiny_folder):
    return DiffusionPipeline.from_pretrained(tiny_folder)


def put(pipeline, folder: Path, name: str, family: str = "sd1", beside: bool = True) -> Path:
    """Write `pipeline` as folder/NAME.safetensors (LDM layout) with its config folder NAME/ beside it."""
    if beside:
        save_config_folder(pipeline, folder / name)
    return save_ldm_checkpoint(pipeline, folder / f"{name}.safetensors", family=family)


def pixels(model, recipe) -> np.ndarray:
    return np.asarray(generate(model, recipe).image)


def same_weights(a, b, components=("unet", "vae", "text_encoder")) -> bool:
    for name in components:
        mine, theirs = getattr(a, name).state_dict(), getattr(b, name).state_dict()
        if mine.keys() != theirs.keys() or not all(torch.equal(mine[k], theirs[k]) for k in mine):
            return False
    return True


# --- the same pixels as the diffusers folder --------------------------------------------------------------------

def test_tiny_single_file_makes_the_pixels_of_its_folder(tiny, tiny_folder, models):
    put(tiny, models / "Stable-diffusion", "tiny")
    folder, single = load_model(str(tiny_folder), CPU), load_model("tiny", CPU)
    assert same_weights(folder.pipeline, single.pipeline)
    assert single.info.native_size == folder.info.native_size and single.info.a1111
    info = read_info("tiny")  # from the config folder beside the file, before and without loading it
    assert (info.native_size, info.default_scheduler) == (folder.info.native_size, folder.info.default_scheduler)
    for recipe in RECIPES:
        assert np.array_equal(pixels(single, recipe), pixels(folder, recipe))


@pytest.mark.skipif(not (EMBEDDED_MODEL_DIR / "model_index.json").exists(), reason="no embedded model")
def test_embedded_model_as_one_file_makes_its_pixels_and_is_found_by_hash(models):
    embedded = load_model("embedded", CPU)
    path = put(embedded.pipeline, models / "Stable-diffusion" / "mine", "shapes")  # A1111 allows sub-folders
    single = load_model("shapes", CPU)
    assert same_weights(embedded.pipeline, single.pipeline)
    recipe = RECIPES[0].replace(guidance_scale=2.5)
    assert np.array_equal(pixels(single, recipe), pixels(embedded, recipe))
    data = path.read_bytes()
    assert len(data) > 0x110000  # AutoV1 hashes the 64 KiB at 1 MiB
    autov2 = hashlib.sha256(data).hexdigest()
    autov1 = hashlib.sha256(data[0x100000:0x110000]).hexdigest()[:8]
    for name in (autov2[:10], autov2, f"other [{autov2[:10]}]", f"shapes.safetensors [{autov1}]", autov1):
        found = find_checkpoint(name)
        assert found is not None and found.path == path and found.hash == autov2[:10], name


def test_comfyui_layout_and_names(tiny, tmp_path, monkeypatch):
    comfy = tmp_path / "ComfyUI" / "models"
    path = put(tiny, comfy / "checkpoints", "tiny_comfy")
    monkeypatch.setenv(library.ENV, str(comfy))
    for name in ("tiny_comfy", "TINY_COMFY", "tiny_comfy.safetensors", "tiny_comfy.safetensors [0123456789]"):
        assert find_checkpoint(name).path == path, name
    header_only(comfy / "checkpoints" / "a_lora.safetensors", ["lora_unet_x.lora_up.weight"])
    assert checkpoint_files.checkpoint_names() == ["tiny_comfy"]
    assert find_checkpoint("stabilityai/sd-turbo") is None and find_checkpoint("tiny_other") is None
    assert same_weights(load_model("tiny_comfy", CPU).pipeline, tiny)


def test_sd2_and_sdxl_layouts_load_their_weights(tiny, tmp_path):
    sd2 = put(tiny, tmp_path, "tiny_sd2", family="sd2")
    assert plan(sd2).family == "sd2" and same_weights(load_single_file(sd2, family="sd2"), tiny)
    xl = tiny_sdxl(tmp_path / "xl-src")
    path = put(xl, tmp_path, "tiny_xl", family="sdxl")
    loaded = load_single_file(path)
    assert plan(path).family == "sdxl" and isinstance(loaded, StableDiffusionXLPipeline)
    assert same_weights(loaded, xl, ("unet", "vae", "text_encoder", "text_encoder_2"))
    recipe = RECIPES[0].replace(width=32, height=32)
    assert np.array_equal(pixels(describe("xl", loaded, CPU), recipe), pixels(describe("xl", xl, CPU), recipe))


def tiny_sdxl(folder: Path) -> StableDiffusionXLPipeline:
    """A tiny SDXL whose two encoders differ in width (diffusers tells SDXL's encoders apart by it) and whose VAE
    has its mid-block attention (1x1 convolutions in the LDM layout)."""
    torch.manual_seed(1)
    tokenizers = [write_clip_tokenizer(folder / f"t{i}", ["a", "red", "blue", "circle"], max_length=16) for i in (1, 2)]

    def encoder(cls, tokenizer, width, **extra):
        return cls(CLIPTextConfig(vocab_size=len(tokenizer), hidden_size=width, intermediate_size=2 * width,
                                  num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=16,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                  pad_token_id=tokenizer.pad_token_id, hidden_act="gelu", **extra)).eval()
    unet = UNet2DConditionModel(
        sample_size=8, block_out_channels=(16, 32), layers_per_block=2, norm_num_groups=8, attention_head_dim=(2, 4),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=8,
        transformer_layers_per_block=(1, 2), projection_class_embeddings_input_dim=6 * 8 + 12, cross_attention_dim=28)
    vae = AutoencoderKL(block_out_channels=(8, 16, 16), latent_channels=4, down_block_types=("DownEncoderBlock2D",) * 3,
                        up_block_types=("UpDecoderBlock2D",) * 3, norm_num_groups=8, layers_per_block=1, sample_size=32)
    return StableDiffusionXLPipeline(
        vae=vae.eval(), unet=unet.eval(), tokenizer=tokenizers[0], tokenizer_2=tokenizers[1],
        text_encoder=encoder(CLIPTextModel, tokenizers[0], 16),
        text_encoder_2=encoder(CLIPTextModelWithProjection, tokenizers[1], 12, projection_dim=12),
        scheduler=EulerDiscreteScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                                         steps_offset=1, timestep_spacing="leading"))


def test_loading_makes_no_network_call(tiny, tmp_path, monkeypatch):
    path = put(tiny, tmp_path, "offline")
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise OSError("no network in this test")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert same_weights(load_single_file(path), tiny) and calls == []


# --- what a checkpoint is, without its weights ----------------------------------------------------------------

def header_only(path: Path, keys: list[str]) -> Path:
    """A valid safetensors file holding a one-number tensor under each key: a family's names without its shapes."""
    save_file({key: torch.zeros(1) for key in keys}, str(path))
    return path


SD1 = ["model.diffusion_model.input_blocks.0.0.weight", "first_stage_model.encoder.conv_in.weight",
       "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight"]
SD2 = SD1[:2] + ["cond_stage_model.model.ln_final.weight"]
SDXL = SD1[:2] + ["conditioner.embedders.0.transformer.text_model.final_layer_norm.weight",
                  "conditioner.embedders.1.model.ln_final.weight"]


def test_info_comes_from_the_shipped_config_of_the_detected_family(models):
    folder = models / "Stable-diffusion"
    cases = {"v15": (SD1, (512, 512), "PNDMScheduler", 7.5), "v2": (SD2, (768, 768), "DDIMScheduler", 7.5),
             "xl": (SDXL, (1024, 1024), "EulerDiscreteScheduler", 5.0)}
    for name, (keys, size, scheduler, guidance) in cases.items():
        header_only(folder / f"{name}.safetensors", keys)
        info = read_info(name)
        assert (info.native_size, info.default_scheduler, info.default_guidance) == (size, scheduler, guidance), name
    assert read_info("v2").scheduler_config["prediction_type"] == "v_prediction"  # diffusers' own guess for 2.x
    assert read_info("v15").a1111 and read_info("v2").a1111 and not read_info("xl").a1111
    with pytest.raises(ValueError, match=r"v15.safetensors does not fit SeedLab's SD 1.x config.*v15/ or v15.config/"):
        load_model("v15", CPU)


def test_sd2_prediction_from_the_yaml_beside_it_or_from_the_unet(models):
    folder = models / "Stable-diffusion"
    base, v = header_only(folder / "base.safetensors", SD2), header_only(folder / "v.safetensors", SD2)
    (folder / "base.yaml").write_text("model:\n  params:\n    linear_start: 0.00085\n")
    (folder / "v.yaml").write_text('model:\n  params:\n    parameterization: "v"\n')
    assert plan(base).config.name == "sd2" and read_info("base").native_size == (512, 512)
    assert plan(v).config.name == "sd2-v" and read_info("v").scheduler_config["prediction_type"] == "v_prediction"
    (folder / "v.yaml").unlink()
    remember_v(v, False)  # what A1111's test said when it was last loaded
    assert read_info("v").scheduler_config["prediction_type"] == "epsilon"
    header_only(folder / "xl_v.safetensors", SDXL)
    (folder / "xl_v.yaml").write_text('model:\n  params:\n    parameterization: "v"\n')
    assert read_info("xl_v").scheduler_config["prediction_type"] == "v_prediction"
    (folder / "bad.yaml").write_text("[not a config")
    header_only(folder / "bad.safetensors", SD1)
    with pytest.raises(FieldError, match="bad.yaml beside checkpoint bad.safetensors"):
        read_info("bad")


class _Unet(torch.nn.Module):
    """Stands in for an SD 2.x UNet: its output is a constant, as A1111's test reads it."""

    def __init__(self, value: float):
        super().__init__()
        self.value, self.weight = value, torch.nn.Parameter(torch.zeros(1))
        self.config = type("Config", (), {"cross_attention_dim": 1024})()

    def forward(self, latent, timestep, encoder_hidden_states):
        assert (timestep.tolist() == [999] and encoder_hidden_states.shape == (1, 2, 1024)
                and latent.shape == (1, 4, 8, 8))
        return type("Out", (), {"sample": torch.full_like(latent, self.value)})()


def test_a1111_v_prediction_test():
    assert predicts_v(_Unet(-0.6)) and not predicts_v(_Unet(0.4))  # minus the 0.5 input: -1.1 and -0.1


def test_clip_tokenizer_is_clips_vocabulary():
    tokenizer = clip_tokenizer()
    assert len(tokenizer) == 49408 and tokenizer.model_max_length == 77
    assert tokenizer("a photo of a cat").input_ids == [49406, 320, 1125, 539, 320, 2368, 49407]
    assert tokenizer.pad_token_id == 49407 and clip_tokenizer("!").pad_token_id == 0


# --- refusals ---------------------------------------------------------------------------------------------------

class _Marker:
    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (str(self.path),)


def test_a_ckpt_is_refused_without_being_unpickled(models, tmp_path):
    marker = tmp_path / "unpickled"
    (models / "Stable-diffusion" / "evil.ckpt").write_bytes(pickle.dumps({"state_dict": _Marker(marker)}))
    with pytest.raises(ValueError, match=r"evil.ckpt is not a .safetensors file: a .ckpt is a pickle"):
        load_model("evil", CPU)
    with pytest.raises(FieldError, match="pickle"):
        read_info("evil")
    with pytest.raises(CheckpointError, match="pickle"):
        load_single_file(models / "Stable-diffusion" / "evil.ckpt")
    assert not marker.exists()
    header_only(models / "Stable-diffusion" / "evil.safetensors", SD1)  # the same name as safetensors: that one
    assert find_checkpoint("evil").path.suffix == ".safetensors" and checkpoint_files.checkpoint_names() == ["evil"]


def test_a_name_never_leaves_the_models_folder(tiny, models, tmp_path):
    outside = put(tiny, tmp_path, "outside")
    (models / "Stable-diffusion" / "link.safetensors").symlink_to(outside)
    for name in ("../outside", "../../outside", "..\\outside", "Stable-diffusion/../../outside", "link",
                 f"{tmp_path}/outside", "outside"):
        assert find_checkpoint(name) is None, name
    with pytest.raises(ValueError, match="is not a folder on this machine"):
        load_model("../outside.safetensors", CPU)


def test_malformed_truncated_oversize_and_unknown_files_are_refused(tiny, tmp_path, monkeypatch):
    good = put(tiny, tmp_path, "good", beside=False)
    data = good.read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    cases = {
        "cut": (data[:len(data) // 2], "cut.safetensors is truncated"),
        "huge": (struct.pack("<Q", 1 << 40) + data[8:], "huge.safetensors is not a safetensors file"),
        "text": (b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!" + data[8:],
                 "text.safetensors is not a safetensors"),
        "list": (_with_header([1, 2]), "list.safetensors is not a safetensors file"),
        "bad": (_with_header({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, 16),
                "bad.safetensors is malformed"),
        "empty": (b"", "empty.safetensors is not a safetensors file"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / f"{name}.safetensors").write_bytes(content)
        with pytest.raises(CheckpointError, match=message):
            load_single_file(tmp_path / f"{name}.safetensors")
    assert length < len(data)
    lora = header_only(tmp_path / "lora.safetensors", ["lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight"])
    with pytest.raises(CheckpointError, match="lora.safetensors has keys of no known family"):
        load_single_file(lora)
    header_only(tmp_path / "novae.safetensors", [SD1[0], SD1[2]])
    with pytest.raises(CheckpointError, match=r"novae.safetensors \(SD 1.x\) has no first_stage_model"):
        load_single_file(tmp_path / "novae.safetensors")
    with pytest.raises(CheckpointError, match="good.safetensors is SD 1.x, not SDXL"):
        load_single_file(good, family="sdxl")
    monkeypatch.setattr(checkpoint_files, "MAX_BYTES", 1000)
    with pytest.raises(CheckpointError, match=r"good.safetensors is \S+ GiB, over the \S+ GiB limit"):
        load_single_file(good)


def _with_header(header, data_bytes: int = 0) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"\0" * data_bytes
