"""The page's own handlers (webui.handlers), called in this process: they are private, so not reachable through
the API. Dice, selection, Stop and a closed tab, how cells arrive, the events Stop cancels, ZeroGPU."""

import json
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace

import gradio as gr
import pytest

import webui.handlers
import webui.streaming
from seedlab import Recipe, encode_link, generate, parse_seeds, save_png
from tests.helpers import PROMPT, grid, page_request


def test_dice_draws_the_requested_number_of_seeds(seedlab_app):
    assert len(parse_seeds(seedlab_app.dice(4, "0-7")["seeds"])) == 4
    assert len(parse_seeds(seedlab_app.dice(None, "1, 2, 3")["seeds"])) == 3  # no count: as many as now
    assert seedlab_app.dice(4, "0-7") != seedlab_app.dice(4, "0-7")
    with pytest.raises(gr.Error, match="Random seeds to draw must be a whole number from 1 to 64, got 0"):
        seedlab_app.dice(0, "0-7")


def test_select_makes_the_cell_the_anchor_and_shows_it(seedlab_app):
    results = [{"seed": str(s), "prompt": "p", "recipe": {"prompt": "p", "seed": str(s)},
                "fingerprint": f"{s:064x}"[-64:]} for s in (5, 6, 18446744073709551615)]
    results[2]["link"] = "http://x/?v=1"
    update = seedlab_app.select(results, SimpleNamespace(index=2))
    assert {key: update[key] for key in ("anchor_text", "anchor_seed", "anchor", "anchor_recipe", "anchor_fingerprint",
                                         "grid_link")} == {
        "anchor_text": "Anchor seed: 18446744073709551615 · prompt: p", "anchor_seed": "18446744073709551615",
        "anchor": update["cell"]["recipe"], "anchor_recipe": update["cell"]["recipe"],
        "anchor_fingerprint": f"{2**64 - 1:064x}", "grid_link": "http://x/?v=1"}
    assert update["cell"]["recipe"]["seed"] == "18446744073709551615" and update["cell"]["prompt"] == "p"
    assert update["cell_link"] == "http://x/?v=1"
    assert update["cell_image"] is None  # this server never made it: no PNG to show or download
    assert "Seed: 18446744073709551615" in update["cell_params"]
    variation = seedlab_app.select_variation(results, SimpleNamespace(index=1))
    assert variation["variation_link"] == "" and variation["cell"]["seed"] == "6" and "anchor" not in variation


def images(updates):
    """The (gallery, results) updates of a grid, without the per-step no-change updates."""
    return [(update["grid"], update["grid_results"]) for update in updates if "grid" in update]


def next_images(updates):
    update = next(update for update in updates if "grid" in update)
    return update["grid"], update["grid_results"]


def test_stop_cancels_this_sessions_generation(seedlab_app, monkeypatch, capsys):
    monkeypatch.setattr(webui.streaming, "IMAGES_INTERVAL_S", 0.0)  # every cell its own update, to stop between them
    request = SimpleNamespace(session_hash="session-a")
    other = SimpleNamespace(session_hash="session-b")
    steps = grid(seedlab_app, request, seeds="0-3", num_inference_steps=2)
    assert next(steps) == {"grid": [], "grid_results": []}  # cleared at once
    gallery, _ = next_images(steps)
    assert len(gallery) == 1
    seedlab_app.stop(other)  # another session's Stop leaves this one running
    gallery, _ = next_images(steps)
    assert len(gallery) == 2
    seedlab_app.stop(request)
    assert images(steps) == []
    assert "Stopped after 2 of 4 images." in capsys.readouterr().out  # told, as information: no warning
    gallery, _ = images(grid(seedlab_app, request, seeds="0-1", num_inference_steps=1))[-1]
    assert len(gallery) == 2  # a new run is not stopped by the old Stop


def test_cells_that_finish_together_arrive_in_one_update_and_the_last_at_once(seedlab_app, monkeypatch):
    def sizes():
        updates = [update for update in grid(seedlab_app, SimpleNamespace(session_hash="s"), seeds="0-3",
                                              num_inference_steps=1) if update.get("grid")]
        assert [record["seed"] for record in updates[-1]["grid_results"]] == ["0", "1", "2", "3"]
        return [len(update["grid"]) for update in updates]

    monkeypatch.setattr(webui.streaming, "IMAGES_INTERVAL_S", 3600.0)  # a cell waits for those beside it to the end
    monkeypatch.setattr(seedlab_app.default, "lanes", 2)
    assert sizes() == [4]  # side by side: every cell waits for the next, and the last goes at once
    monkeypatch.setattr(seedlab_app.default, "lanes", 1)
    assert sizes() == [1, 2, 3, 4]  # one at a time: nothing finishes beside a cell, so none waits


