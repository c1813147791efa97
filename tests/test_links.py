"""Links: recipe -> link -> recipe for any valid recipe, and every malformed link refused by key."""

from dataclasses import replace
from urllib.parse import urlencode

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seedlab import MAX_SEED, ModelStore, Recipe, decode_link, encode_link
from seedlab.engine.environment import Environment, Switches
from seedlab.files.links import DEFAULTS, decode_environment, encode_environment

FP = "0123456789abcdef" * 4
ENV = Environment(seedlab="0.1.0", diffusers="0.42.1", torch="2.13.0+cpu", device="cpu: x86_64", dtype="float32",
                  threads=2, cublas_workspace_config=":16:8",
                  switches=Switches(True, False, True, False, False, True))
BASE = "http://127.0.0.1:7860/"

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=200)
recipes = st.builds(
    Recipe,
    prompt=text | st.sampled_from(["a red circle\non a blue background", "🎲 ü, ß: \"quoted\" & 100% #1 + ?x=y"]),
    seed=st.integers(0, MAX_SEED),
    negative_prompt=text,
    model=st.sampled_from(["embedded", "stabilityai/sd-turbo", "/srv/models/my model", "C:\\models\\x"]),
    scheduler=st.sampled_from(["default", "EulerDiscreteScheduler", "DPMSolverMultistepScheduler"]),
    num_inference_steps=st.integers(1, 200),
    guidance_scale=st.floats(0, 50, allow_nan=False) | st.sampled_from([0.0, 7.5, 1e-300, 49.99999999999999]),
    width=st.integers(4, 512).map(lambda n: 8 * n),
    height=st.integers(4, 512).map(lambda n: 8 * n),
    # "+" in std-libstdc++ must survive a query string; numpy-mt19937 takes 32-bit seeds (its own test below)
    rng=st.sampled_from(["cpu", "device", "numpy-pcg64", "cuda-philox", "std-libstdc++", "std-libc++", "std-msvc"]),
    variation_seed=st.integers(0, MAX_SEED),
    variation_strength=st.floats(0, 1, allow_nan=False),
    seed_resize_from=st.none() | st.tuples(st.integers(4, 512).map(lambda n: 8 * n),
                                           st.integers(4, 512).map(lambda n: 8 * n)),
    deterministic=st.booleans(),
    dtype=st.sampled_from(["float32", "float16", "bfloat16"]),
)


def flat(environment: Environment) -> Environment:
    """What a link keeps of an environment: all but cublas_workspace_config (set at start-up, CUDA only)."""
    return replace(environment, cublas_workspace_config=None)


@settings(max_examples=300, deadline=None)
@given(recipes)
def test_a_link_restores_the_recipe_fingerprint_and_environment(recipe):
    link = encode_link(recipe, FP, ENV, BASE)
    assert link.startswith(BASE + "?v=1&prompt=")
    assert decode_link(link) == (recipe, FP, flat(ENV))
    assert decode_link(link.split("?", 1)[1]) == (recipe, FP, flat(ENV))  # the query string alone works too


def test_the_other_tools_noise_sources_survive_a_link():
    for rng in ("numpy-mt19937", "std-libstdc++", "std-libc++", "std-msvc"):
        recipe = Recipe(prompt="a fox", seed=2**32 - 1, rng=rng)
        link = encode_link(recipe, FP, ENV, BASE)
        assert decode_link(link)[0] == recipe and f"rng={rng.replace('+', '%2B')}" in link


def test_a_query_alone_may_hold_url_like_values():
    recipe = Recipe(prompt="see https://example.com/x", negative_prompt="://")
    query_only = encode_link(recipe, FP, ENV, BASE).split("?", 1)[1]
    assert "://" in query_only  # ":" and "/" are left readable, so the query alone looks URL-like
    assert decode_link(query_only) == (recipe, FP, flat(ENV))


def test_a_typical_link_is_short_readable_and_omits_defaults():
    recipe = Recipe(prompt="a red circle on a blue background", seed=3141592653,
                    scheduler="EulerAncestralDiscreteScheduler", num_inference_steps=25)
    link = encode_link(recipe, FP, ENV, BASE)
    assert len(link) < 500, link
    assert link == (
        f"{BASE}?v=1&prompt=a+red+circle+on+a+blue+background&seed=3141592653"
        f"&sampler=EulerAncestralDiscreteScheduler&steps=25&fp={FP}&env=0.1.0~0.42.1~2.13.0%2Bcpu~cpu:+x86_64~float32~2~101001"
    )
    assert encode_link(Recipe(prompt="x", **DEFAULTS), FP, None, BASE) == f"{BASE}?v=1&prompt=x&fp={FP}"


