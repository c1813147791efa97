"""The seeds x variations matrix on the page (A1111's X/Y plot, for seeds), and its labelled sheet."""

from __future__ import annotations

import hashlib
from pathlib import Path

import gradio as gr

from seedlab import Recipe
from seedlab.files.sheets import save_matrix_sheet
from webui.i18n import words


def matrix_panel(ui: dict) -> None:
    """The matrix accordion's components, added to `ui` by name."""
    with gr.Accordion(words("Seeds x variations (matrix)"), open=False, elem_id="matrix-panel"):
        gr.Markdown(words("Rows are the seeds in the seeds box; columns are the base prompt and each line of the "
                          "variations box, with the current settings. Every cell is its own exact, linkable image."))
        with gr.Row():
            ui["make_matrix"] = gr.Button(words("Make the matrix"), elem_id="make-matrix")
            ui["matrix_sheet"] = gr.DownloadButton(words("Download sheet (PNG)"), interactive=False,
                                                   elem_id="matrix-sheet")
        ui["matrix"] = gr.Gallery(label=words("Matrix"), columns=2, object_fit="contain", format="png", type="filepath",
                                  interactive=False, allow_preview=False, height="auto", elem_id="matrix",
                                  elem_classes=["pixelated", "cells"])
        with gr.Accordion(words("Matrix results (JSON)"), open=False):
            ui["matrix_results"] = gr.JSON(label="Matrix results")


def matrix_columns(variations: str | None) -> list[str]:
    """The matrix's column headers: the base prompt, then each variation line."""
    return ["base prompt", *(line.strip() for line in str(variations or "").splitlines() if line.strip())]


def matrix_page(app, values: dict, request=None, progress=None):
    """The page's matrix: the cells as they finish, then the labelled sheet to download."""
    columns = matrix_columns(values.get("variations"))
    yield {"matrix": gr.Gallery(value=[], columns=len(columns)),
           "matrix_sheet": gr.DownloadButton(value=None, interactive=False)}
    last: dict = {}
    for update in app.matrix(values, request, progress):
        last = {**last, **update}
        yield update
    results = last.get("matrix_results") or []
    if not results or len(results) % len(columns):
        return  # stopped part way: no sheet of a partial matrix
    paths = []
    for record in results:
        found = app.record.find(Recipe.from_dict(record["recipe"]))
        paths.append(None if found is None else Path(found[1].path))
    name = hashlib.sha256("".join(r["fingerprint"] for r in results).encode()).hexdigest()[:16]
    out = save_matrix_sheet(results, paths, columns, app.pngs.folder / f"matrix-{name}.png")
    app.pngs.added(out)
    yield {"matrix_sheet": gr.DownloadButton(value=str(out), interactive=True)}


def wire_matrix(wiring, app, with_fields, fields: list) -> tuple:
    """The matrix's events: the page's (with its sheet) and the public /matrix. Returns (public, page)."""
    from webui.cells import CELL
    from webui.streaming import final_only
    from webui.wiring import PRIVATE

    ui, event, guarded, shows_cell = wiring.ui, wiring.event, wiring.guarded, wiring.shows_cell
    public = event(ui["matrix_api"].click, with_fields(final_only(app.matrix), ("prompt", "seeds", "variations")),
                   [ui["prompt"], ui["seeds"], ui["variations"], *fields], ["matrix", "matrix_results"],
                   api_name="matrix", concurrency_id="generation")
    page = event(guarded([ui["make_matrix"].click]),
                        with_fields(app.matrix_page, ("prompt", "seeds", "variations")),
                        [ui["prompt"], ui["seeds"], ui["variations"], *fields],
                        ["matrix", "matrix_results", "matrix_sheet"], api_name="page_matrix",
                        concurrency_id="generation", show_progress="minimal", **PRIVATE)
    shows_cell(ui["matrix"].select, app.select_matrix, [ui["matrix_results"]], list(CELL), floating=True)
    return public, page
