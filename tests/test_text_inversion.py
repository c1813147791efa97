"""Textual inversion embeddings in A1111-syntax prompts, tensor for tensor against A1111 1.10's own steps.

The reference is tests/reference/a1111_prompt.py (EmbeddingDatabase, tokenize_line's fixes, EmbeddingsWithFixes,
"TI hashes", re-created from A1111's sources); the embedding files are written here in the three layouts A1111
reads: A1111's `.pt` (string_to_param), diffusers' `.bin` ({token: vector}) and `.safetensors` (emb_params).
"""

from __future__ import annotations

import os
import pickle

import pytest
import torch
from safetensors.torch import save_file

from seedlab.engine.models import EMBEDDED_MODEL_DIR, describe
from seedlab.engine.prompts import a1111 as prompts
from seedlab.engine.prompts import text_inversion
from seedlab.engine.prompts.embeddings import Embeddings
from seedlab.engine.recipe import Recipe
from seedlab.engine.spec import FieldError
from seedlab.engine.weights import library
from tests.helpers import use_models_folder
from tests.reference.a1111_lora import parse_extra_networks
from tests.reference.a1111_prompt import EmbeddingDatabase, a1111_conditioning, a1111_ti_hashes, calculate_sha256
from tests.tiny import tiny_pipeline

WIDTH = 16  # the tiny pipeline's text encoder (chunks of 14 tokens)


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    """A models folder with embeddings/ inside, SeedLab's own hash cache, no embeddings kept from other tests."""
    monkeypatch.setattr(text_inversion, "_kept", type(text_inversion._kept)())
    return use_models_folder(tmp_path, monkeypatch, "embeddings/styles")


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("tok"))


def vectors(count: int, width: int = WIDTH, seed: int = 0) -> torch.Tensor:
    return torch.randn(count, width, generator=torch.Generator().manual_seed(seed)) * 0.5


def write_a1111(path, vecs):
    """Embedding.save's layout (A1111's own .pt)."""
    torch.save({"string_to_token": {"*": 265}, "string_to_param": {"*": vecs.requires_grad_()}, "name": path.stem,
                "step": 10, "sd_checkpoint": "0123456789", "sd_checkpoint_name": "model"}, path)
    return path


def write_diffusers(path, vecs, token="<concept>"):
    """diffusers' learned_embeds.bin: {token: vector}, one vector as a 1-D tensor."""
    torch.save({token: vecs[0] if len(vecs) == 1 else vecs}, path)
    return path


def write_emb_params(path, vecs):
    save_file({"emb_params": vecs.to(torch.float16)}, path)  # half precision, as many shared files are
    return path


@pytest.fixture
def library_of_embeddings(folders):
    """square (1 vector, one token), inkstyle (3 vectors, a name of 8 tokens), glow (2), red and "red square"."""
    folder = folders / "embeddings"
    write_diffusers(folder / "square.bin", vectors(1, seed=1))
    write_a1111(folder / "styles" / "InkStyle.pt", vectors(3, seed=2))
    write_emb_params(folder / "glow.safetensors", vectors(2, seed=3))
    write_a1111(folder / "red.pt", vectors(1, seed=4))
    write_diffusers(folder / "red square.bin", vectors(4, seed=5))
    return folder


def reference_db(tokenizer, folder, width=WIDTH) -> EmbeddingDatabase:
    db = EmbeddingDatabase(tokenizer, expected_shape=width)
    db.load_from_dir(str(folder))
    assert not db.errors
    return db


def mine(pipe, text, field="prompt", **options):
    found = text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {field: text}, options.get("emphasis",
                                                                                                        "Original"))
    with torch.no_grad():
        return prompts.encode(pipe.tokenizer, pipe.text_encoder, text, embeddings=found, **options)


PROMPTS = [
    "a square circle",  # one embedding, 1 vector, a one-token name
    "a inkstyle circle",  # 3 vectors, a name of 8 tokens (the file is InkStyle.pt: CLIP folds the case)
    "(inkstyle:1.3) a glow, [square]",  # two embeddings and weights
    "a red square and a red circle",  # "red square" (the longer name) first, then "red"
    "a inkstyl circle nothing",  # names that are no embedding's
    "a blue circle BREAK glow",
    "a a a a a a a a a, inkstyle a a",  # the comma rule moves the embedding's places; its fix stays behind
    *[("a " * count) + "inkstyle circle" for count in range(10, 15)],  # at a chunk's end: into the next chunk
    "square " * 30,  # several chunks
]