def test_previews_wait_for_each_other_by_their_own_interval_even_one_at_a_time(seedlab_app, monkeypatch):
    """Previews come many a second, and each update costs more than one of them: they are sent in batches."""
    def sizes():
        values = {"prompt": "a red circle", "seeds": "0-3", "num_inference_steps": 4, "preview_steps": 2}
        updates = [update for update in seedlab_app.previews.page_preview(values, SimpleNamespace(session_hash="s"))
                   if isinstance(update.get("grid"), list) and update["grid"]]  # not the clearing gr.Gallery
        assert all(record["recipe"]["preview_steps"] == 2 for record in updates[-1]["grid_results"])
        return [len(update["grid"]) for update in updates]

    monkeypatch.setattr(seedlab_app.default, "lanes", 1)
    monkeypatch.setattr(webui.streaming, "IMAGES_INTERVAL_S", 0.0)  # a full grid's rule does not apply to them
    monkeypatch.setattr(webui.streaming, "PREVIEW_IMAGES_INTERVAL_S", 3600.0)
    assert sizes() == [4]
    monkeypatch.setattr(webui.streaming, "PREVIEW_IMAGES_INTERVAL_S", 0.0)
    assert sizes() == [1, 2, 3, 4]


def test_every_step_hands_control_back_so_a_closed_tab_stops_the_work(seedlab_app):
    unet_calls = []
    hook = seedlab_app.default.pipeline.unet.register_forward_hook(lambda *args: unet_calls.append(1))
    try:
        updates = grid(seedlab_app, SimpleNamespace(session_hash="tab"), seeds="0-3", num_inference_steps=50)
        next(updates), next(updates), next(updates)  # cleared, then two progress ticks (at most 4 a second)
        at_close = len(unet_calls)
        updates.close()  # what Gradio does when the tab closes or the API call is cancelled
    finally:
        hook.remove()
    assert len(unet_calls) <= at_close + 2, f"{len(unet_calls) - at_close} steps ran after the close"
    assert len(unet_calls) < 100, f"{len(unet_calls)} of 200 steps ran"  # closed well before the end, even on a busy
    # machine (two progress ticks, 2 s apart, can take 50 steps there)


@contextmanager
def counting_unet_calls(model):
    calls = []
    hook = model.pipeline.unet.register_forward_hook(lambda *args: calls.append(1))
    try:
        yield calls
    finally:
        hook.remove()


def regenerations(seedlab_app, request):
    """The three ways one image is regenerated, each 50 steps long: /reproduce, a link, a dropped PNG."""
    recipe = Recipe(prompt=PROMPT, seed=21, num_inference_steps=50, model=seedlab_app.store.default)
    link = encode_link(recipe, "0" * 64, None, "http://127.0.0.1/")
    link_original = seedlab_app.reproduction.open_link(page_request(link.split("?", 1)[1]))["pending"]
    quick = generate(seedlab_app.default, recipe.replace(num_inference_steps=1))
    png = save_png(replace(quick, recipe=recipe), seedlab_app.pngs.folder / "dropped-50-steps.png")
    png_original = seedlab_app.reproduction.open_png(str(png))["pending"]
    noop = lambda *args, **kwargs: None
    return {
        "reproduce": seedlab_app.reproduction.reproduce(json.dumps(recipe.to_json()), request, noop),
        "link": seedlab_app.reproduction.reproduce_pending(link_original, request, noop),
        "png": seedlab_app.reproduction.reproduce_pending(png_original, request, noop),
    }


@pytest.mark.parametrize("path", ["reproduce", "link", "png"])
def test_stop_cancels_a_regeneration(seedlab_app, path, capsys):
    request = SimpleNamespace(session_hash=f"stop-{path}", headers={})
    with counting_unet_calls(seedlab_app.default) as calls:
        updates = regenerations(seedlab_app, request)[path]
        next(updates), next(updates)  # two steps done
        seedlab_app.stop(request)
        rest = list(updates)
    assert "Stopped: the image was not regenerated." in capsys.readouterr().out  # information, not a warning
    assert len(calls) <= 5, f"{len(calls)} of 50 steps ran after Stop"
    assert (rest[-1]["reproduced"], rest[-1]["verdict"]) == (None, None)  # no image, no verdict


