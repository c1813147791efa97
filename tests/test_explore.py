"""The exploration handlers, in this process: the anchor is the recipe the user clicked."""

from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest

from tests.helpers import PROMPT, STEPS, grid, last, pixels, solo
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


def test_variations_start_from_the_anchors_recipe_not_the_edited_controls(seedlab_app):
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


def test_no_edit_no_note_and_no_anchor_a_message(seedlab_app):
    anchor = anchor_from_grid(seedlab_app)
    first = vary(seedlab_app, anchor, controls(seedlab_app, anchor))[0]
    assert first["vary_note"].value == "" and not first["vary_note"].visible
    default = vary(seedlab_app, anchor, controls(seedlab_app, anchor, scheduler="default"))[0]  # as the page sends it
    assert default["vary_note"].value == ""
    bad = vary(seedlab_app, anchor, controls(seedlab_app, anchor, width=13))[0]["vary_note"].value
    assert bad.endswith("the settings now hold values that cannot be used.")
    with pytest.raises(gr.Error, match="Pick an anchor first"):
        vary(seedlab_app, None, controls(seedlab_app, anchor))


def test_a_new_grid_clears_the_anchor_and_the_selection(seedlab_app):
    cleared = seedlab_app.clear_anchor()
    assert cleared["anchor"] is None and cleared["anchor_text"] == NO_ANCHOR
    assert cleared["grid_link"] == cleared["anchor_fingerprint"] == cleared["anchor_seed"] == ""
    assert cleared["grid"].selected_index is None


# The public /matrix endpoint, through the real app.


def test_matrix_rows_are_seeds_columns_are_variations_and_every_cell_is_solo(client, reference_model):
    from seedlab import join_prompt

    variations = [", at night", "in snow"]
    gallery, results = client.predict(prompt=PROMPT, seeds="3, 7", variations="\n".join(variations),
                                      num_inference_steps=STEPS, api_name="/matrix")
    columns = ["base prompt", ", at night", "in snow"]
    assert [cell["caption"] for cell in gallery] == [f"seed {s} · {c}" for s in (3, 7) for c in columns]
    prompts = [PROMPT, *(join_prompt(PROMPT, variation) for variation in variations)]
    assert [(record["seed"], record["prompt"]) for record in results] == [(s, p) for s in ("3", "7") for p in prompts]
    for cell, record in zip(gallery, results):
        expected = solo(reference_model, prompt=record["prompt"], seed=int(record["seed"]))
        assert np.array_equal(pixels(cell["image"]), np.asarray(expected.image))
        assert record["fingerprint"] == expected.fingerprint and record["recipe"] == expected.recipe.to_json()
        assert record["link"].startswith("http")
    assert len({record["fingerprint"] for record in results}) == 6


def test_matrix_limits_apply_to_the_cell_count(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=r"matrix: this server makes at most \d+ images per request, got .*= 27"):
        client.predict(prompt=PROMPT, seeds="0-8", variations="a\nb", num_inference_steps=1, api_name="/matrix")
    with pytest.raises(AppError, match="variations: write at least one"):
        client.predict(prompt=PROMPT, seeds="1", variations="", num_inference_steps=1, api_name="/matrix")


def test_nudges_are_the_anchor_with_fresh_variation_seeds_each_exact_and_linkable(seedlab_app, reference_model):
    from seedlab import Recipe, generate, original_from_link

    anchor = anchor_from_grid(seedlab_app)
    results = last(seedlab_app.nudge(anchor, 3, 0.25, None, noop))["nudges_results"]
    recipes = [Recipe.from_dict(record["recipe"]) for record in results]
    base = Recipe.from_dict(anchor)
    assert [r.replace(variation_seed=0, variation_strength=0.0) for r in recipes] == [base] * 3
    assert len({r.variation_seed for r in recipes}) == 3 and {r.variation_strength for r in recipes} == {0.25}
    for record, recipe in zip(results, recipes):
        assert generate(seedlab_app.default, recipe).fingerprint == record["fingerprint"]  # cell == solo
        assert original_from_link(record["link"].split("?", 1)[1]).recipe == recipe  # the link names it
    assert len({record["fingerprint"] for record in results}) == 3  # each nudge moved something


@pytest.mark.parametrize("count, strength, message", [
    (0, 0.2, "Nudges must be a whole number from 1 to 16, got '0'"),
    (2.5, 0.2, "Nudges must be a whole number from 1 to 16, got '2.5'"),
    (2, 1.5, "Variation strength"),
])
def test_bad_nudges_are_refused_naming_the_field(seedlab_app, count, strength, message):
    anchor = anchor_from_grid(seedlab_app)
    with pytest.raises(gr.Error, match=message):
        list(seedlab_app.nudge(anchor, count, strength, None, noop))
    with pytest.raises(gr.Error, match="Pick an anchor first"):
        list(seedlab_app.nudge(None, 2, 0.2, None, noop))


def test_bad_plot_axes_are_named_all_at_once_with_the_close_matches():
    """Issue 54: `cfg: 1, 2` on two axes named only the first, with ~50 field names; each bad axis is named now, an
    unknown name with the axes nearest it (A1111's labels), and A1111's labels still read."""
    from seedlab.explore.axes import axis_name, parse_axes

    with pytest.raises(ValueError) as caught:
        parse_axes([("cfg: 1, 2", "X axis"), ("cfg: 1, 2", "Y axis"), ("Steps: 0", "Z axis")])
    message = str(caught.value)
    assert message.startswith("X axis: 'cfg' is not an axis; did you mean CFG Scale (guidance_scale)")
    assert "; Y axis: 'cfg' is not an axis; did you mean CFG Scale" in message
    assert "; Z axis: Steps value '0'" in message
    assert "eta_ddim" not in message and "prompt_sr" not in message  # no list of every field
    assert parse_axes([("seed: 1-2", "X axis"), (None, "Y axis"), ("", "Z axis")])[1:] == [None, None]
    assert [axis_name(name) for name in ("CFG Scale", "Sampler", "Var. strength", "Steps")] == [
        "guidance_scale", "scheduler", "variation_strength", "num_inference_steps"]
    with pytest.raises(ValueError, match=r"'stepz' is not an axis; did you mean Steps \(num_inference_steps\)"):
        axis_name("stepz")
    with pytest.raises(ValueError, match="use one of A1111's labels .*CFG Scale"):
        axis_name("colour")