@pytest.mark.parametrize("text", PROMPTS)
@pytest.mark.parametrize("emphasis", ["Original", "None"])
def test_embeddings_are_placed_as_a1111_places_them_bit_for_bit(pipe, library_of_embeddings, text, emphasis):
    db = reference_db(pipe.tokenizer, library_of_embeddings)
    with torch.no_grad():
        theirs = a1111_conditioning(pipe.tokenizer, pipe.text_encoder, text, emphasis=emphasis, embedding_db=db)
    ours = mine(pipe, text, emphasis=emphasis)
    assert ours.shape == theirs.shape
    # exact; a NaN (tiny weights) on both sides is equal
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0, equal_nan=True)


def test_what_the_cases_cover(pipe, library_of_embeddings):
    found = text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": " ".join(PROMPTS)})
    assert {name: len(vecs) for name, vecs in found.items()} == {"square": 1, "InkStyle": 3, "glow": 2,
                                                                "red square": 4, "red": 1}
    assert found["glow"].dtype == torch.float32
    boundary = [prompts.chunks_of(pipe.tokenizer, text, embeddings=found) for text in PROMPTS[7:12]]
    assert [len(chunks) for chunks in boundary] == [1, 2, 2, 2, 2]  # 10 + 3 fits in 14; 12 + 3 does not
    assert boundary[2][1].fixes == [(0, "InkStyle")]
    moved = prompts.chunks_of(pipe.tokenizer, PROMPTS[6], embeddings=found)
    assert moved[0].fixes == [(10, "InkStyle")] and moved[1].fixes == [] and moved[1].tokens[1:4] == [0, 0, 0]
    plain = prompts.encode(pipe.tokenizer, pipe.text_encoder, "a inkstyl circle nothing")
    assert torch.equal(mine(pipe, "a inkstyl circle nothing"), plain)  # no embedding there: as without any
    assert not torch.equal(mine(pipe, PROMPTS[1]), prompts.encode(pipe.tokenizer, pipe.text_encoder, PROMPTS[1]))


@pytest.mark.skipif(not (EMBEDDED_MODEL_DIR / "model_index.json").exists(), reason="no embedded model")
def test_on_the_embedded_models_real_clip_with_clip_skip(folders):
    from transformers import CLIPTextModel, CLIPTokenizer

    tokenizer = CLIPTokenizer.from_pretrained(EMBEDDED_MODEL_DIR, subfolder="tokenizer")
    encoder = CLIPTextModel.from_pretrained(EMBEDDED_MODEL_DIR, subfolder="text_encoder").eval()
    width = encoder.config.hidden_size  # 64; chunks of 30 tokens
    write_a1111(folders / "embeddings" / "oilpaint.pt", vectors(5, width, seed=6))
    write_emb_params(folders / "embeddings" / "sharp-focus.safetensors", vectors(2, width, seed=7))
    db = reference_db(tokenizer, folders / "embeddings", width)
    texts = ["an oilpaint of a lighthouse, sharp-focus", "a red circle on a blue background, " * 3 + "oilpaint",
             "(oilpaint:1.2), a lighthouse on a cliff over a stormy sea at night with rain, sharp-focus, waves"]
    for text in texts:
        for clip_skip in (1, 2):
            found = text_inversion.for_prompts(tokenizer, encoder, {"prompt": text})
            with torch.no_grad():
                ours = prompts.encode(tokenizer, encoder, text, clip_skip=clip_skip, embeddings=found)
                theirs = a1111_conditioning(tokenizer, encoder, text, clip_skip=clip_skip, embedding_db=db)
            assert set(found) == ({"oilpaint", "sharp-focus"} if "sharp" in text else {"oilpaint"})
            assert torch.equal(ours, theirs), (text, clip_skip)


