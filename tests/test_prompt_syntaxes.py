"""ComfyUI's and NovelAI's prompt syntaxes: tensor for tensor against their own steps, and where the field flows.

ComfyUI's: seedlab/engine/prompts/comfyui.py against tests/reference/comfyui_prompt.py (ComfyUI's
tokenize_with_weights -> encode_token_weights re-created from its sources), on the tiny pipeline's CLIP (14-token
batches, one layer) and the embedded model's (30-token batches, two layers: CLIPSetLastLayer -2 reads its first).
NovelAI's: A1111's pipeline with NovelAI's brackets, against tests/reference/a1111_prompt.py given the same weights.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from seedlab.cli import build_parser
from seedlab.engine.models import EMBEDDED_MODEL_DIR
from seedlab.engine.prompts import a1111 as prompts
from seedlab.engine.prompts import comfyui as prompts_comfyui
from seedlab.engine.prompts import novelai as prompts_novelai
from seedlab.engine.recipe import PROMPT_SYNTAXES, Recipe, RecipeError
from seedlab.engine.spec import FieldError
from seedlab.engine.validation import sampling_errors
from seedlab.files.comfyui.reader import read_comfyui, read_comfyui_workflow
from seedlab.files.infotext import parameters_text, read_infotext
from seedlab.files.links import decode_link, encode_link
from tests.helpers import use_models_folder
from tests.reference.a1111_prompt import a1111_conditioning
from tests.reference.comfyui_prompt import comfyui_conditioning
from tests.tiny import tiny_pipeline

WIDTH = 16  # the tiny pipeline's text encoder
TEXTS = [
    "a red circle on a blue background",  # plain text: no weights, so no empty prompt encoded
    "",
    "a (red:1.2) circle, (blue) square",
    "a ((red) circle (square:0.5) (blue:1.3)) x",  # nesting multiplies; (x:1.2) inside replaces the weight
    "a \\(literal\\) circle and an unclosed (red",  # escapes; an unclosed group is text
    "stray ) then (red) and (blue:0.5)",  # a ")" with none open: the rest is text
    "x (y:abc) (z:1e-1) (w::1.5)",  # not a number: text, x1.1
    "a red circle, " * 6 + "blue red (a blue square:1.1), (red)" * 3,  # long pieces cut, short ones moved whole
]


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def embeddings(tmp_path, monkeypatch):
    """A models folder's embeddings: square.bin (1 vector), styles/InkStyle.pt (3), glow.safetensors (2, half),
    long.safetensors (9: a piece of 8 or more is cut at a batch's end)."""
    folder = use_models_folder(tmp_path, monkeypatch, "embeddings/styles") / "embeddings"

    def vectors(count, seed):
        return torch.randn(count, WIDTH, generator=torch.Generator().manual_seed(seed)) * 0.5

    torch.save({"<c>": vectors(1, 1)[0]}, folder / "square.bin")
    torch.save({"string_to_param": {"*": vectors(3, 2)}, "name": "InkStyle"}, folder / "styles" / "InkStyle.pt")
    save_file({"emb_params": vectors(2, 3).half()}, folder / "glow.safetensors")
    save_file({"emb_params": vectors(9, 4)}, folder / "long.safetensors")
    return folder


def mine(pipe, text, clip_skip=1, find=None):
    with torch.no_grad():
        return prompts_comfyui.encode(pipe.tokenizer, pipe.text_encoder, text, clip_skip=clip_skip,
                                      find=find or (lambda name: None))


@pytest.mark.parametrize("text", TEXTS)
def test_comfyuis_weighting_is_comfyuis_bit_for_bit(pipe, tmp_path, text):
    theirs = comfyui_conditioning(pipe.tokenizer, pipe.text_encoder, text, embedding_directory=str(tmp_path))
    ours = mine(pipe, text)
    assert ours.shape == theirs.shape and torch.equal(ours, theirs)


def test_what_the_weighting_cases_cover(pipe):
    assert prompts_comfyui.weighted_pieces("a ((b:1.5) c) d") == [("a ", 1.0), ("b", 1.5), (" c", 1.1), (" d", 1.0)]
    assert prompts_comfyui.weighted_pieces("((x))")[0][1] == pytest.approx(1.21)
    assert prompts_comfyui.weighted_pieces("\\(x\\) (y:2)") == [("(x) ", 1.0), ("y", 2.0)]
    batches = prompts_comfyui.tokenize(pipe.tokenizer, TEXTS[-1])
    assert len(batches) >= 3 and all(len(batch) == pipe.tokenizer.model_max_length for batch in batches)
    end = pipe.tokenizer.eos_token_id
    moved = [batch for batch in batches[:-1] if batch[-2][0] == end]  # closed early: end token, then padding
    assert moved, "a short piece should move whole to the next batch"
    assert not torch.equal(mine(pipe, "a (red:1.2) circle"), mine(pipe, "a red circle"))


def test_a_plain_prompt_is_what_diffusers_encodes(pipe):
    with torch.no_grad():
        plain = pipe.encode_prompt("a red circle, a blue square", "cpu", 1, False)[0]
    assert torch.equal(mine(pipe, "a red circle, a blue square"), plain)  # one batch, no weights: as diffusers


@pytest.mark.parametrize("text", [
    "a embedding:square circle",
    "embedding:glow, a (red embedding:InkStyle:1.3) square",  # a comma after the name; a weighted embedding
    "a embedding:styles/InkStyle.pt circle embedding:InkStyle.pt",  # a path under the folder, the extension
    "(embedding:glow,) red embedding:glow[x]",  # commas stripped; the name ends at "["
    "a embedding:nothing b",  # not found: left out
    "embedding:long " * 5 + "red circle",  # 9 vectors: cut at the batches' ends
])
def test_embedding_names_are_found_and_placed_as_comfyui_does(pipe, embeddings, text):
    find = prompts_comfyui.EmbeddingFinder(WIDTH)
    theirs = comfyui_conditioning(pipe.tokenizer, pipe.text_encoder, text, embedding_directory=str(embeddings))
    ours = mine(pipe, text, find=find)
    assert ours.shape == theirs.shape and torch.equal(ours, theirs)
    if "nothing" in text:
        assert torch.equal(ours, mine(pipe, "a b"))  # the name not found is left out
    else:
        assert not torch.equal(ours, mine(pipe, text))  # the vectors are used


def test_what_embedding_names_comfyui_accepts(embeddings):
    names = prompts_comfyui.embedding_names()
    assert set(names) == {"square", "square.bin", "InkStyle", "InkStyle.pt", "styles/InkStyle", "styles/InkStyle.pt",
                          "glow", "glow.safetensors", "long", "long.safetensors"}
    with pytest.raises(FieldError, match="negative_prompt gives the weight 'nan'"):
        prompts_comfyui.weighted_pieces("(x:nan)", "negative_prompt")


@pytest.fixture(scope="module")
def embedded():
    from transformers import CLIPTextModel, CLIPTokenizer

    if not (EMBEDDED_MODEL_DIR / "model_index.json").exists():
        pytest.skip("no embedded model")
    tokenizer = CLIPTokenizer.from_pretrained(EMBEDDED_MODEL_DIR, subfolder="tokenizer")
    return tokenizer, CLIPTextModel.from_pretrained(EMBEDDED_MODEL_DIR, subfolder="text_encoder").eval()


@pytest.mark.parametrize("layer", [None, -2, -3])  # -3: beyond the two layers, ComfyUI reads the last
def test_clip_set_last_layer_is_the_recipes_clip_skip(embedded, tmp_path, layer):
    tokenizer, encoder = embedded
    text = TEXTS[-1]  # weights and several batches
    theirs = comfyui_conditioning(tokenizer, encoder, text, stop_at_clip_layer=layer, embedding_directory=str(tmp_path))
    ours = mine(type("Pipe", (), {"tokenizer": tokenizer, "text_encoder": encoder}), text, clip_skip=-(layer or -1))
    assert torch.equal(ours, theirs)
    if layer == -2:
        assert not torch.equal(ours, mine(type("Pipe", (), {"tokenizer": tokenizer, "text_encoder": encoder}), text))


@pytest.mark.parametrize("layer", [None, -3])
def test_sd2_reads_comfyuis_penultimate_layer_on_diffusers_shorter_encoder(embedded, tmp_path, layer):
    """ComfyUI loads OpenCLIP whole (3 layers here) and pads with 0; diffusers' SD 2.x encoder leaves the last out."""
    from transformers import CLIPTextModel, CLIPTokenizer

    tokenizer = CLIPTokenizer.from_pretrained(EMBEDDED_MODEL_DIR, subfolder="tokenizer", pad_token="!")
    config = copy.deepcopy(embedded[1].config)
    config.num_hidden_layers = 3
    torch.manual_seed(0)
    whole = CLIPTextModel(config).eval()
    config = copy.deepcopy(config)
    config.num_hidden_layers = 2
    diffusers_like = CLIPTextModel(config).eval()
    diffusers_like.load_state_dict({k: v for k, v in whole.state_dict().items() if ".layers.2." not in k})
    text = TEXTS[2] + ", a very long prompt " * 3
    theirs = comfyui_conditioning(tokenizer, whole, text, stop_at_clip_layer=layer, sd2=True,
                                  embedding_directory=str(tmp_path))
    ours = mine(type("Pipe", (), {"tokenizer": tokenizer, "text_encoder": diffusers_like}), text,
                clip_skip=-(layer or -1))
    assert theirs.shape[1] == 64 and torch.equal(ours, theirs)
    with pytest.raises(FieldError, match="OpenCLIP's last layer"):
        prompts_comfyui.hidden_state(tokenizer, diffusers_like, 4)


NAI = [
    ("a {red} circle, [[blue]] {{{square}}}", [["a ", 1.0], ["red", 1.05], [" circle, ", 1.0],
                                               ["blue", 1 / 1.05 / 1.05], [" ", 1.0], ["square", 1.05 ** 3]]),
    ("(round) {brackets [nest} unclosed", [["(round) ", 1.0], ["brackets ", 1.05], ["nest", 1.0],
                                           [" unclosed", 1 / 1.05]]),
    ("stray } and ] BREAK (x:1.5)", [["stray } and ] BREAK (x:1.5)", 1.0]]),
]


@pytest.mark.parametrize("text, parsed", NAI)
def test_novelais_brackets(text, parsed):
    assert [[piece, pytest.approx(weight)] for piece, weight in prompts_novelai.parse(text)] == parsed


def test_novelais_syntax_is_a1111s_pipeline_with_its_weights(embedded):
    tokenizer, encoder = embedded
    text = NAI[0][0] + ", on a {background} " * 8
    a1111 = "".join(f"({piece}:{weight!r})" if weight != 1.0 else piece
                    for piece, weight in prompts_novelai.parse(text))  # the same pieces and weights, A1111's way
    for clip_skip in (1, 2):
        with torch.no_grad():
            ours = prompts.encode(tokenizer, encoder, text, clip_skip=clip_skip, syntax="novelai")
            theirs = a1111_conditioning(tokenizer, encoder, a1111, clip_skip=clip_skip)
        assert ours.shape[1] > 32 and torch.equal(ours, theirs)


CLIP_GRAPH = {
    "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 20, "cfg": 8, "sampler_name": "euler",
                                               "scheduler": "normal", "denoise": 1, "model": ["10", 0],
                                               "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}},
    "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "anything.safetensors"}},
    "10": {"class_type": "LoraLoader", "inputs": {"model": ["4", 0], "clip": ["11", 0], "lora_name": "a.safetensors",
                                                  "strength_model": 1, "strength_clip": 1}},
    "11": {"class_type": "CLIPSetLastLayer", "inputs": {"clip": ["4", 1], "stop_at_clip_layer": -2}},
    "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a (red:1.2) fox", "clip": ["10", 1]}},
    "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["4", 1]}},
    "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
    "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "x", "images": ["8", 0]}},
}


