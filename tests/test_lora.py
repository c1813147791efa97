"""LoRA (issue 29): A1111's tags, the models folder, kohya and diffusers layouts merged as A1111 merges them.

The reference is tests/reference/a1111_lora.py (A1111 1.10's parser and merge, re-created from its sources);
the LoRA files are written there too, in kohya's and diffusers' key layouts, on a tiny pipeline.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import tests.reference.a1111_lora as reference
from seedlab.engine.generation import generate, generate_grid
from seedlab.engine.models import describe
from seedlab.engine.recipe import Recipe, RecipeError
from seedlab.engine.weights import library, lora, lora_names
from tests.helpers import use_models_folder
from tests.tiny import tiny_pipeline


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    """A models folder in A1111's layout and SeedLab's own hash cache, both in the test's temp folder."""
    return use_models_folder(tmp_path, monkeypatch, "Lora/styles")


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def model(pipe):
    return describe("tiny", pipe, torch.device("cpu"))


def pixels(result) -> np.ndarray:
    return np.asarray(result.image, dtype=np.int16)


STRENGTH = 0.5  # each LoRA moves a weight by half its own spread at weight 1: visible on the tiny model
BASE = dict(prompt="a red circle", seed=7, num_inference_steps=4, guidance_scale=3.0, scheduler="Euler",
            prompt_syntax="a1111")


# --- tags, as A1111 parses them ---------------------------------------------------------------------------------

@pytest.mark.parametrize("prompt", [
    "a <lora:x:0.5> cat", "a <lora:x:0.5:1> cat", "<lora:x:te=0.3:unet=0.8>a cat", "<lora:x> cat",
    "a <lora:x:0.7>, <lora:y:1.2:0>, cat", "a <hypernet:h:1> <lora:x:2> cat", "<lyco:z:0.4> and <lora:x:1>",
    "<lora:x:unet=0.5>", "(a <lora:x:0.5>:1.2) cat", "no tags at all", "<lora:x:0.5> a <b> <c:d",
])
def test_tags_are_read_as_a1111_reads_them(prompt):
    text, uses = lora_names.extract(prompt)
    expected_text, expected = reference.parse_extra_networks(prompt)
    assert text == expected_text
    assert [(use.name, use.te, use.unet) for use in uses] == expected


@pytest.mark.parametrize("prompt, problem", [
    ("a <lora:x:abc> cat", "weight must be a number"), ("<lora:x:11>", "from -10 to 10"),
    ("<lora::1>", "has no name"), ("<lora:x:nan>", "from -10 to 10"), ("<lora:x:0.5 a <b>", "must be a number"),
])
def test_a_bad_tag_is_refused_naming_the_prompt(prompt, problem):
    with pytest.raises(RecipeError) as error:
        Recipe(prompt=prompt, prompt_syntax="a1111")
    assert str(error.value).startswith("prompt ") and problem in str(error.value)
    Recipe(prompt=prompt)  # plain syntax: the text as it is


def test_the_loras_field_holds_only_tags_and_the_hashes_are_a1111s():
    assert lora_names.parse_field("<lora:a:0.5>, <lora:b:1:0>") == [lora_names.LoraUse("a", 0.5, 0.5),
                                                                     lora_names.LoraUse("b", 1.0, 0.0)]
    with pytest.raises(RecipeError, match="loras must be <lora:NAME:WEIGHT> tags"):
        Recipe(prompt="p", loras="a cat <lora:a:1>")
    with pytest.raises(RecipeError, match="lora_hashes must be"):
        Recipe(prompt="p", lora_hashes="a: not-hex")
    with pytest.raises(RecipeError, match="at most 8 LoRAs"):
        Recipe(prompt="<lora:a:1>" * 5, prompt_syntax="a1111", loras="<lora:b:1>" * 4)
    hashes = {"a:b,c": "0123456789ab", "d": "ba9876543210"}
    assert lora_names.format_hashes(hashes) == "ab,c: 0123456789ab, d: ba9876543210".replace("ab,c", "abc")
    assert lora_names.parse_hashes(lora_names.format_hashes(hashes)) == {"abc": "0123456789ab", "d": "ba9876543210"}


