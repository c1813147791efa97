"""A public Space's hostile visitors, round 4 (issue 52): the page's finish events read at most a grid of cells,
work a reproduction may cause later is priced before it starts (or not offered), and who a visitor is when a proxy
writes an IPv6 address with its port."""

import dataclasses
import time

import gradio as gr
import numpy as np
import pytest
import torch

import seedlab
from seedlab import Original, Recipe
from seedlab.engine.models import ModelStore
from seedlab.engine.previews import finished
from seedlab.serving import reproduction as reproduction_module
from seedlab.serving.admission import Admission
from seedlab.serving.budget import NATIVE_START_SECONDS, Speed
from seedlab.serving.conventions import renders
from seedlab.serving.limits import Limits
from tests.tiny import tiny_pipeline

SPEED = Speed(a=1e-6, b=0.0, measured=512 * 512)  # one second per megapixel-step: prices to compare, not to time


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return seedlab.describe("tiny", tiny_pipeline(tmp_path_factory.mktemp("tok")), torch.device("cpu"))


@pytest.fixture
def web(tiny, tmp_path):
    from webui.handlers import WebApp

    store = ModelStore(["tiny"], device=torch.device("cpu"))
    store.add(tiny)
    return WebApp(Admission(store, Limits(), SPEED), tmp_path)


def run(events) -> dict:
    """A generating handler's updates merged into the last state of each output."""
    merged: dict = {}
    for update in events:
        merged.update(update)
    return merged


def preview_grid(web, seeds: str = "1-2") -> list:
    values = {"prompt": "a red circle", "seeds": seeds, "num_inference_steps": 4, "width": 32, "height": 32}
    return run(web.previews.page_preview(values, None, None))["grid_results"]


def test_finish_all_refuses_more_cells_than_a_grid_before_reading_any(web):
    """1 preview and 10,000 finished records (17 MiB of JSON) took 69 s of CPU, charged as one image."""
    results = preview_grid(web)
    padded = results + [dict(results[1], fingerprint="0" * 64)] * 10_000
    started = time.perf_counter()
    with pytest.raises(gr.Error, match=r"at most 16 cells .* got 10002 cells"):
        run(web.previews.finish_all(padded, None, None))
    assert time.perf_counter() - started < 0.5
    with pytest.raises(gr.Error, match="at most 16 cells"):  # 300 copies of one preview: 300 renders before
        run(web.previews.finish_all([results[0]] * 300, None, None))
    with pytest.raises(gr.Error, match="at most 16 cells"):
        run(web.previews.finish_cell(results[0], [results[0]] * 17, None, None))
    with pytest.raises(gr.Error, match="must be a list"):
        run(web.previews.finish_all({"0": results[0]}, None, None))


def test_finish_all_renders_only_the_previews_and_keeps_the_rest_of_the_grid(web, tiny):
    results = preview_grid(web, "1-3")
    full = seedlab.generate(tiny, finished(Recipe.from_dict(results[1]["recipe"])))
    kept = run(web.previews.finish_cell(results[1], results, None, None))
    assert kept["grid_results"][1]["fingerprint"] == full.fingerprint
    assert [record["fingerprint"] for record in kept["grid_results"][::2]] == [r["fingerprint"] for r in results[::2]]
    charged = []
    web.admission.charge = lambda recipes, visitor, extra=0.0: charged.append(len(recipes))
    done = run(web.previews.finish_all(kept["grid_results"], None, None))
    assert charged == [2], "the two previews left are priced, the finished cell is not rendered again"
    assert not any(Recipe.from_dict(r["recipe"]).preview_steps for r in done["grid_results"])


def _old_original(result) -> Original:
    """An original made before SeedLab recorded a CPU baseline, whose pixels differ from what is made here."""
    environment = dataclasses.replace(result.environment, cpu_isa=None, cpu_vendor=None)
    return Original(result.recipe, "ab" * 32, environment)


def test_an_old_link_is_not_retried_in_a_new_process_on_a_server_by_default(web, tiny, monkeypatch):
    """One re-verification of an old link priced 0.22 s cost 30 s of CPU in a native-kernel worker process."""
    original = _old_original(seedlab.generate(tiny, Recipe(prompt="a", seed=2, num_inference_steps=2, width=32,
                                                           height=32, model="tiny")))
    if not reproduction_module.may_retry_natively(original, "cpu"):
        pytest.skip("this machine would never retry natively (not x86-64, or native kernels already)")
    monkeypatch.setattr(reproduction_module, "regenerate_natively",
                        lambda *args, **kwargs: pytest.fail("a process was started for a visitor"))
    assert web.admission.charge_reproduction(original, "visitor") == pytest.approx(SPEED.request_seconds(
        [original.recipe], web.admission.noise_per_pixel))
    verdict = run(web.reproduction.regenerate(original, None, None))["verdict"]
    assert not verdict["exact"] and any("does not retry with them" in note for note in verdict["notes"])


