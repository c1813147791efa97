"""The selected image: any cell of any gallery, or a regenerated image, enlarged with its actions.

A cell is its result record (seed, prompt, fingerprint, link, recipe), as /grid returns it. From
here it can be downloaded as the PNG this server made (with its metadata), its link copied, its
A1111 parameters read, its recipe made the anchor, or its seed put back into the seeds box.
"""

from __future__ import annotations

import html

import gradio as gr

from seedlab import Recipe
from seedlab.files.infotext import parameters_text
from seedlab.files.links import check_fingerprint
from webui.files import ResultRecord
from webui.i18n import words

# The components a chosen anchor and a selected cell update, named once (every event that sets them uses these).
ANCHOR = ("anchor_text", "anchor_seed", "anchor", "anchor_recipe", "anchor_fingerprint", "grid_link")
CELL = ("cell", "cell_panel", "cell_image", "cell_title", "cell_link", "cell_params", "cell_recipe", "cell_download",
        "make_anchor", "reuse_seed", "finish_cell")
NO_CELL = "Click an image of the grid or the variations to see it here, large, with its actions."


def cell_panel(ui: dict) -> None:
    """The "Selected image" panel's components, added to `ui` by name."""
    with gr.Accordion(words("Selected image"), open=False, elem_id="cell-panel") as ui["cell_panel"]:
        with gr.Row():
            ui["cell_image"] = gr.Image(show_label=False, type="filepath", format="png", interactive=False,
                                        height=256, elem_id="cell-image", elem_classes="pixelated")
            with gr.Column():
                ui["cell_title"] = gr.Textbox(value=NO_CELL, show_label=False, interactive=False, lines=2,
                                              elem_id="cell-title")
                ui["cell_link"] = gr.Textbox(label=words("Link to this image"), buttons=["copy"], interactive=False,
                                             elem_id="cell-link")
                with gr.Row():
                    ui["cell_download"] = gr.DownloadButton(words("Download PNG"), interactive=False,
                                                            elem_id="cell-download")
                    ui["make_anchor"] = gr.Button(words("Make anchor"), interactive=False, elem_id="make-anchor")
                    ui["reuse_seed"] = gr.Button(words("Reuse seed"), interactive=False, elem_id="reuse-seed")
                    ui["finish_cell"] = gr.Button(words("Finish"), interactive=False, elem_id="finish")  # a preview's
        with gr.Row():
            ui["cell_params"] = gr.Textbox(label=words("Parameters (AUTOMATIC1111 format)"), buttons=["copy"],
                                           interactive=False, lines=3, elem_id="cell-params")
            ui["cell_recipe"] = gr.JSON(label=words("Recipe"), elem_id="cell-recipe")
    # The selected cell's result record, kept in the page like the anchor (webui/page.py): checked where it is used.
    ui["cell"] = gr.JSON(None, visible=False, elem_id="cell-state")


def nudge_panel(ui: dict, strength: float) -> None:
    """The "Nudge the anchor" accordion: variation seeds at a strength around the anchor's recipe."""
    with gr.Accordion(words("Nudge the anchor (variation seeds)"), open=False, elem_id="strip-panel"):
        gr.Markdown(words("Keeps the anchor's recipe and blends in fresh random variation seeds: at a low strength "
                          "the composition stays and details move. Click a cell, then *Make anchor* to go on from it."))
        with gr.Row():
            ui["nudge_count"] = gr.Number(label=words("Nudges"), value=4, precision=0, elem_id="strip-count")
            ui["nudge_strength"] = gr.Number(label=words("Variation strength (0 to 1)"), value=strength, step=0.05,
                                             elem_id="strip-strength")
            ui["make_nudges"] = gr.Button(words("Nudge"), elem_id="make-strip")
        ui["nudges"] = gr.Gallery(label=words("Nudges"), columns=4, object_fit="contain", format="png", type="filepath",
                                 interactive=False, allow_preview=False, height="auto", elem_id="strip",
                                 elem_classes=["pixelated", "cells"])
        with gr.Accordion(words("Nudge results (JSON)"), open=False):
            ui["nudges_results"] = gr.JSON(label="Nudge results")


MAX_LINK = 16_000  # characters of a link a page may send back with a cell
MAX_AXES = 2_000  # characters of a plot cell's axis values