def test_the_v1_defaults_never_change():
    """An omitted key means the field's default: changing one would change every old link's image."""
    v1 = {"negative_prompt": "", "seed": 0, "num_inference_steps": 20, "guidance_scale": 7.5, "scheduler": "default",
          "width": 64, "height": 64, "model": "embedded", "rng": "cpu", "deterministic": False, "dtype": "float32"}
    assert {field: DEFAULTS[field] for field in v1} == v1
    assert {field: DEFAULTS[field] for field in ("variation_seed", "variation_strength", "seed_resize_from")} == {
        "variation_seed": 0, "variation_strength": 0.0, "seed_resize_from": None}


def test_the_environment_codec_keeps_every_part_but_the_cublas_setting():
    assert decode_environment(encode_environment(ENV)) == flat(ENV)
    odd = Environment(**{**ENV.__dict__, "device": "cuda: NVIDIA ~H100, 80GB"})
    assert decode_environment(encode_environment(odd)).device == "cuda: NVIDIA -H100, 80GB"  # ~ separates parts


def query(**changes) -> str:
    """A valid link's query with some keys changed (None removes one)."""
    params = {"v": "1", "prompt": "a red circle", "seed": "42", "steps": "20", "cfg": "7.5",
              "sampler": "EulerDiscreteScheduler", "w": "64", "h": "64", "model": "embedded", "rng": "cpu",
              "det": "0", "dtype": "float32", "fp": FP, "env": encode_environment(ENV)}
    params.update(changes)
    return urlencode({key: value for key, value in params.items() if value is not None})


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"seed": "-1"}, "seed"),
        ({"seed": str(MAX_SEED + 1)}, "seed"),
        ({"seed": "4.5"}, "seed"),
        ({"seed": "1e3"}, "seed"),
        ({"seed": "9" * 400}, "seed"),
        ({"steps": "0"}, "steps"),
        ({"steps": "201"}, "steps"),
        ({"steps": "twenty"}, "steps"),
        ({"cfg": "50.5"}, "cfg"),
        ({"cfg": "-1"}, "cfg"),
        ({"cfg": "nan"}, "cfg"),
        ({"cfg": "inf"}, "cfg"),
        ({"cfg": "1e999"}, "cfg"),
        ({"cfg": "7,5"}, "cfg"),
        ({"w": "30"}, "w"),
        ({"w": "65"}, "w"),
        ({"h": "8192"}, "h"),
        ({"h": "sixty"}, "h"),
        ({"rng": "gpu"}, "rng"),
        ({"det": "yes"}, "det"),
        ({"dtype": "int8"}, "dtype"),
        ({"sampler": ""}, "sampler"),
        ({"model": ""}, "model"),
        ({"model": "x" * 301}, "model"),
        ({"prompt": "a" * 2001}, "prompt"),
        ({"neg": "b" * 2001}, "neg"),
        ({"prompt": "nul\x00"}, "prompt"),
        ({"prompt": None}, "prompt"),
        ({"fp": None}, "fp"),
        ({"v": None}, "v"),
        ({"v": "2"}, "v=2"),
        ({"v": "one"}, "v=1"),
        ({"fp": FP[:63]}, "fp"),
        ({"fp": "g" * 64}, "fp"),
        ({"env": "0.1.0~0.42.1"}, "env"),
        ({"env": encode_environment(ENV).replace("~2~", "~0~")}, "env threads"),
        ({"env": encode_environment(ENV).replace("101001", "2")}, "env switches"),
        ({"env": encode_environment(ENV).replace("float32", "double")}, "env dtype"),
        ({"env": encode_environment(ENV).replace("0.42.1", "0.42 1")}, "env diffusers"),
        ({"foo": "1"}, "foo"),
        ({"Seed": "1"}, "Seed"),
    ],
)
def test_a_malformed_link_is_an_error_naming_the_key(changes, named):
    with pytest.raises(ValueError, match=named) as error:
        decode_link(query(**changes))
    assert str(error.value).startswith("link:")


@pytest.mark.parametrize("key", ["v", "prompt", "neg", "seed", "steps", "cfg", "sampler", "w", "h", "model", "rng",
                                 "det", "dtype", "fp", "env"])
def test_a_repeated_key_is_an_error_naming_it(key):
    valid = query(neg="x")
    value = dict(part.split("=", 1) for part in valid.split("&"))[key]
    with pytest.raises(ValueError, match=f"link: {key} appears more than once"):
        decode_link(f"{valid}&{key}={value}")  # even with the same value: a link has one of each


