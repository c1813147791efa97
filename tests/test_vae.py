"""A separate VAE from the models folder (issue 29): A1111's "VAE" / "VAE hash", ComfyUI's VAELoader decode the image.

A VAE file of other random weights, in LDM's layout (as A1111 and ComfyUI load it) or diffusers', must give the image
that the same pipeline gives with that VAE set directly, pixel for pixel.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import AutoencoderKL
from safetensors.torch import save_file

import tests.reference.a1111_lora as lora_reference
from seedlab.engine.generation import generate, generate_grid
from seedlab.engine.models import ModelStore, describe
from seedlab.engine.recipe import Recipe, RecipeError
from seedlab.engine.weights import library, vae, vae_names
from seedlab.files.comfyui.reader import read_comfyui
from seedlab.files.infotext import parameters_text, read_infotext
from seedlab.files.links import decode_link, encode_link
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from seedlab.serving.reproduction import Original
from tests.helpers import use_models_folder
from tests.reference.ldm_layout import vae_keys
from tests.tiny import tiny_pipeline

CPU = torch.device("cpu")
BASE = Recipe(prompt="a red circle", seed=7, num_inference_steps=2, guidance_scale=1.0, model="tiny")  # no CFG: fast


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    return use_models_folder(tmp_path, monkeypatch, "VAE", "vae/sub", "Lora")


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def other(pipe):
    """The tiny pipeline's VAE with other random weights (a fine-tuned VAE of the same shapes)."""
    torch.manual_seed(3)
    return AutoencoderKL.from_config(pipe.vae.config).eval()


def tiny_model(pipeline):
    model = describe("tiny", pipeline, CPU)
    model.traced = False  # a few steps run faster eager than traced (the same pixels, tests/test_tracing.py)
    return model


@pytest.fixture
def model(pipe):
    return tiny_model(pipe)


def save_ldm(vae_module, path, prefix="first_stage_model."):
    save_file({prefix + key: value.contiguous() for key, value in vae_keys(vae_module).items()}, path)
    return path


def save_diffusers(vae_module, path):
    save_file({key: value.contiguous() for key, value in vae_module.state_dict().items()}, path)
    return path


def with_vae_set(pipe, vae_module):
    """The same pipeline with the VAE set directly (what the file must give)."""
    direct = copy.copy(pipe)
    object.__setattr__(direct, "vae", vae_module)
    return tiny_model(direct)


def pixels(result) -> np.ndarray:
    return np.asarray(result.image, dtype=np.int16)


def test_an_ldm_vae_decodes_as_that_vae_set_directly_and_the_link_and_text_carry_it(folders, pipe, other, model):
    path = save_ldm(other, folders / "VAE" / "other.safetensors")
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    recipe = BASE.replace(scheduler="Euler")  # an A1111 sampler: decoded by generation itself
    result = generate(model, recipe.replace(vae="other.safetensors"))
    assert np.array_equal(pixels(result), pixels(generate(with_vae_set(pipe, other), recipe)))
    assert np.abs(pixels(result) - pixels(generate(model, recipe))).max() > 10  # the VAE changes the image
    assert (result.recipe.vae, result.recipe.vae_hash) == ("other.safetensors", sha256[:10])  # A1111's name and hash
    link = encode_link(result.recipe, result.fingerprint, None, "http://x/")
    assert f"vaehash={sha256[:10]}" in link and decode_link(link)[0] == result.recipe
    fields, notes, _ = read_infotext(parameters_text(result.recipe, result.fingerprint))
    assert (fields["vae"], fields["vae_hash"]) == ("other.safetensors", sha256[:10])
    assert not any("VAE" in note for note in notes)
    assert generate(model, result.recipe).fingerprint == result.fingerprint  # its own name and hash are accepted


def test_a_diffusers_layout_vae_with_a_lora_and_comfyuis_path_name(folders, pipe, other, model, monkeypatch):
    save_diffusers(other, folders / "vae" / "sub" / "fine.safetensors")
    lora_reference.write_kohya_lora(folders / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder,
                                    relative_std=0.5)
    recipe = BASE.replace(loras="<lora:ink:0.8>")
    before = {key: tensor.clone() for key, tensor in pipe.vae.state_dict().items()}
    reads = []
    real = vae.read_decoder
    monkeypatch.setattr(vae, "read_decoder", lambda path: reads.append(path) or real(path))
    cells = generate_grid(model, recipe.replace(vae="sub\\fine.safetensors"), [1, 2])
    expected = generate(with_vae_set(pipe, other), recipe.replace(seed=2))  # the LoRA merged by SeedLab both times
    assert np.array_equal(pixels(cells[1]), pixels(expected))
    assert cells[0].recipe.vae == "fine.safetensors" and cells[0].recipe.lora_hashes
    assert len(reads) == 1  # the VAE copy is made once and kept
    assert model.pipeline.vae is pipe.vae  # the model keeps its own VAE, its weights untouched
    assert all(torch.equal(before[key], tensor) for key, tensor in pipe.vae.state_dict().items())


