"""Property-based fuzzing of everything a stranger can send: links, recipe JSON, API arguments.

The property: every input gives either a valid result or a clear ValueError / gr.Error naming what
is wrong, and never any other exception (which would reach the user as a traceback).
"""

import json
import string
from types import SimpleNamespace

import gradio as gr
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedlab import ModelStore, Recipe, decode_link, load_model, original_from_text, parse_seeds
from seedlab.files.links import KEYS

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(),
                                                                               max_size=2),
)
QUERY_KEYS = st.sampled_from(["v", "fp", "env", *KEYS, "x", "", "__theme"])
QUERY_VALUES = st.one_of(
    st.text(max_size=30), st.integers(-5, 2**33).map(str), st.sampled_from(["1", "0", "cpu", "float32", "nan",
                                                                           "1e309", "%ff", "%", "a" * 64, "0" * 64]),
)


def only_clear_errors(call):
    try:
        return call()
    except (ValueError, gr.Error) as error:
        assert str(error).strip(), "an error without a message"
        return None


@FUZZ
@given(st.text(max_size=300))
def test_decode_link_on_any_text(text):
    decoded = only_clear_errors(lambda: decode_link(text))
    if decoded is not None:
        assert isinstance(decoded[0], Recipe)


@FUZZ
@given(st.lists(st.tuples(QUERY_KEYS, QUERY_VALUES), max_size=12))
def test_decode_link_on_queries_made_of_link_keys(pairs):
    from urllib.parse import urlencode

    decoded = only_clear_errors(lambda: decode_link("http://127.0.0.1:7860/?" + urlencode(pairs)))
    if decoded is not None:
        recipe, fingerprint, _ = decoded
        assert isinstance(recipe, Recipe) and len(fingerprint) == 64


@FUZZ
@given(st.dictionaries(st.sampled_from([*Recipe.__dataclass_fields__, "extra"]), ANY_VALUE, max_size=8))
def test_recipe_from_any_json_object(data):
    only_clear_errors(lambda: Recipe.from_dict(data))
    only_clear_errors(lambda: original_from_text(json.dumps(data, default=str)))


@FUZZ
@given(st.text(alphabet=string.printable + "٣-–,", max_size=40))
def test_parse_seeds_on_any_text(text):
    seeds = only_clear_errors(lambda: parse_seeds(text))
    assert seeds is None or all(0 <= s <= 2**64 - 1 for s in seeds)


@pytest.fixture(scope="module")
def seedlab_app(tiny_model_dir, tmp_path_factory):
    from seedlab.serving.admission import Admission
    from webui.handlers import WebApp

    model = load_model(str(tiny_model_dir), torch.device("cpu"))
    store = ModelStore([model.name], device=torch.device("cpu"))
    store.add(model)
    return WebApp(Admission(store), tmp_path_factory.mktemp("png"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prompt=st.one_of(st.none(), st.text(max_size=20)),
    seeds=st.one_of(st.none(), st.text(max_size=10), st.sampled_from(["1", "0-1", "4294967295", "-1", "1e3"])),
    steps=st.one_of(ANY_VALUE, st.integers(1, 2)),
    guidance=ANY_VALUE,
    scheduler=st.one_of(st.none(), st.sampled_from(["default", "DDIMScheduler", "Nope", ""])),
    size=st.one_of(ANY_VALUE, st.sampled_from([64, 64.0, 65, 32])),
    rng=st.one_of(ANY_VALUE, st.sampled_from(["cpu", "device"])),
    deterministic=st.one_of(ANY_VALUE, st.booleans()),
    dtype=st.one_of(ANY_VALUE, st.just("float32")),
    model=st.one_of(st.none(), st.text(max_size=10), st.sampled_from(["../x", "/etc", "C:\\x", "embedded"])),
)
def test_grid_handler_on_any_arguments(seedlab_app, prompt, seeds, steps, guidance, scheduler, size, rng,
                                       deterministic, dtype, model):
    def run():
        values = dict(prompt=prompt, seeds=seeds, num_inference_steps=steps, guidance_scale=guidance,
                      scheduler=scheduler, width=size, height=size, rng=rng, deterministic=deterministic, dtype=dtype,
                      model=model)
        updates = seedlab_app.grid(values, SimpleNamespace(session_hash="fuzz"), lambda *a, **k: None)
        return [(u["grid"], u["grid_results"]) for u in updates if "grid" in u][-1]

    outcome = only_clear_errors(run)
    if outcome is not None:
        gallery, results = outcome
        assert len(gallery) == len(results) == len(parse_seeds(seeds, random_allowed=True))  # -1: a random seed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=200), st.builds(json.dumps, st.dictionaries(st.text(max_size=8), ANY_VALUE,
                                                                              max_size=4))))
def test_reproduce_handler_on_any_text(seedlab_app, text):
    outcome = only_clear_errors(lambda: list(seedlab_app.reproduction.reproduce(text, None, None))[-1])
    if outcome is not None:
        path, verdict = outcome["reproduced"], outcome["verdict"]
        assert path.endswith(".png") and "exact" in verdict
