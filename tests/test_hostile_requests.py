"""A public Space's hostile visitors, round 3 (issue 44): work priced and bounded before it is allocated, memory
that new shapes cannot grow, and who a visitor is behind the Space's proxy."""

import json
import time

import numpy as np
import pytest
import torch
from PIL import Image
from PIL.PngImagePlugin import PngInfo
from safetensors.torch import save_file

import seedlab
from seedlab import Recipe
from seedlab.engine import memory, tracing
from seedlab.engine.prompts import a1111 as a1111_prompts
from seedlab.engine.prompts import comfyui as comfyui_prompts
from seedlab.engine.recipe import FieldError, RecipeError
from seedlab.engine.validation import MAX_HIRES_SCHEDULE
from seedlab.engine.weights import library, lora
from seedlab.files.info import describe as info
from seedlab.serving.budget import LORA_SET_SECONDS, SCHEDULE_SECONDS, Speed, prompt_chunks
from tests.helpers import use_models_folder
from tests.tiny import tiny_pipeline
from webui.visitors import HOPS_VAR, client_address, proxy_hops, visitor_key

HIRES = dict(prompt="a red circle", width=64, height=64, num_inference_steps=50, hires_scale=1.0)


# --- hires fix's schedule: steps / denoising strength noise levels ---------------------------------------------

@pytest.mark.parametrize("strength", [1e-5, 1e-6, 1e-7, 0.0049])
@pytest.mark.parametrize("sampler", [{"scheduler": "euler", "schedule": "normal"}, {"scheduler": "Euler"}])
def test_a_tiny_hires_denoising_strength_is_refused_before_anything_is_allocated(strength, sampler):
    """1e-5 built 5 million sigmas (106 s of CPU, 2.2 GB); 1e-6 passed 15 GB. The recipe refuses it, named."""
    started = time.perf_counter()
    with pytest.raises(RecipeError) as error:
        Recipe(**HIRES, **sampler, denoising_strength=strength)
    assert time.perf_counter() - started < 0.1
    assert [e.field for e in error.value.errors] == ["denoising_strength"]
    assert "must be at least 0.005 with 50 hires steps" in str(error.value)
    assert f"at most {MAX_HIRES_SCHEDULE}" in str(error.value)


def test_the_smallest_strength_allowed_builds_at_most_the_bound_and_is_priced_for_it():
    recipe = Recipe(**HIRES, denoising_strength=0.005)
    assert recipe.hires_sigma_count == MAX_HIRES_SCHEDULE
    speed = Speed(1e-6, 0.0, 64 * 64)
    usual = Recipe(**HIRES, denoising_strength=0.7)
    assert speed.seconds(recipe) - speed.seconds(usual) >= (MAX_HIRES_SCHEDULE - usual.hires_sigma_count) * \
        SCHEDULE_SECONDS * 0.999


# --- work the budget underpriced ---------------------------------------------------------------------------------

def test_break_chunks_are_priced_by_the_context_they_add():
    """32 BREAK chunks made a step 2.5x as long at 64 px; they were charged as one chunk."""
    one = Recipe(prompt="a red circle", prompt_syntax="a1111")
    many = one.replace(prompt=" BREAK ".join(["a red circle"] * 32))
    assert prompt_chunks(one) == 1 and prompt_chunks(many) == 32
    assert prompt_chunks(many.replace(prompt_syntax="plain")) == 1  # diffusers truncates a plain prompt
    long_negative = one.replace(negative_prompt="blurry, " * 120)  # 240 tokens: 4 chunks, which the prompt pads to
    assert prompt_chunks(long_negative) == 4
    speed = Speed(1e-5, 0.0, 64 * 64)
    assert speed.seconds(many) >= 2.5 * speed.seconds(one)


def test_each_new_set_of_loras_is_priced_once_per_request():
    """A new LoRA weight set cost 0.4 to 0.8 s to merge and was charged 0.05 s."""
    speed = Speed(1e-5, 0.0, 64 * 64)
    plain = Recipe(prompt="a red circle")
    one_set = [plain.replace(loras="<lora:ink:0.5>", seed=seed) for seed in range(4)]
    two_sets = one_set + [plain.replace(loras="<lora:ink:0.7>")]
    images = sum(speed.seconds(recipe) for recipe in two_sets)
    assert speed.request_seconds([plain] * 5) == pytest.approx(5 * speed.seconds(plain))
    assert speed.request_seconds(one_set) == pytest.approx(sum(map(speed.seconds, one_set)) + LORA_SET_SECONDS)
    assert speed.request_seconds(two_sets) == pytest.approx(images + 2 * LORA_SET_SECONDS)


# --- memory that new shapes leave behind -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return seedlab.describe("tiny", tiny_pipeline(tmp_path_factory.mktemp("tok")), torch.device("cpu"))