def test_the_prompt_and_the_negative_prompt_both_use_them_and_the_ti_hashes_are_a1111s(pipe, library_of_embeddings):
    model = describe("tiny", pipe, torch.device("cpu"))
    recipe = Recipe(prompt="a <lora:x:0.5>inkstyle circle, glow", negative_prompt="glow, square", guidance_scale=3.0,
                    prompt_syntax="a1111", num_inference_steps=2)
    db = reference_db(pipe.tokenizer, library_of_embeddings)
    text = parse_extra_networks(recipe.prompt)[0]
    arguments = Embeddings(model).arguments(recipe)
    with torch.no_grad():
        cond = a1111_conditioning(pipe.tokenizer, pipe.text_encoder, text, embedding_db=db)
        uncond = a1111_conditioning(pipe.tokenizer, pipe.text_encoder, recipe.negative_prompt, embedding_db=db,
                                    is_negative_prompt=True)
    assert torch.equal(arguments["prompt_embeds"], cond)
    assert torch.equal(arguments["negative_prompt_embeds"], uncond)
    hashes = text_inversion.ti_hashes(recipe.prompt, recipe.negative_prompt, pipe.tokenizer)
    assert hashes == a1111_ti_hashes(pipe.tokenizer, pipe.text_encoder, text, recipe.negative_prompt, db)
    glow = calculate_sha256(library_of_embeddings / "glow.safetensors")[:12]
    ink = calculate_sha256(library_of_embeddings / "styles" / "InkStyle.pt")[:12]
    square = calculate_sha256(library_of_embeddings / "square.bin")[:12]
    assert hashes == f"InkStyle: {ink}, glow: {glow}, glow: {glow}, square: {square}"  # A1111 repeats glow
    assert text_inversion.ti_hashes("a red circle", "", pipe.tokenizer) == \
        f"red: {calculate_sha256(library_of_embeddings / 'red.pt')[:12]}"
    assert text_inversion.ti_hashes("a blue circle", "nothing", pipe.tokenizer) == ""


def test_an_image_with_an_embedding_differs_from_one_without(pipe, library_of_embeddings):
    import numpy as np

    from seedlab.engine.generation import generate

    model = describe("tiny", pipe, torch.device("cpu"))
    # "No norm": the tiny encoder's hidden states have a mean of ~1e-8, so "Original" emphasis (which divides by
    # it) gives NaN pixels on some CPUs (an Intel Xeon with AVX-512 FP16), and two black images are equal.
    recipe = Recipe(prompt="a inkstyle circle", prompt_syntax="a1111", num_inference_steps=2, guidance_scale=3.0,
                    seed=3, scheduler="Euler", emphasis="No norm")
    with_it = np.asarray(generate(model, recipe).image)
    (library_of_embeddings / "styles" / "InkStyle.pt").unlink()
    without = np.asarray(generate(model, recipe).image)
    assert with_it.shape == without.shape and not np.array_equal(with_it, without)


class RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


def test_a_pickle_that_would_run_code_is_refused_without_running_it(pipe, folders, tmp_path):
    marker = tmp_path / "ran"
    torch.save({"string_to_param": {"*": RunsCode(marker)}}, folders / "embeddings" / "evil.pt")
    (folders / "embeddings" / "old.bin").write_bytes(pickle.dumps({"x": RunsCode(marker)}))  # pre-zip pickle
    with pytest.raises(FieldError, match=r"prompt uses the embedding 'evil': embedding evil\.pt cannot be read safely: "
                                         r"it names posix\.mkdir, which is not a tensor: refused without running it"):
        text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": "a evil circle"})
    with pytest.raises(FieldError, match=r"negative_prompt uses the embedding 'old': embedding old\.bin is not in "
                                         r"torch\.save's zip format"):
        text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": "a", "negative_prompt": "old"})
    assert not marker.exists()
    torch.save({"string_to_param": {"*": vectors(2)}, "step": torch.nn.Linear(2, 2)}, folders / "embeddings" / "mod.pt")
    with pytest.raises(FieldError, match=r"names torch\.nn\.modules\.linear\.Linear, which is not a tensor"):
        text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": "mod"})


def test_original_textual_inversions_parameter_dict_is_read_as_a1111_reads_it(pipe, folders):
    """A1111's safe unpickler allows ParameterDict (string_to_param saved as a module by older tools)."""
    torch.save({"string_to_token": {"*": 265}, "string_to_param": torch.nn.ParameterDict({"*": torch.nn.Parameter(
        vectors(2, seed=9))})}, folders / "embeddings" / "old-style.pt")
    db = reference_db(pipe.tokenizer, folders / "embeddings")
    text = "a old-style circle"
    with torch.no_grad():
        theirs = a1111_conditioning(pipe.tokenizer, pipe.text_encoder, text, embedding_db=db)
    assert torch.equal(mine(pipe, text), theirs)
    assert not torch.equal(theirs, prompts.encode(pipe.tokenizer, pipe.text_encoder, text))