# --- the models folder ------------------------------------------------------------------------------------------

def test_a_lora_is_found_by_name_or_by_hash_and_its_hash_is_a1111s(folders, pipe):
    path = reference.write_kohya_lora(folders / "Lora" / "styles" / "ink.safetensors", pipe.unet, pipe.text_encoder,
                                      relative_std=STRENGTH)
    found = library.find("lora", "ink")
    assert (found.path, found.hash) == (path, reference.lora_shorthash(path))
    renamed = folders / "Lora" / "ink-v2.safetensors"
    path.rename(renamed)
    by_hash = library.find("lora", "ink", found.hash)  # the file the image was made with, whatever it is called now
    assert (by_hash.name, by_hash.path) == ("ink-v2", renamed)
    with pytest.raises(library.NotFound, match=r"LoRA 'ink' \(hash 0123456789ab\) is not found in the models folder"):
        library.find("lora", "ink", "0123456789ab")


def test_the_hash_is_computed_once_and_kept_in_seedlabs_cache_file(folders, pipe, tmp_path, monkeypatch):
    path = reference.write_kohya_lora(folders / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder,
                                      relative_std=STRENGTH)
    calls = []
    real = library.addnet_hash
    monkeypatch.setattr(library, "_HASH_FUNCTIONS", {"addnet": lambda p: calls.append(p) or real(p),
                                                      "sha256": library.file_hash})
    first = library.short_hash("lora", path)
    assert library.short_hash("lora", path) == first and len(calls) == 1
    cached = json.loads((tmp_path / "cache" / "hashes.json").read_text())
    assert list(cached.values()) == [real(path)]
    monkeypatch.setattr(library, "_HASHES", library._HashCache())  # a new process reads the file
    assert library.short_hash("lora", path) == first and len(calls) == 1


def test_a_name_never_reaches_the_file_system_outside_the_models_folder(folders, pipe, tmp_path):
    outside = reference.write_kohya_lora(tmp_path / "secret.safetensors", pipe.unet, pipe.text_encoder,
                                         relative_std=STRENGTH)
    (folders / "Lora" / "link.safetensors").symlink_to(outside)
    for name in ("../secret", "../../secret", str(outside), str(outside.with_suffix("")), "link", "secret"):
        with pytest.raises(library.NotFound):
            library.find("lora", name)
    with pytest.raises(library.NotFound):  # nor by its hash
        library.find("lora", "x", reference.lora_shorthash(outside))


def test_no_models_folder_is_named_in_the_message(monkeypatch):
    monkeypatch.delenv(library.ENV)
    with pytest.raises(library.NotFound, match=r"no models folder is set \(--models-dir or SEEDLAB_MODELS_DIR\)"):
        library.find("lora", "ink")


# --- merging, as A1111 merges ----------------------------------------------------------------------------------

def reference_image(pipe, recipe, loras):
    """The image with the LoRAs merged by the reference into a copy of the pipeline's weights."""
    import copy

    unet, text_encoder = copy.deepcopy(pipe.unet), copy.deepcopy(pipe.text_encoder)
    reference.apply_a1111_loras(unet, text_encoder, loras)
    merged = copy.copy(pipe)
    object.__setattr__(merged, "unet", unet)
    object.__setattr__(merged, "text_encoder", text_encoder)
    text = reference.parse_extra_networks(recipe.prompt)[0]  # what A1111 encodes: the tags taken out
    return pixels(generate(describe("tiny", merged, torch.device("cpu")), recipe.replace(prompt=text)))