def test_a_process_makes_at_most_its_traces_and_runs_later_shapes_eagerly_with_the_same_pixels(tiny_model,
                                                                                                   monkeypatch):
    """A trace is never freed (torch's compilation unit keeps it): dropping one from a list of 16 freed nothing,
    and 100 new sizes took a server from 1.1 to 2.8 GB. So the process traces its first MAX_TRACES signatures."""
    monkeypatch.setattr(tracing, "MAX_TRACES", 2)
    monkeypatch.setattr(tracing, "_made", 0)
    eager = tiny_model.__class__(**{**tiny_model.__dict__, "traced": False, "_lane_copies": [],
                                    "_traced_unet": None})
    traced = tiny_model.__class__(**{**tiny_model.__dict__, "_lane_copies": [], "_traced_unet": None})
    for side in (32, 40, 48, 56):
        recipe = Recipe(prompt="a red circle", seed=side, num_inference_steps=2, width=side, height=side,
                        model="tiny", scheduler="EulerDiscreteScheduler")
        assert np.array_equal(np.asarray(seedlab.generate(traced, recipe).image),
                              np.asarray(seedlab.generate(eager, recipe).image))
    assert tracing._made == 2  # the process's count of traces and len(traced._traced_unet._traces) == 2


def test_a_request_gives_its_freed_memory_back_to_the_system():
    assert memory.give_back() is True  # glibc (Linux): malloc_trim; elsewhere it says it cannot


# --- the low findings --------------------------------------------------------------------------------------------

def test_a_refusal_never_shows_where_the_models_folder_is(tmp_path, monkeypatch):
    folder = use_models_folder(tmp_path, monkeypatch, "Lora")
    with pytest.raises(library.NotFound) as error:
        library.find("lora", "gone")
    assert str(error.value) == "LoRA 'gone' is not found in the models folder"
    assert str(folder) not in str(error.value) and str(tmp_path) not in str(error.value)


def test_one_malformed_lora_does_not_fail_every_lookup_by_hash(tmp_path, monkeypatch):
    folder = use_models_folder(tmp_path, monkeypatch, "Lora")
    (folder / "Lora" / "a_broken.safetensors").write_bytes(b"\xff" * 16)  # a header longer than the file
    save_file({"x.lora_up.weight": torch.ones(2, 1), "x.lora_down.weight": torch.ones(1, 2)},
              folder / "Lora" / "z_good.safetensors")
    wanted = library.short_hash("lora", folder / "Lora" / "z_good.safetensors")
    found = library.find("lora", "renamed", wanted)  # by hash: every file of the folder is hashed
    assert found.path.name == "z_good.safetensors" and "a_broken" not in str(found)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_lora_with_nan_or_infinite_weights_is_refused_naming_it(tmp_path, bad):
    path = tmp_path / "nan.safetensors"
    up = torch.ones(4, 2)
    up[1, 1] = bad
    save_file({"lora_unet_x.lora_up.weight": up, "lora_unet_x.lora_down.weight": torch.ones(2, 4)}, path)
    with pytest.raises(ValueError, match=r"LoRA layer lora_unet_x holds NaN or infinite weights"):
        lora.read(path)


@pytest.mark.parametrize("prompt", ["a (circle:" + "9" * 40 + ")", "a (circle:" + "9" * 400 + ")",
                                    "(" * 60 + "a circle"])
def test_an_attention_weight_past_its_range_is_refused_naming_the_prompt(tiny_model, prompt):
    """A weight of 1e40 (A1111 reads no exponent: `(x:1e308)` is text there) or 1.1 ** 60 made an image of NaN
    with no message."""
    with pytest.raises(FieldError) as error:
        a1111_prompts.pieces(tiny_model.pipeline.tokenizer, prompt)
    assert error.value.field == "prompt" and "attention weights must be from -100 to 100" in str(error.value)
    assert a1111_prompts.pieces(tiny_model.pipeline.tokenizer, "a (circle:2.5)")  # an ordinary weight still reads


@pytest.mark.parametrize("prompt", ["a (circle:1e308)", "(" * 60 + "a circle" + ")" * 60])
def test_a_comfyui_weight_past_its_range_is_refused_naming_the_prompt(tiny_model, prompt):
    with pytest.raises(FieldError, match="a weight must be a number from -100 to 100"):
        comfyui_prompts.tokenize(tiny_model.pipeline.tokenizer, prompt)


def test_seedlab_info_shows_a_huge_number_by_its_size(tmp_path):
    """A Fooocus file saying 1e308 steps printed a 309-digit step count as if it were restored."""
    info_chunk = PngInfo()
    info_chunk.add_text("parameters", json.dumps({"prompt": "a cat", "steps": 1e308, "guidance_scale": 7,
                                                  "resolution": "(64, 64)", "version": "Fooocus v2.5"}))
    path = tmp_path / "fooocus.png"
    Image.new("RGB", (8, 8)).save(path, pnginfo=info_chunk)
    described = info(path)  # the recipe as read, with what cannot be used named in the notes
    assert described["recipe"]["num_inference_steps"] == "(a 309-digit number)"
    text = json.dumps(described)
    assert "0" * 40 not in text and "Steps (a 309-digit number) from the file cannot be used here" in text