@pytest.mark.parametrize("write, problem", [
    (lambda path: write_a1111(path.with_suffix(".pt"), vectors(2, 32)),
     r"embedding bad\.pt is 32 wide, but this model's text encoder is 16 wide"),
    (lambda path: save_file({"a": vectors(1), "b": vectors(1)}, path.with_suffix(".safetensors")),
     r"bad\.safetensors is neither A1111's \(string_to_param\) nor diffusers' .* holds a, b"),
    (lambda path: torch.save({"string_to_param": {"*": vectors(1), "+": vectors(1)}}, path.with_suffix(".pt")),
     r"bad\.pt must have one term in string_to_param, has 2"),
    (lambda path: save_file({"clip_l": vectors(1, 768), "clip_g": vectors(1, 1280)}, path.with_suffix(".safetensors")),
     r"bad\.safetensors is an SDXL embedding \(clip_l and clip_g, 768 \+ 1280 wide\)"),
    (lambda path: torch.save(vectors(2), path.with_suffix(".pt")), r"bad\.pt is not a dict of tensors"),
    (lambda path: torch.save({"t": torch.ones(2, 16, dtype=torch.int64)}, path.with_suffix(".bin")),
     r"bad\.bin's vectors must be a float tensor"),
    (lambda path: path.with_suffix(".safetensors").write_bytes(b"\x10" + b"\x00" * 7 + b"not json at all!"),
     r"bad\.safetensors cannot be read safely"),
    (lambda path: torch.save({"t": vectors(80)}, path.with_suffix(".pt")), r"bad\.pt has 80 vectors of width 16"),
])
def test_a_file_that_cannot_be_used_is_refused_naming_it(pipe, folders, write, problem):
    write(folders / "embeddings" / "bad")
    with pytest.raises(FieldError, match=problem):
        text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": "a bad circle"})
    assert text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": "a circle"}) == {}


def test_a_file_over_the_size_limit_is_refused(pipe, folders, monkeypatch):
    write_a1111(folders / "embeddings" / "big.pt", vectors(2))
    monkeypatch.setattr(text_inversion, "MAX_FILE_BYTES", 1000)
    with pytest.raises(FieldError, match=r"embedding big\.pt: 0\.0 MB is more than the 0 MB allowed"):
        text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": "big"})


def test_a_name_never_reaches_the_file_system_outside_the_models_folder(pipe, folders, tmp_path):
    outside = write_a1111(tmp_path / "secret.pt", vectors(2))
    (folders / "embeddings" / "link.pt").symlink_to(outside)
    (tmp_path / "elsewhere").mkdir()
    write_a1111(tmp_path / "elsewhere" / "far.pt", vectors(2))
    for text in ("secret", "../secret", str(outside), str(outside.with_suffix("")), "link", "far", "../elsewhere/far"):
        assert text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": text}) == {}
        assert text_inversion.ti_hashes(text, text, pipe.tokenizer) == ""
    assert library.files("embedding") == {}


def test_a1111s_embeddings_folder_beside_models_counts_only_if_it_really_is_one(pipe, folders, tmp_path):
    beside = tmp_path / "embeddings"
    beside.mkdir()
    write_a1111(beside / "near.pt", vectors(2))
    assert set(library.files("embedding")) == {"near"}
    assert set(text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": "a near circle"})) == {"near"}
    beside.rename(tmp_path / "other")
    (tmp_path / "embeddings").symlink_to(tmp_path / "other")  # a link to a folder of another name
    assert library.files("embedding") == {}
    (tmp_path / "embeddings").unlink()
    (tmp_path / "embeddings").symlink_to(tmp_path.parent)  # a link out of the models folder's parent
    assert library.files("embedding") == {}


def test_loras_are_found_as_before_and_embeddings_are_not_loras(folders):
    (folders / "Lora").mkdir()
    save_file({"x": torch.zeros(1)}, folders / "Lora" / "ink.safetensors")
    write_emb_params(folders / "embeddings" / "glow.safetensors", vectors(1))
    assert set(library.files("lora")) == {"ink"} and set(library.files("embedding")) == {"glow"}
    (folders / "Lora" / "ink.safetensors").rename(folders / "ink.safetensors")
    (folders / "Lora").rmdir()
    assert set(library.files("lora")) == {"ink", "glow"}  # a flat folder: every .safetensors, as before
    assert set(library.files("embedding")) == {"glow"}  # embeddings only ever in their own folders