@pytest.mark.parametrize("tags, weights", [
    ("<lora:ink:0.8>", [("ink", 0.8, 0.8)]),
    ("<lora:ink:1:0.5>", [("ink", 1.0, 0.5)]),
    ("<lora:ink:0.6> <lora:dots:-0.7>", [("ink", 0.6, 0.6), ("dots", -0.7, -0.7)]),
])
def test_a_kohya_lora_makes_the_image_a1111_makes(folders, pipe, model, tags, weights):
    paths = {"ink": reference.write_kohya_lora(folders / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder,
                                               relative_std=STRENGTH),
             "dots": reference.write_kohya_lora(folders / "Lora" / "styles" / "dots.safetensors", pipe.unet,
                                                pipe.text_encoder, seed=5, conv=True, rank=2, alpha=1.0,
                                                relative_std=STRENGTH)}
    recipe = Recipe(**{**BASE, "prompt": f"a red {tags} circle"})
    result = generate(model, recipe)
    plain = reference_image(pipe, recipe.replace(prompt="a red circle"), [])
    expected = reference_image(pipe, recipe, [(paths[name], te, unet) for name, te, unet in weights])
    assert np.abs(pixels(result) - plain).max() > 10  # the LoRA changes the image
    assert np.array_equal(pixels(result), expected)
    assert result.recipe.lora_hashes == reference.lora_hashes_infotext([(name, paths[name]) for name, *_ in weights])


def test_weight_zero_is_the_image_without_the_lora_and_the_model_is_left_as_it_was(folders, pipe, model):
    reference.write_kohya_lora(folders / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder,
                               relative_std=STRENGTH)
    before = {name: tensor.clone() for name, tensor in pipe.unet.state_dict().items()}
    plain = pixels(generate(model, Recipe(**BASE)))
    assert np.array_equal(pixels(generate(model, Recipe(**{**BASE, "prompt": "a red circle <lora:ink:0>"}))), plain)
    assert not np.array_equal(pixels(generate(model, Recipe(**{**BASE, "prompt": "a red circle <lora:ink:1>"}))), plain)
    assert np.array_equal(pixels(generate(model, Recipe(**BASE))), plain)
    assert all(torch.equal(before[name], tensor) for name, tensor in pipe.unet.state_dict().items())


def test_the_diffusers_layout_and_the_loras_field_merge_the_same_weights(folders, pipe, model):
    reference.write_kohya_lora(folders / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder, alpha=4.0,
                               relative_std=STRENGTH)
    reference.write_diffusers_lora(folders / "Lora" / "ink_peft.safetensors", pipe.unet, pipe.text_encoder,
                                   relative_std=STRENGTH)
    kohya = generate(model, Recipe(**{**BASE, "prompt": "a red circle <lora:ink:0.9>"}))
    peft = generate(model, Recipe(**{**BASE, "prompt": "a red circle", "loras": "<lora:ink_peft:0.9>"}))
    assert np.array_equal(pixels(kohya), pixels(peft))  # alpha 4 at rank 4 is scale 1, as peft's default
    assert peft.recipe.loras == "<lora:ink_peft:0.9>" and peft.recipe.prompt == "a red circle"


def test_text_encoder_and_unet_weights_act_apart(folders, pipe, model):
    reference.write_kohya_lora(folders / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder,
                               relative_std=STRENGTH)
    variant = lora.merged(model, lora.resolve([lora_names.LoraUse("ink", 1.0, 0.0)]))
    assert variant.pipeline.unet is not model.pipeline.unet
    for name, tensor in variant.pipeline.unet.state_dict().items():
        assert torch.equal(tensor, model.pipeline.unet.state_dict()[name])
    changed = [name for name, tensor in variant.pipeline.text_encoder.state_dict().items()
               if not torch.equal(tensor, model.pipeline.text_encoder.state_dict()[name])]
    assert changed and all("self_attn" in name or "mlp" in name for name in changed)
    shared = {id(t) for t in model.pipeline.text_encoder.parameters()}
    assert any(id(t) in shared for t in variant.pipeline.text_encoder.parameters())  # untouched weights are shared


def test_a_grid_with_a_lora_merges_once_and_each_cell_equals_its_solo_image(folders, pipe, model, monkeypatch):
    reference.write_kohya_lora(folders / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder,
                               relative_std=STRENGTH)
    merges = []
    real = lora.deltas
    monkeypatch.setattr(lora, "deltas", lambda *args: merges.append(1) or real(*args))
    recipe = Recipe(**{**BASE, "prompt": "a red circle <lora:ink:0.7>"})
    cells = generate_grid(model, recipe, [1, 2, 3])
    assert len(merges) == 1
    for cell in cells:
        assert np.array_equal(pixels(cell), pixels(generate(model, cell.recipe)))
    assert len(merges) == 1  # the merged copy is kept


