"""A checkpoint's A1111 hash ("Model hash"): written into the images it makes, used to find the file another tool
named, and checked: a link for another file is refused, another tool's image made with another file says so."""

from __future__ import annotations

import hashlib

import pytest
import torch
from diffusers import DiffusionPipeline

from seedlab.engine.generation import generate
from seedlab.engine.models import ModelStore, load_model
from seedlab.engine.recipe import Recipe, RecipeError
from seedlab.files.infotext import parameters_text, read_infotext
from seedlab.files.links import decode_link, encode_link
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from seedlab.serving.reproduction import Original
from tests.helpers import use_models_folder
from tests.reference.ldm_layout import save_config_folder, save_ldm_checkpoint
from tests.tiny import save_tiny_pipeline

CPU = torch.device("cpu")
RECIPE = Recipe(prompt="a red circle", seed=7, num_inference_steps=2, guidance_scale=3.0)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_pipeline(tmp_path_factory.mktemp("tiny-folder"))


@pytest.fixture
def folder(tmp_path, monkeypatch, tiny_folder):
    """A1111's models folder with the tiny pipeline as Stable-diffusion/tiny.safetensors; its AutoV2 hash."""
    models = use_models_folder(tmp_path, monkeypatch, "Stable-diffusion")
    pipeline = DiffusionPipeline.from_pretrained(tiny_folder)
    save_config_folder(pipeline, models / "Stable-diffusion" / "tiny")
    path = save_ldm_checkpoint(pipeline, models / "Stable-diffusion" / "tiny.safetensors", family="sd1")
    return models, hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_image_made_with_a_checkpoint_carries_its_hash_in_the_link_and_the_text(folder, tiny_folder):
    _, sha256 = folder
    model = load_model("tiny", CPU)
    result = generate(model, RECIPE.replace(model="tiny"))
    assert result.recipe.model_hash == sha256[:10]
    link = encode_link(result.recipe, result.fingerprint, None, "http://x/")
    assert f"mhash={sha256[:10]}" in link and decode_link(link)[0] == result.recipe
    fields, notes, _ = read_infotext(parameters_text(result.recipe, result.fingerprint))
    assert fields["model_hash"] == sha256[:10] and not any("hash" in note for note in notes)
    for given in (sha256[:10], sha256, sha256.upper(), "0123456789"):  # the image says which file made it
        made = generate(model, RECIPE.replace(model="tiny", model_hash=given))
        assert (made.fingerprint, made.recipe.model_hash) == (result.fingerprint, sha256[:10])
    folder = generate(load_model(str(tiny_folder), CPU), RECIPE.replace(model_hash=sha256[:10]))  # not a file: none
    assert folder.recipe.model_hash == "" and folder.fingerprint == result.fingerprint


@pytest.mark.parametrize("value", ["xyz", "0123456", "0" * 65, "01234567 "])
def test_a_malformed_hash_is_refused_naming_the_field(value):
    with pytest.raises(RecipeError, match="model_hash must be (empty or an A1111 checkpoint hash|at most 64)"):
        RECIPE.replace(model_hash=value)
    fields, notes, _ = read_infotext(f"a cat\nSteps: 2, Model hash: {value}, Model: tiny")
    assert "model_hash" not in fields or value.strip() == fields["model_hash"]
    if value == "xyz":
        assert any("is not an A1111 hash" in note for note in notes)


def test_another_tools_image_finds_its_checkpoint_by_hash_and_says_when_the_file_differs(folder):
    models, sha256 = folder
    store = ModelStore(["embedded", "tiny"], device=CPU)
    admission = Admission(store, Limits())

    def adapted(**fields) -> Original:
        admitted = admission.admit_file(Original(RECIPE.replace(**fields), None, None, None, ()))
        assert admitted.refused is None
        return admitted.original

    renamed = adapted(model="my-favourite-v3", model_hash=sha256[:10])  # the same file, another name elsewhere
    assert (renamed.recipe.model, renamed.recipe.model_hash) == ("tiny", sha256[:10])
    assert renamed.notes == (f"checkpoint my-favourite-v3 is found by its hash {sha256[:10]} as tiny",)
    other = adapted(model="tiny", model_hash="0123456789")  # the name is here, the file is another
    assert (other.recipe.model, other.recipe.model_hash) == ("tiny", sha256[:10])
    assert other.notes == (f"checkpoint tiny here has hash {sha256[:10]}, the image was made with 0123456789: "
                           "another checkpoint, so the image differs",)
    missing = adapted(model="gone", model_hash="0123456789")
    assert (missing.recipe.model, missing.recipe.model_hash) == ("embedded", "")
    assert missing.notes == ("model gone (checkpoint hash 0123456789) is not available on this server: embedded is "
                             "used",)
    unhashed = adapted(model="embedded", model_hash="0123456789")  # a model that is no checkpoint file here
    assert unhashed.recipe.model_hash == "" and "is not checked: embedded is not a checkpoint file" in unhashed.notes[0]
    # A link (strict) is refused, naming the field, when its hash is not the file's.
    with pytest.raises(RecipeError, match="model_hash is 0123456789, but checkpoint tiny here has hash"):
        admission.recipe({**RECIPE.to_dict(), "model": "tiny", "model_hash": "0123456789"})
    with pytest.raises(RecipeError, match="model_hash names a checkpoint file by its hash; embedded is not"):
        admission.recipe({**RECIPE.to_dict(), "model": "embedded", "model_hash": "0123456789"})
    assert admission.recipe({**RECIPE.to_dict(), "model": "tiny", "model_hash": sha256[:10]}).model == "tiny"
    assert not list(models.glob("**/hashes.json"))  # the hash cache is SeedLab's own, not in the user's folder