@pytest.mark.parametrize("text", ["", "http://127.0.0.1:7860/", "not a link", "?", "v=1&prompt"])
def test_text_without_a_query_is_an_error(text):
    with pytest.raises(ValueError, match="link"):
        decode_link(text)


def test_bad_utf8_and_huge_links_are_refused():
    with pytest.raises(ValueError, match="prompt is not valid UTF-8"):
        decode_link(query().replace("prompt=a+red", "prompt=%FF%FE"))
    with pytest.raises(ValueError, match="at most 40000 characters"):
        decode_link(query(prompt="%" * 20_000))


@pytest.mark.parametrize("model", ["../x", "/etc", "C:\\x", "~/models/x", "someone/unknown-model", "embedded/../../x"])
def test_a_link_can_only_name_a_model_this_server_allows(model):
    store = ModelStore(["embedded", "/srv/models/allowed"], device=torch.device("cpu"))  # nothing is loaded
    recipe, _, _ = decode_link(query(model=model))
    assert recipe.model == model  # decoding returns the name as written ...
    with pytest.raises(ValueError,
                       match=r"model must be one of the models on this server \(embedded, /srv/models/allowed\)"):
        store.check(recipe.model)  # ... and the server refuses anything it was not started with
    assert store.check(decode_link(query(model="/srv/models/allowed"))[0].model) == "/srv/models/allowed"


def test_a_link_without_environment_decodes_with_none():
    recipe, print_, environment = decode_link(query(env=None, fp=FP.upper()))
    assert (recipe.seed, print_, environment) == (42, FP, None)


def test_a_bad_link_names_every_bad_key_at_once():
    """Issue 33: every bad key of a link is named in one message (not a missing key, then the types, then ranges)."""
    fingerprint = "ab" * 32
    with pytest.raises(ValueError) as refused:
        decode_link(f"v=1&seed=x&steps=abc&cfg=-5&w=7&bogus=1&other=2&fp={fingerprint[:10]}&env=nonsense")
    message = str(refused.value)
    for said in ("prompt is missing", "unknown keys 'bogus', 'other'", "seed must be", "steps (num_inference_steps) "
                 "must be a whole number from 1 to 200, got 'abc'", "cfg (guidance_scale) must be a number from 0 "
                 "to 50, got -5.0", "w (width) must be", "fp must be 64 hex digits", "env must have"):
        assert said in message, (said, message)
    assert message.startswith("link: ") and message.count("link: ") == 1
    # A range is checked on the values that read, each said once; a value that does not read is not also out of range.
    only = str(pytest.raises(ValueError, decode_link, f"v=1&prompt=a&steps=9999&cfg=zz&fp={fingerprint}").value)
    assert only.count("steps (num_inference_steps)") == 1 and only.count("cfg (guidance_scale)") == 1, only
    # A format this server does not read is refused on that alone: its other keys may mean something else.
    assert str(pytest.raises(ValueError, decode_link, "v=9&nonsense=1").value) == (
        "link: v=9 is a link format this server does not read; it reads v=1")
    recipe, fp, environment = decode_link(f"v=1&prompt=a&seed=3&fp={fingerprint}")
    assert (recipe.prompt, recipe.seed, fp, environment) == ("a", 3, fingerprint, None)


def test_a_hand_written_link_without_a_fingerprint_is_a_recipe():
    """Issue 54: `?prompt=a+blue+square&seed=7` (no v, no fp) was "v is missing; fp is missing": it is a recipe with
    nothing to compare; decode_link still needs v, prompt and fp, and a recipe link still names every bad key."""
    from seedlab.files.links import decode_recipe_link, is_recipe_link

    assert is_recipe_link("/?prompt=a+blue+square&seed=7") and is_recipe_link("v=1&prompt=a&cfg=3")
    assert not is_recipe_link(f"v=1&prompt=a&fp={FP}") and not is_recipe_link("http://host/")
    recipe = decode_recipe_link("/?prompt=a+blue+square&seed=7")
    assert (recipe.prompt, recipe.seed) == ("a blue square", 7)
    with pytest.raises(ValueError) as refused:
        decode_recipe_link("prompt=a&seed=x&cfg=-5&bogus=1")
    message = str(refused.value)
    for said in ("unknown key 'bogus'", "seed must be", "cfg (guidance_scale) must be a number from 0 to 50"):
        assert said in message, (said, message)
    assert "fp" not in message.split("known keys")[0] and "v is missing" not in message
    no_prompt = str(pytest.raises(ValueError, decode_recipe_link, "seed=7").value)
    assert "prompt is missing; a link needs prompt" in no_prompt
    assert "v is missing" in str(pytest.raises(ValueError, decode_link, "prompt=a&seed=7").value)