def checked_record(raw) -> dict:
    """A result record sent back by the page (a gallery's results, the selected cell), checked like any input.

    The page's JSON is the visitor's to change: the recipe must be valid, the fingerprint 64 hex
    digits and the link a web address; the seed and prompt shown are the recipe's own, and a plot cell's axis
    values ("Scheduler Euler a") plain text of at most MAX_AXES characters. ValueError if not.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"a result must be a JSON object, got {type(raw).__name__}")
    recipe = Recipe.from_dict(raw.get("recipe"))
    print_ = check_fingerprint("fingerprint", raw.get("fingerprint"))
    link = raw.get("link") or ""
    if not isinstance(link, str) or len(link) > MAX_LINK or (link and not link.startswith(("http://", "https://"))):
        raise ValueError("link must be an http(s) address of at most 16000 characters")
    axes = raw.get("axes") or ""
    if not isinstance(axes, str) or len(axes) > MAX_AXES:
        raise ValueError(f"axes must be text of at most {MAX_AXES} characters")
    return {"seed": str(recipe.seed), "prompt": recipe.prompt, "fingerprint": print_, "link": link,
            "recipe": recipe.to_json(), **({"axes": " ".join(axes.split())} if axes.strip() else {})}


def no_cell() -> dict:
    """The panel with nothing selected (a new grid's cells are not the previous grid's); left open or closed."""
    return {"cell": None, "cell_panel": gr.Accordion(), "cell_image": None, "cell_title": NO_CELL, "cell_link": "",
            "cell_params": "", "cell_recipe": None, "cell_download": gr.DownloadButton(value=None, interactive=False),
            "make_anchor": gr.Button(interactive=False), "reuse_seed": gr.Button(interactive=False),
            "finish_cell": gr.Button(interactive=False)}


def show_cell(record: dict, record_store: ResultRecord) -> dict:
    """The panel's values for one result record (its PNG from this server's record, if still kept)."""
    recipe = Recipe.from_dict(record["recipe"])
    found = record_store.find(recipe)
    print_ = record["fingerprint"]
    path = found[1].path if found is not None and found[0].fingerprint == print_ else None
    axes = f" · {record['axes']}" if record.get("axes") else ""  # a plot cell's axis values
    return {
        "cell": record, "cell_panel": gr.Accordion(open=True), "cell_image": path,
        "cell_title": f"Seed {record['seed']}{axes}{nudge_text(recipe)}{preview_text(recipe)} · prompt "
                      f"{record['prompt']!r} · "
                      f"fingerprint {print_[:16]}…"
                      + ("" if path else " (this server no longer keeps its PNG: the link regenerates it)"),
        "cell_link": record.get("link", ""), "cell_params": parameters_text(recipe, print_ or None),
        "cell_recipe": record["recipe"],
        "cell_download": gr.DownloadButton(value=path, interactive=path is not None),
        "make_anchor": gr.Button(interactive=True), "reuse_seed": gr.Button(interactive=True),
        "finish_cell": gr.Button(interactive=bool(recipe.preview_steps)),
    }


def picked(results: list | None, index: int, what: str) -> dict:
    """The checked record of a clicked cell, or a message when the cell has no (valid) result."""
    if not isinstance(results, list) or not isinstance(index, int) or not 0 <= index < len(results):
        raise gr.Error(f"that cell has no result yet: wait for the {what} to finish", print_exception=False)
    return checked(results[index])


def checked(raw) -> dict:
    """checked_record, with a refusal shown as a message (no traceback)."""
    try:
        return checked_record(raw)
    except ValueError as error:
        raise gr.Error(html.escape(f"this cell's result cannot be used: {error}", quote=False),
                       print_exception=False) from None


def nudge_text(recipe: Recipe) -> str:
    """What sets a nudged image apart from its seed's own: " · variation seed 7 at strength 0.1" (else "")."""
    if recipe.variation_seed is None or recipe.variation_strength == 0:
        return ""
    return f" · variation seed {recipe.variation_seed} at strength {recipe.variation_strength:g}"


def preview_text(recipe: Recipe) -> str:
    """" · preview (5 of 20 steps): Finish makes the full image" for a preview, else ""."""
    if not recipe.preview_steps:
        return ""
    return f" · preview ({recipe.preview_steps} of {recipe.num_inference_steps} steps: Finish makes the full image)"


def anchor_updates(record: dict) -> dict:
    """The anchor panel's values for a record: its recipe becomes the anchor."""
    nudged = nudge_text(Recipe.from_dict(record["recipe"]))
    return {"anchor_text": f"Anchor seed: {record['seed']}{nudged} · prompt: {record['prompt']}",
            "anchor_seed": record["seed"], "anchor": record["recipe"], "anchor_recipe": record["recipe"],
            "anchor_fingerprint": record["fingerprint"], "grid_link": record.get("link", "")}


def verdict_record(verdict: dict | None) -> dict | None:
    """A regenerated image (a link, a reproduction, a dropped PNG) as a checked result record, else None."""
    if not isinstance(verdict, dict) or not verdict.get("recipe"):
        return None
    try:
        return checked_record(verdict)
    except ValueError:
        return None


def wire_cells(wiring, app):
    """The Selected image panel's actions (Make anchor, Reuse seed) and the nudges around the anchor. Returns the
    nudges' generating event."""
    from webui.wiring import PRIVATE, SHOW_ANCHOR, SHOW_SEEDS

    ui, event, guarded, shows_cell = wiring.ui, wiring.event, wiring.guarded, wiring.shows_cell
    event(ui["make_anchor"].click, app.make_anchor, [ui["cell"]], list(ANCHOR), queue=False, **PRIVATE).then(
        None, js=SHOW_ANCHOR, queue=False, **PRIVATE)  # the anchor in view: the variations start there
    event(ui["reuse_seed"].click, app.reuse_seed, [ui["cell"]], ["seeds"], queue=False, **PRIVATE).then(
        None, js=SHOW_SEEDS, queue=False, **PRIVATE)  # the box it changed, in view
    nudges = event(guarded([ui["make_nudges"].click]), app.nudge, [ui["anchor"], ui["nudge_count"],
                                                                  ui["nudge_strength"]],
                   ["nudges", "nudges_results"], concurrency_id="generation", show_progress="minimal", **PRIVATE)
    shows_cell(ui["nudges"].select, app.select_nudge, [ui["nudges_results"]], list(CELL), floating=True)

    return nudges