def test_a_vae_is_found_by_its_name_or_its_hash_never_outside_the_folder(folders, other, tmp_path):
    path = save_ldm(other, folders / "VAE" / "Anime.safetensors", prefix="")
    short = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    for name in ("Anime", "Anime.safetensors", "anime.safetensors", "sub/Anime.safetensors", "x\\Anime.pt"):
        assert vae_names.find(name).path == path
    assert vae_names.find("", short).path == path and vae_names.find("Anime", short.upper()).hash == short
    with pytest.raises(ValueError, match=r"vae_hash 0123456789 is not the hash of VAE Anime.safetensors here"):
        vae_names.find("Anime", "0123456789")
    (folders / "VAE" / "old.pt").write_bytes(b"a pickle")
    with pytest.raises(ValueError, match=r"VAE old.pt is not a .safetensors file: a .pt is a pickle"):
        vae_names.find("old.pt")
    (folders / "VAE" / "Anime.ckpt").write_bytes(b"a pickle")
    assert vae_names.find("Anime.ckpt").path == path  # the safetensors file of that name, never the pickle
    outside = save_ldm(other, tmp_path / "secret.safetensors")
    (folders / "VAE" / "link.safetensors").symlink_to(outside)
    save_ldm(other, folders / "root.safetensors")  # the models folder itself holds no VAEs
    for name in ("link", "secret", "root", str(outside), "../secret.safetensors"):
        with pytest.raises(library.NotFound, match="is not found in the models folder"):
            vae_names.find(name)
    for name in ("../secret.safetensors", str(outside), "C:\\vae.safetensors", "sub/../x.safetensors"):
        with pytest.raises(RecipeError, match="vae must be the file name of a VAE in the models folder"):
            BASE.replace(vae=name)
    with pytest.raises(RecipeError, match="vae_hash must be empty or an A1111 VAE hash"):
        BASE.replace(vae="Anime", vae_hash="xyz")


def test_a1111_text_and_a_comfyui_graph_name_their_vae():
    fields, notes, _ = read_infotext("a cat\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 1, Size: 512x512, "
                                     "Model hash: 0123456789, Model: m, VAE hash: DF3C506E51, VAE: kl-f8-anime2.ckpt")
    assert (fields["vae"], fields["vae_hash"]) == ("kl-f8-anime2.ckpt", "df3c506e51")
    assert not any("VAE" in note for note in notes)
    graph = {"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "m.safetensors"}},
             "2": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["1", 1]}},
             "3": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
             "4": {"class_type": "KSampler", "inputs": {"seed": 5, "steps": 20, "cfg": 7, "sampler_name": "euler",
                                                        "scheduler": "normal", "denoise": 1, "model": ["1", 0],
                                                        "positive": ["2", 0], "negative": ["2", 0],
                                                        "latent_image": ["3", 0]}},
             "5": {"class_type": "VAELoader", "inputs": {"vae_name": "sub/vae-ft-mse.safetensors"}},
             "6": {"class_type": "VAEDecode", "inputs": {"samples": ["4", 0], "vae": ["5", 0]}},
             "7": {"class_type": "VAEDecode", "inputs": {"samples": ["4", 0], "vae": ["1", 2]}},
             "8": {"class_type": "PreviewImage", "inputs": {"images": ["7", 0]}},
             "9": {"class_type": "SaveImage", "inputs": {"images": ["6", 0]}}}
    assert read_comfyui(json.dumps(graph))[1]["vae"] == "sub/vae-ft-mse.safetensors"
    graph["9"]["inputs"]["images"] = ["7", 0]  # the saved image decoded by the checkpoint's own VAE
    assert "vae" not in read_comfyui(json.dumps(graph))[1]