def test_a_comfyui_graph_reads_with_comfyuis_syntax_and_clip_set_last_layer():
    _, fields, notes = read_comfyui(json.dumps(CLIP_GRAPH))
    assert (fields["prompt_syntax"], fields["clip_skip"]) == ("comfyui", 2)  # on the positive's clip, past the LoRA
    assert not any("CLIPSetLastLayer" in note for note in notes)
    assert Recipe(**{**fields, "model": "embedded"}).clip_skip == 2
    graph = json.loads(json.dumps(CLIP_GRAPH))
    graph["11"]["inputs"]["stop_at_clip_layer"] = -1
    assert "clip_skip" not in read_comfyui(json.dumps(graph))[1]
    graph["11"]["inputs"]["stop_at_clip_layer"] = -20
    _, fields, notes = read_comfyui(json.dumps(graph))
    assert "clip_skip" not in fields and any("CLIPSetLastLayer -20 is not restored" in note for note in notes)
    workflow = {"nodes": [
        {"id": 3, "type": "KSampler", "widgets_values": [1, "fixed", 20, 8, "euler", "normal", 1],
         "inputs": [{"name": "positive", "link": 1}, {"name": "latent_image", "link": 3}]},
        {"id": 6, "type": "CLIPTextEncode", "widgets_values": ["a fox"], "inputs": [{"name": "clip", "link": 2}]},
        {"id": 11, "type": "CLIPSetLastLayer", "widgets_values": [-3], "inputs": [{"name": "clip", "link": 4}]},
        {"id": 4, "type": "CheckpointLoaderSimple", "widgets_values": ["m.safetensors"]},
        {"id": 5, "type": "EmptyLatentImage", "widgets_values": [512, 512, 1]}],
        "links": [[1, 6, 0, 3, 1, "CONDITIONING"], [2, 11, 0, 6, 0, "CLIP"], [3, 5, 0, 3, 3, "LATENT"],
                  [4, 4, 1, 11, 0, "CLIP"]]}
    _, fields, _ = read_comfyui_workflow(json.dumps(workflow))
    assert (fields["prompt_syntax"], fields["clip_skip"], fields["prompt"]) == ("comfyui", 3, "a fox")


