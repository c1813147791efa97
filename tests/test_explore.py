"""The exploration handlers, in this process: the anchor is the recipe the user clicked."""

from types import SimpleNamespace

import gradio as gr
import pytest

from tests.test_app import PROMPT, grid, last, reference_model, seedlab_app  # noqa: F401
from webui.fields import FIELDS
from webui.handlers import NO_ANCHOR


def noop(*args, **kwargs):
    return None


def anchor_from_grid(app, **values) -> dict:
    """Generate a one-cell grid and click its cell: the anchor recipe the page keeps."""
    results = last(grid(app, seeds="2", num_inference_steps=1, **values))["grid_results"]
    return app.select(results, SimpleNamespace(index=0))["anchor"]


def controls(app, anchor: dict, **changes) -> dict:
    """The controls as the page sends them with the vary button: the anchor's values, with `changes`."""
    values = {name: anchor[name] for name in FIELDS}
    return {"prompt": anchor["prompt"], "variations": ", at night", **values, **changes}


def vary(app, anchor: dict | None, values: dict) -> list[dict]:
    return list(app.vary_anchor({**values, "anchor": anchor}, None, noop))


def test_variations_start_from_the_anchors_recipe_not_the_edited_controls(seedlab_app):  # noqa: F811
    anchor = anchor_from_grid(seedlab_app)
    updates = vary(seedlab_app, anchor, controls(seedlab_app, anchor, prompt="a yellow triangle",
                                                  num_inference_steps=3))
    records = last(updates)["vary_results"]
    assert [record["prompt"] for record in records] == [PROMPT, f"{PROMPT}, at night"]
    assert all(record["recipe"]["num_inference_steps"] == 1 and record["seed"] == "2" for record in records)
    assert records[0]["recipe"] == anchor  # the base cell is the anchor itself
    note = updates[0]["vary_note"]
    assert note.visible and note.value == (
        f"Variations start from the anchor's recipe (prompt '{PROMPT}', seed 2); the prompt box now says "
        "'a yellow triangle'; Steps is now '3' (the anchor's: '1').")
    # The previous variation's link and selection go with the first update, before any new image.
    assert updates[0]["variation_link"] == "" and updates[0]["vary"].selected_index is None


def test_no_edit_no_note_and_no_anchor_a_message(seedlab_app):  # noqa: F811
    anchor = anchor_from_grid(seedlab_app)
    first = vary(seedlab_app, anchor, controls(seedlab_app, anchor))[0]
    assert first["vary_note"].value == "" and not first["vary_note"].visible
    default = vary(seedlab_app, anchor, controls(seedlab_app, anchor, scheduler="default"))[0]  # as the page sends it
    assert default["vary_note"].value == ""
    bad = vary(seedlab_app, anchor, controls(seedlab_app, anchor, width=13))[0]["vary_note"].value
    assert bad.endswith("the settings now hold values that cannot be used.")
    with pytest.raises(gr.Error, match="Pick an anchor first"):
        vary(seedlab_app, None, controls(seedlab_app, anchor))


def test_a_new_grid_clears_the_anchor_and_the_selection(seedlab_app):  # noqa: F811
    cleared = seedlab_app.clear_anchor()
    assert cleared["anchor"] is None and cleared["anchor_text"] == NO_ANCHOR
    assert cleared["grid_link"] == cleared["anchor_fingerprint"] == cleared["anchor_seed"] == ""
    assert cleared["grid"].selected_index is None