def test_a_server_that_offers_the_native_retry_prices_its_process_start_first(web, tiny):
    original = _old_original(seedlab.generate(tiny, Recipe(prompt="a", seed=2, num_inference_steps=2, width=32,
                                                           height=32, model="tiny")))
    if not reproduction_module.may_retry_natively(original, "cpu"):
        pytest.skip("this machine would never retry natively (not x86-64, or native kernels already)")
    admission = Admission(web.admission.store, Limits(visitor_seconds=40), SPEED, native_retry=True)
    one = SPEED.request_seconds([original.recipe], admission.noise_per_pixel)
    assert admission.charge_reproduction(original, "visitor") == pytest.approx(NATIVE_START_SECONDS + 2 * one)
    with pytest.raises(ValueError, match="you have used about 30 s"):  # a second one is over the visitor's share
        admission.charge_reproduction(original, "visitor")


def test_a_dropped_file_that_may_be_retried_under_another_convention_is_charged_both_renders():
    """A ComfyUI file whose ancestral noise may be of either ComfyUI: two renders were charged as one."""
    recipe = Recipe(prompt="a", seed=3, scheduler="euler_ancestral", comfyui_noise="seed+1")
    dropped = Original(recipe, "ab" * 32, None)
    assert [r.comfyui_noise for r in renders(dropped)] == ["seed+1", "seed"]
    assert renders(dataclasses.replace(dropped, environment=object())) == [recipe]  # SeedLab's own: recorded
    a1111 = Original(recipe.replace(scheduler="Euler a", rng="cuda-philox"), "ab" * 32, None,
                     notes=("RNG (no RNG field): A1111's default, GPU",))
    assert [r.rng for r in renders(a1111)] == ["cuda-philox", "cpu"]


def test_renders_match_what_retry_conventions_runs(tiny, monkeypatch):
    from seedlab.serving import conventions

    made = []
    monkeypatch.setattr("seedlab.engine.generation.generate",
                        lambda model, recipe: made.append(recipe) or seedlab.generate(model, recipe))
    recipe = Recipe(prompt="a", seed=3, scheduler="euler_ancestral", comfyui_noise="seed+1", num_inference_steps=2,
                    width=32, height=32, model="tiny")
    first = seedlab.generate(tiny, recipe)
    original = Original(recipe, "ab" * 32, None)
    conventions.retry_conventions(first, reproduction_module.compare(first, original), original, tiny)
    assert [recipe, *made] == renders(original)
    assert np.asarray(first.image).shape == (32, 32, 3)


def test_a_proxys_entry_with_a_port_is_the_visitor_without_it():
    """"[2001:db8::1]:443" became the raw visitor key, so every source port was a new visitor."""
    from webui.visitors import visitor_key

    ports = {visitor_key(f"[2001:db8:1:2::{n:x}]:{40000 + n}") for n in range(20)}
    assert ports == {"2001:db8:1:2::/64"}
    assert visitor_key("203.0.113.9:5123") == visitor_key("203.0.113.9") == "203.0.113.9"
    assert visitor_key("[::ffff:203.0.113.9]:80") == "203.0.113.9"
    assert visitor_key("2001:db8::1") == "2001:db8::/64"  # a bare IPv6 address keeps every colon


def test_a_large_json_comment_is_parsed_a_bounded_number_of_times(monkeypatch):
    """A 1.6 MB Draw Things JSON in a WebP's XMP took 4 to 5 s a drop: the same text was parsed five times."""
    import io
    import json
    from xml.sax.saxutils import escape

    from PIL import Image

    from seedlab.files import formats
    from seedlab.serving.reproduction import original_from_png

    data = {"c": "a cat", "scale": 7, "seed": 3, "steps": 20, "size": "64x64", "v2": {"loras": [[1, 2]] * 100_000}}
    xmp = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
           '<rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" xmlns:xmp="http://ns.adobe.com/xap/1.0/">'
           '<xmp:CreatorTool>Draw Things</xmp:CreatorTool><exif:UserComment><rdf:Alt><rdf:li xml:lang="x-default">'
           f'{escape(json.dumps(data), {chr(34): "&quot;"})}</rdf:li></rdf:Alt></exif:UserComment>'
           '</rdf:Description></rdf:RDF></x:xmpmeta>')
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "WEBP", xmp=xmp.encode())
    parsed, loads = [], formats.loads
    monkeypatch.setattr(formats, "loads", lambda text, *args, **kwargs: parsed.append(len(text)) or loads(
        text, *args, **kwargs))
    original = original_from_png(io.BytesIO(buffer.getvalue()))
    assert original.recipe.prompt == "a cat" and original.recipe.seed == 3
    assert len([size for size in parsed if size > 500_000]) <= 3, parsed