def test_a_missing_lora_is_refused_naming_it_and_its_hash(folders, model):
    with pytest.raises(ValueError, match=r"LoRA 'gone' \(hash 0123456789ab\) is not found in the models folder"):
        generate(model, Recipe(**{**BASE, "prompt": "a <lora:gone:1>", "lora_hashes": "gone: 0123456789ab"}))


@pytest.mark.parametrize("content, problem", [
    (b"not a safetensors file at all", "is not a safetensors file"),
    ((10**9).to_bytes(8, "little") + b"{}", "is not a safetensors file"),
    (b"\x10\x00\x00\x00\x00\x00\x00\x00" + b'{"a":1}         ', "cannot be read"),
])
def test_a_malformed_file_is_refused_with_a_message(folders, model, content, problem):
    (folders / "Lora" / "bad.safetensors").write_bytes(content)
    with pytest.raises(ValueError, match=f"LoRA bad.safetensors {problem}"):
        generate(model, Recipe(**{**BASE, "prompt": "a <lora:bad:1>"}))


def test_a_lora_for_another_model_is_refused(folders, model):
    from safetensors.torch import save_file

    save_file({"lora_unet_nothing_here.lora_down.weight": torch.ones(2, 3),
               "lora_unet_nothing_here.lora_up.weight": torch.ones(3, 2)}, folders / "Lora" / "other.safetensors")
    with pytest.raises(ValueError, match="matches no layer of this model"):
        generate(model, Recipe(**{**BASE, "prompt": "a <lora:other:1>"}))


# --- a server: a link names what it needs, another tool's file runs without what is missing -------------------

def test_a_server_refuses_a_link_naming_a_missing_lora_and_runs_a_dropped_file_without_it(folders, pipe, model):
    from seedlab.engine.models import ModelStore
    from seedlab.serving.admission import Admission
    from seedlab.serving.limits import Limits
    from seedlab.serving.reproduction import Original

    store = ModelStore(["tiny"], device=torch.device("cpu"))
    store.add(model)
    admission = Admission(store, Limits())
    reference.write_kohya_lora(folders / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder)
    here = library.find("lora", "ink").hash
    with pytest.raises(RecipeError) as error:
        admission.recipe({**BASE, "model": "tiny", "prompt": "a <lora:gone:1> <lora:ink:1>"})
    # The folder is named, never where it is on the server's disk (a visitor sees this message).
    assert str(error.value) == "prompt LoRA 'gone' is not found in the models folder"
    with pytest.raises(RecipeError, match="loras LoRA 'gone' is not found"):
        admission.recipe({**BASE, "model": "tiny", "prompt": "a", "loras": "<lora:gone:1>"})
    dropped = Recipe(**{**BASE, "model": "tiny", "prompt": "a <lora:gone:1>, <lora:ink:0.5> cat",
                        "lora_hashes": "gone: 0123456789ab, ink: 111111111111"})
    admitted = admission.admit_file(Original(dropped, None, None, None, ()))
    assert admitted.refused is None
    adapted = admitted.original
    assert adapted.recipe.prompt == "a , <lora:ink:0.5> cat" and adapted.recipe.lora_hashes == "ink: 111111111111"
    assert adapted.notes == ("LoRA 'gone' (hash 0123456789ab) is not found in the models folder: it is "
                             "left out, so the image differs",
                             f"LoRA ink's file here has hash {here}, the image was made with 111111111111: another "
                             "version of it, so the image may differ")
    assert np.array_equal(pixels(generate(model, adapted.recipe)),  # the tag is taken out, as A1111 would
                          pixels(generate(model, adapted.recipe.replace(prompt="a , cat", loras="<lora:ink:0.5>"))))