def test_an_unknown_model_is_named_once():
    from seedlab.engine.models import ModelStore
    from seedlab.serving.admission import Admission
    from seedlab.serving.limits import Limits

    admission = Admission(ModelStore(["embedded"], device=torch.device("cpu")), Limits())
    with pytest.raises(RecipeError) as error:
        admission.recipe({"prompt": "a cat", "model": "someone/else"})
    assert str(error.value).count("model must be one of the models on this server") == 1


# --- who a visitor is behind a proxy ----------------------------------------------------------------------------

def test_behind_a_space_one_visitor_is_the_address_its_proxy_appended(monkeypatch):
    monkeypatch.delenv(HOPS_VAR, raising=False)
    monkeypatch.setenv("SPACE_ID", "someone/seedlab")
    # A client writes entries of its own; the Space's proxy appends the address it saw, last.
    assert client_address({"x-forwarded-for": "6.6.6.6, 7.7.7.7, 203.0.113.9"}, "10.0.0.1") == "203.0.113.9"
    assert client_address({}, "10.0.0.1") == "10.0.0.1"
    monkeypatch.setenv(HOPS_VAR, "2")  # a host with a second proxy of its own in front of the app
    assert client_address({"x-forwarded-for": "6.6.6.6, 203.0.113.9, 10.1.1.1"}, "10.0.0.1") == "203.0.113.9"
    assert client_address({"x-forwarded-for": "203.0.113.9"}, "10.0.0.1") == "10.0.0.1"  # fewer: nobody named
    monkeypatch.delenv("SPACE_ID")
    monkeypatch.delenv(HOPS_VAR)
    assert proxy_hops() == 0 and client_address({"x-forwarded-for": "6.6.6.6"}, "127.0.0.1") == "127.0.0.1"


def test_an_ipv6_visitor_is_its_slash_64_so_rotating_addresses_buys_nothing(monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/seedlab")
    monkeypatch.delenv(HOPS_VAR, raising=False)
    rotated = {client_address({"x-forwarded-for": f"2001:db8:1:2:{n:x}::{n:x}"}, "10.0.0.1") for n in range(50)}
    assert rotated == {"2001:db8:1:2::/64"}
    assert client_address({"x-forwarded-for": "2001:db8:1:3::1"}, "10.0.0.1") == "2001:db8:1:3::/64"
    assert visitor_key("::ffff:203.0.113.9") == "203.0.113.9" and visitor_key("[2001:db8::1]") == "2001:db8::/64"
    assert visitor_key("203.0.113.9") == "203.0.113.9"


@pytest.mark.parametrize("value", ["-1", "two", "99"])
def test_a_bad_proxy_hop_count_is_refused_naming_the_setting(monkeypatch, value):
    monkeypatch.setenv(HOPS_VAR, value)
    with pytest.raises(ValueError, match=f"{HOPS_VAR} must be a whole number from 0 to 8"):
        proxy_hops()


# --- through the real server ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def own_server(app_model, tmp_path_factory):
    """A server of this module's own: its memory is measured, so no other test's shapes may be in it."""
    from tests.conftest import AppServer

    server = AppServer(app_model, tmp_path_factory.mktemp("hostile"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_tiny_denoising_attack_is_refused_at_once_and_a_victims_grid_is_answered(own_server):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    client = Client(own_server.url, verbose=False)
    attack = client.submit(prompt="a red circle", seeds="1", num_inference_steps=50, width=64, height=64,
                           hires_scale=1.0, denoising_strength=1e-5, scheduler="euler", schedule="normal",
                           api_name="/grid")
    started = time.monotonic()
    _, results = client.predict(prompt="a blue square", seeds="2", num_inference_steps=2, api_name="/grid")
    assert [r["seed"] for r in results] == ["2"] and time.monotonic() - started < 15
    with pytest.raises(AppError, match=r"Denoising strength must be at least 0\.005 with 50 hires steps"):
        attack.result(timeout=30)


def test_thirty_new_shapes_leave_the_server_no_larger_than_its_traces(own_server):
    """Each new UNet input shape kept 14 to 17 MB for good (100 one-step grids: 1,103 to 2,766 MB, unchanged after
    idling). Now a process keeps at most tracing.MAX_TRACES traces and gives freed memory back after a request."""
    import psutil
    from gradio_client import Client

    client = Client(own_server.url, verbose=False)
    server = psutil.Process(own_server.process.pid)
    for seed in range(3):  # the server's usual shape: traced at once, as on any server
        client.predict(prompt="a red circle", seeds=str(seed), num_inference_steps=1, api_name="/grid")
    before = server.memory_info().rss
    sizes = [(64 + 8 * n, 64) for n in range(30)]  # 14 MB each, kept for good, before
    for n, (width, height) in enumerate(sizes):
        client.predict(prompt="a red circle", seeds=str(n), num_inference_steps=1, width=width, height=height,
                       api_name="/grid")
    grown = (server.memory_info().rss - before) / 2**20
    print(f"30 new shapes: the server grew {grown:.0f} MB")
    assert grown < 200, f"the server grew {grown:.0f} MB over 30 one-step grids of new shapes"