def test_the_field_lists_and_refuses_by_name_everywhere():
    assert PROMPT_SYNTAXES == ("plain", "a1111", "comfyui", "novelai")
    with pytest.raises(RecipeError, match="prompt_syntax must be one of plain, a1111, comfyui, novelai, got 'comfy'"):
        Recipe(prompt="x", prompt_syntax="comfy")
    with pytest.raises(ValueError, match=r"link: syntax \(prompt_syntax\) must be one of plain, a1111, comfyui"):
        decode_link("v=1&prompt=x&syntax=nai&fp=" + "0" * 64)
    grid = build_parser()._subparsers._group_actions[0].choices["grid"]
    option = next(action for action in grid._actions if "--prompt-syntax" in action.option_strings)
    assert "one of plain, a1111, comfyui, novelai" in option.help
    for syntax in ("comfyui", "novelai"):
        recipe = Recipe(prompt="a (red:1.2) {fox}", prompt_syntax=syntax, clip_skip=2)
        assert decode_link(encode_link(recipe, "0" * 64, None, "http://x/"))[0] == recipe
        fields, _, _ = read_infotext(parameters_text(recipe))
        assert (fields["prompt_syntax"], fields["clip_skip"]) == (syntax, 2)
    # ComfyUI's savers write A1111's text of a prompt that went through CLIPTextEncode
    assert read_infotext("x\nSteps: 20, Size: 64x64, Version: ComfyUI")[0]["prompt_syntax"] == "comfyui"
    assert [str(error) for error in sampling_errors(Recipe(prompt="x", prompt_syntax="comfyui", emphasis="None",
                                                           clip_skip=2))] == [
        "emphasis needs prompt_syntax a1111 or novelai (A1111's weighting); with comfyui it stays Original"]