@pytest.mark.parametrize("path", ["reproduce", "link", "png"])
def test_a_closed_tab_stops_a_regeneration(seedlab_app, path):
    with counting_unet_calls(seedlab_app.default) as calls:
        updates = regenerations(seedlab_app, SimpleNamespace(session_hash=f"tab-{path}", headers={}))[path]
        next(updates), next(updates)  # two steps done
        updates.close()  # what Gradio does when the tab closes or the API call is cancelled
    assert len(calls) <= 5, f"{len(calls)} of 50 steps ran after the tab closed"


def test_stop_is_wired_to_cancel_every_generating_event(seedlab_app):
    from app import build_app

    demo, _ = build_app(seedlab_app.admission, seedlab_app.pngs.folder)
    named = {fn._id: getattr(fn.fn, "__name__", None) for fn in demo.fns.values()}
    (stop,) = [fn for fn in demo.fns.values() if named[fn._id] == "stop"]
    # Gradio wires `cancels=` as a second listener on the same trigger.
    (canceller,) = [fn for fn in demo.fns.values() if fn.is_cancel_function and fn.targets == stop.targets]
    generating = {index for index, name in named.items()
                  if name in ("grid", "page_grid", "vary", "vary_anchor", "matrix", "matrix_page", "plot", "travel",
                              "nudge", "reproduce", "reverify", "reproduce_pending", "reproduce_dropped",
                              "reproduce_linked", "regenerate", "page_preview", "preview", "finish", "finish_cell",
                              "finish_all")}
    # the page's grid, /grid, /vary, the vary button, /matrix, the page's matrix, /plot and the page's plot,
    # /travel and the page's travel, the nudges, /reproduce, /reverify, a link's and a PNG's regeneration, a
    # history entry's regeneration, a dropped image's regeneration (at once, and by its button), the page's
    # Preview, /preview, /finish, Finish and Finish all
    assert len(generating) == 22
    assert set(canceller.cancels) == generating


def test_generation_runs_inside_spaces_gpu_when_spaces_is_importable(monkeypatch):
    from webui import gpu

    fake_spaces = SimpleNamespace(GPU=lambda duration: lambda fn: ("on ZeroGPU", fn, duration))
    monkeypatch.setattr(gpu, "spaces", fake_spaces)
    assert gpu.on_gpu(generate) == ("on ZeroGPU", generate, 120)
    monkeypatch.setattr(gpu, "spaces", None)
    assert gpu.on_gpu(generate) is generate


def test_a_nudged_anchor_and_selected_image_name_their_variation_seed_and_strength():
    from webui.cells import anchor_updates

    recipe = Recipe(prompt="p", seed=4, variation_seed=77, variation_strength=0.15)
    record = {"seed": "4", "prompt": "p", "fingerprint": "0" * 64, "link": "", "recipe": recipe.to_json()}
    assert anchor_updates(record)["anchor_text"] == "Anchor seed: 4 · variation seed 77 at strength 0.15 · prompt: p"
    plain = {**record, "recipe": Recipe(prompt="p", seed=4).to_json()}
    assert anchor_updates(plain)["anchor_text"] == "Anchor seed: 4 · prompt: p"


def test_the_vary_note_says_before_the_run_that_the_anchors_prompt_varies(seedlab_app):
    anchor = Recipe(prompt="a red circle", seed=3, num_inference_steps=1).to_json()
    note = seedlab_app.anchor_prompt_note("a blue square", anchor)["vary_note"]
    assert note.visible and note.value.startswith("Variations start from the anchor's prompt 'a red circle'")
    assert not seedlab_app.anchor_prompt_note("a red circle", anchor)["vary_note"].visible
    assert not seedlab_app.anchor_prompt_note("a blue square", None)["vary_note"].visible


def test_the_dropped_image_button_says_to_drop_it_again_when_the_server_lost_it(seedlab_app):
    """The button is on only after a drop; a restart since then empties the session's state: said, not silent."""
    with pytest.raises(gr.Error, match="Drop the image again: the server was restarted"):
        list(seedlab_app.reproduction.reproduce_dropped(None, None))
    assert list(seedlab_app.reproduction.reproduce_pending(None, None)) == [{}]  # a drop with nothing to make at once