@pytest.mark.parametrize("name, vae_name, vae_hash", [  # typed from each file's text
    ("bluelovers-auto1111-pnginfo/tmp46c8k1iv.png", "kl-f8-anime2.ckpt", "df3c506e51"),
    ("Haoming02-sd-webui-diffusion-cg/off.webp", "sdxl-vae.safetensors", "235745af8d"),
    ("comfyanonymous-ComfyUI_examples/controlnet_example.png", "vae-ft-mse-840000-ema-pruned.safetensors", None),
    ("sd-parsers/unclip_2pass_cropped.png", "kl-f8-anime2.ckpt", None),
    ("nkchocoai-ComfyUI-SaveImageWithMetaData/filename_format.png", "clearvae_nanslesstest.safetensors", None),
    ("comfyanonymous-ComfyUI_examples/lora.png", None, None),  # decoded by the checkpoint's own VAE
])
def test_real_files_name_their_vae(name, vae_name, vae_hash):
    from seedlab.files.metadata import read_metadata

    reading = read_metadata(Path(__file__).parent / "corpus" / name)
    assert (reading.fields.get("vae"), reading.fields.get("vae_hash")) == (vae_name, vae_hash)
    assert not any("VAE" in note and "equivalent" in note for note in reading.notes)


def test_a_missing_vae_is_a_note_for_another_tools_file_and_refused_in_a_link(folders, other, model):
    store = ModelStore(["tiny"], device=CPU)
    store.add(model)
    admission = Admission(store, Limits())
    path = save_ldm(other, folders / "VAE" / "here.safetensors")
    short = hashlib.sha256(path.read_bytes()).hexdigest()[:10]

    def dropped(**fields) -> Original:
        admitted = admission.admit_file(Original(BASE.replace(**fields), None, None, None, ()))
        assert admitted.refused is None
        return admitted.original

    gone = dropped(vae="kl-f8-anime2.ckpt", vae_hash="df3c506e51")
    assert (gone.recipe.vae, gone.recipe.vae_hash) == ("", "")
    assert gone.notes == ("VAE 'kl-f8-anime2.ckpt' (hash df3c506e51) is not found in the models folder: "
                          "the checkpoint's own VAE decodes the image, so its colours differ",)
    renamed = dropped(vae="vae-ft-mse.safetensors", vae_hash=short)
    assert renamed.recipe.vae == "here.safetensors"
    assert renamed.notes == (f"VAE vae-ft-mse.safetensors (hash {short}) is found by its hash as here.safetensors",)
    changed = dropped(vae="here.safetensors", vae_hash="0123456789")
    assert changed.recipe.vae_hash == short and "another file, so the colours may differ" in changed.notes[0]
    with pytest.raises(RecipeError) as error:
        admission.recipe({**BASE.to_dict(), "vae": "gone.safetensors"})
    assert str(error.value) == "vae VAE 'gone.safetensors' is not found in the models folder"  # not where it is
    with pytest.raises(RecipeError, match="vae_hash 0123456789 is not the hash of VAE here.safetensors"):
        admission.recipe({**BASE.to_dict(), "vae": "here", "vae_hash": "0123456789"})
    assert admission.recipe({**BASE.to_dict(), "vae": "here", "vae_hash": short}).vae == "here"
    with pytest.raises(ValueError, match="VAE 'gone' is not found in the models folder; put it in the models"):
        generate(model, BASE.replace(vae="gone"))
    elsewhere = dropped(model="flux1-dev", vae="here.safetensors")  # a VAE for a model this server does not have
    assert elsewhere.recipe.vae == "" and "VAE here.safetensors was used with flux1-dev" in elsewhere.notes[1]


def test_a_vae_that_does_not_fit_the_model_is_refused_naming_the_field(folders, pipe, model):
    torch.manual_seed(0)
    wider = AutoencoderKL.from_config({**pipe.vae.config, "block_out_channels": (8, 16, 32)})
    save_ldm(wider, folders / "VAE" / "wide.safetensors")
    with pytest.raises(ValueError, match=r"vae wide.safetensors does not fit this model's VAE: decoder\.conv_in\.weight"
                                         r" is \(16, 4, 3, 3\) here, \(32, 4, 3, 3\) in the file"):
        generate(model, BASE.replace(vae="wide"))
    save_file({"encoder.conv_in.weight": torch.zeros(1)}, folders / "VAE" / "encoder.safetensors")
    with pytest.raises(ValueError, match="vae encoder.safetensors holds no VAE decoder weights"):
        generate(model, BASE.replace(vae="encoder"))
    (folders / "VAE" / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="vae junk.safetensors is not a safetensors file"):
        generate(model, BASE.replace(vae="junk"))