@pytest.mark.parametrize("syntax", ["comfyui", "novelai"])
def test_families_that_encode_their_own_way_refuse_the_syntax_by_name(syntax):
    t5 = type("PixArtSigmaPipeline", (), {"tokenizer": object(), "text_encoder": type("T5EncoderModel", (), {})()})
    with pytest.raises(FieldError, match=f"prompt_syntax {syntax} needs one CLIP text encoder .* use plain"):
        prompts.check_encoder(t5(), syntax)


def test_images_with_comfyuis_syntax(embedded):
    """An unweighted one-batch prompt is what plain makes; prompts of different lengths run on every kind of sampler
    (diffusers' pipelines get both repeated to a common length, as ComfyUI batches them)."""
    import seedlab

    model = seedlab.load_model("embedded", torch.device("cpu"))
    base = Recipe(prompt="a red circle", num_inference_steps=2, guidance_scale=3.0, scheduler="EulerDiscreteScheduler")
    assert seedlab.generate(model, base.replace(prompt_syntax="comfyui")).fingerprint == \
        seedlab.generate(model, base).fingerprint
    long = base.replace(prompt_syntax="comfyui", prompt="a (red:1.3) circle, " * 12, negative_prompt="blue")
    results = [seedlab.generate(model, long.replace(scheduler=name)) for name in ("EulerDiscreteScheduler", "euler")]
    assert all(np.asarray(result.image).std() > 0 for result in results)
    assert results[0].fingerprint != seedlab.generate(model, long.replace(prompt_syntax="plain")).fingerprint
