"""A1111's prompt syntax: parsing, chunks, BREAK, emphasis and clip skip against A1111 1.10's own steps.

tests/reference/a1111_prompt.py re-creates A1111's prompt_parser / sd_hijack_clip / sd_emphasis (written
independently from A1111's sources); seedlab/engine/prompts.py must give the same tensors bit for bit,
on the embedded model's real CLIP tokenizer and text encoder (30-token chunks: its encoder has 32 positions).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import seedlab
from seedlab.engine.models import EMBEDDED_MODEL_DIR
from seedlab.engine.prompts import a1111 as prompts
from seedlab.engine.recipe import Recipe
from tests.reference.a1111_prompt import a1111_conditioning, parse_prompt_attention

pytestmark = pytest.mark.skipif(not (EMBEDDED_MODEL_DIR / "model_index.json").exists(), reason="no embedded model")

PROMPTS = [
    "a red circle on a blue background",
    "",
    "a (red:1.5) circle, [blue] background",
    "a ((red)) circle (on a [blue:0.7] background:1.2)",
    "a \\(literal\\) circle and an unclosed (red",
    "a red circle BREAK on a blue background BREAK",
    "a red, circle, on, a, blue, background, with, many, small, words, and, commas, " * 4,
    "masterpiece, best quality, a very detailed painting of a lighthouse on a cliff over a stormy sea at night "
    "with (lightning:1.3) and rain, [blurry], dramatic clouds, waves crashing against the rocks below",
    "odd brackets :0.5) and ]] [[ too",
]


@pytest.fixture(scope="module")
def encoder():
    from transformers import CLIPTextModel, CLIPTokenizer

    tokenizer = CLIPTokenizer.from_pretrained(EMBEDDED_MODEL_DIR, subfolder="tokenizer")
    return tokenizer, CLIPTextModel.from_pretrained(EMBEDDED_MODEL_DIR, subfolder="text_encoder").eval()


@pytest.mark.parametrize("text", PROMPTS + ["\\\\x", "(((((((((deep)))))))))", "a [b (c [d] e) f] g"])
def test_the_parser_reads_as_a1111s(text):
    assert prompts.parse_attention(text) == parse_prompt_attention(text)


def test_a_weight_that_is_not_a_number_stays_text_where_a1111_fails():
    with pytest.raises(ValueError):
        parse_prompt_attention("(x:1.2.3) y")
    assert prompts.parse_attention("(x:1.2.3) y") == [["x", 1.1], [":1.2.3", 1.0], [" y", 1.0]] or \
        "".join(part for part, _ in prompts.parse_attention("(x:1.2.3) y")).endswith(" y")


def test_a1111s_docstring_examples():
    assert prompts.parse_attention("normal text") == [["normal text", 1.0]]
    assert prompts.parse_attention("an (important) word") == [["an ", 1.0], ["important", 1.1], [" word", 1.0]]
    assert prompts.parse_attention("(unbalanced") == [["unbalanced", 1.1]]
    assert prompts.parse_attention("\\(literal\\]") == [["(literal]", 1.0]]
    assert prompts.parse_attention("(unnecessary)(parens)") == [["unnecessaryparens", 1.1]]
    assert prompts.parse_attention("a (((house:1.3)) [on] a (hill:0.5), sun, (((sky))).") == [
        ["a ", 1.0], ["house", 1.5730000000000004], [" ", 1.1], ["on", 1.0], [" a ", 1.1], ["hill", 0.55],
        [", sun, ", 1.1], ["sky", 1.4641000000000006], [".", 1.1]]


@pytest.mark.parametrize("text", PROMPTS)
@pytest.mark.parametrize("emphasis, clip_skip", [("Original", 1), ("No norm", 1), ("None", 1), ("Original", 2)])
def test_the_conditioning_is_a1111s_bit_for_bit(encoder, text, emphasis, clip_skip):
    tokenizer, text_encoder = encoder
    with torch.no_grad():
        mine = prompts.encode(tokenizer, text_encoder, text, emphasis=emphasis, clip_skip=clip_skip)
        theirs = a1111_conditioning(tokenizer, text_encoder, text, emphasis=emphasis, clip_skip=clip_skip)
    assert mine.shape == theirs.shape
    assert torch.equal(mine, theirs)


def test_chunks_break_after_a_comma_and_at_break(encoder):
    tokenizer, _ = encoder
    assert len(prompts.chunks_of(tokenizer, PROMPTS[0])) == 1
    assert len(prompts.chunks_of(tokenizer, PROMPTS[5])) == 2  # a trailing BREAK adds nothing
    long = prompts.chunks_of(tokenizer, PROMPTS[6])
    assert len(long) >= 3 and all(len(chunk.tokens) == tokenizer.model_max_length for chunk in long)
    comma = tokenizer.convert_tokens_to_ids(",</w>")
    first = long[0].tokens[1:-1]
    assert comma in first and first[first.index(tokenizer.eos_token_id) - 1 if tokenizer.eos_token_id in first
                                     else -1] == comma  # the first chunk ends at a comma, then padding


def test_a_plain_short_prompt_is_what_diffusers_encodes(encoder):
    pipe = seedlab.load_model("embedded", torch.device("cpu")).pipeline
    with torch.no_grad():
        plain = pipe.encode_prompt(PROMPTS[0], "cpu", 1, False)[0]
        mine = prompts.encode(pipe.tokenizer, pipe.text_encoder, PROMPTS[0])
    assert torch.equal(plain, mine)  # so A1111's syntax changes nothing for a prompt that uses none of it


def test_plain_recipes_refuse_a1111s_prompt_settings():
    model = seedlab.load_model("embedded", torch.device("cpu"))
    for fields in ({"clip_skip": 2}, {"emphasis": "No norm"}):
        with pytest.raises(ValueError, match="needs prompt_syntax a1111"):
            seedlab.generate(model, Recipe(prompt="a", num_inference_steps=1, **fields))


def test_different_chunk_counts_run_with_a1111_samplers_and_diffusers_schedulers():
    """A1111's samplers run prompt and negative apart (as A1111 does); diffusers' get the shorter padded."""
    model = seedlab.load_model("embedded", torch.device("cpu"))
    base = Recipe(prompt=PROMPTS[7], negative_prompt="blurry", prompt_syntax="a1111", num_inference_steps=2,
                  guidance_scale=2.5)
    images = [np.asarray(seedlab.generate(model, base.replace(scheduler=name)).image)
              for name in ("Euler", "EulerDiscreteScheduler")]
    assert images[0].shape == images[1].shape == (64, 64, 3)
    assert all(image.std() > 0 for image in images)
