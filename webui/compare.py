"""The "Compare" panel: an X/Y/Z plot over any recipe field (seedlab/plot.py), on the page and as /plot.

Every cell is its own exact, linkable image (made alone, as a grid cell is); the labelled sheet of each
Z value lists every cell's recipe, fingerprint and link in its `seedlab-plot` chunk.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import gradio as gr

from seedlab import Recipe
from seedlab.plot import parse_axis, plot_recipes
from seedlab.sheets import save_plot_sheet
from webui.fields import user_errors
from webui.requests import visitor

AXES = (("plot_x", "X axis", "seed: 1-4"), ("plot_y", "Y axis (optional)", "num_inference_steps: 10, 20"),
        ("plot_z", "Z axis (optional)", "guidance_scale: 2, 3"))


def compare_panel(ui: dict) -> None:
    """The Compare accordion's components, added to `ui` by name."""
    with gr.Accordion("Compare (X/Y/Z plot over any recipe field)", open=False, elem_id="compare-panel"):
        gr.Markdown('Each axis is "NAME: VALUES" over any recipe field (seed, variation_seed, variation_strength, '
                    "num_inference_steps, guidance_scale, scheduler, size, negative_prompt, rng, model) or "
                    '`prompt_sr` (A1111\'s Prompt S/R: "red, blue" replaces "red" in the prompt); values as in '
                    'A1111: "1, 5, 9", "1-5", "1-5 (+2)", "1-10 [5]", -1 for a random seed. The other fields are '
                    "the current settings. Every cell is its own exact, linkable image.")
        with gr.Row():
            for name, label, example in AXES:
                ui[name] = gr.Textbox(label=label, placeholder=example, max_lines=1, elem_id=name.replace("_", "-"))
        with gr.Row():
            ui["make_plot"] = gr.Button("Make the plot", elem_id="make-plot")
            ui["plot_sheet"] = gr.DownloadButton("Download sheet (PNG)", interactive=False, elem_id="plot-sheet")
        ui["plot"] = gr.Gallery(label="Plot", columns=4, object_fit="contain", format="png", type="filepath",
                                interactive=False, allow_preview=False, height="auto", elem_id="plot",
                                elem_classes=["pixelated", "cells"])
        with gr.Accordion("Plot results (JSON)", open=False):
            ui["plot_results"] = gr.JSON(label="Plot results")


def axes_of(values: dict):
    """The plot's axes from the request's x, y and z (y and z optional); ValueError naming the axis."""
    found = []
    for key, label, _ in AXES:
        text = values.pop(key[-1], None)
        text = text.strip() if isinstance(text, str) else text
        found.append(parse_axis(text, label.split(" (")[0]) if text else None)
    if found[0] is None:
        raise ValueError('X axis is missing: write "NAME: VALUES", such as "seed: 1-4"')
    return found


def plot(app, values: dict, request=None, progress=None):
    """A plot: every cell made alone, streamed as it finishes, captioned with its axis values."""
    values = dict(values)
    with user_errors():
        x, y, z = axes_of(values)
        made = plot_recipes(app.admission, values, x, y, z, options=("X axis", "Y axis", "Z axis"))
        app.admission.charge(made.recipes, visitor(request))
    captions = [" · ".join(f"{axis.label} {text}" for axis, text in zip((x, y, z), made.texts(cell).values())
                           if axis is not None) for cell in made.cells]
    last: dict = {}
    for update in app.run(made.recipes, captions, request, progress, "plot"):
        last = {**last, **update}
        yield update
    records = last.get("plot_results") or []
    if len(records) != len(made.cells):
        return  # stopped part way: the cells shown are exact, but no sheet of a partial plot
    for record, cell in zip(records, made.cells):
        record.update({key: text for key, text in made.texts(cell).items() if text is not None})
    yield {"plot_results": records, "plot_sheet": gr.DownloadButton(value=str(sheet(app, made, records, values)),
                                                                    interactive=True)}


def sheet(app, made, records: list[dict], values: dict) -> Path:
    """The labelled sheet of the plot's first Z value (the one a Z axis starts with), kept with the PNGs."""
    columns = [f"{made.x.label}: {text}" for text in made.x.texts]
    rows = [f"{made.y.label}: {text}" for text in made.y.texts] if made.y else []
    first = records[:len(columns) * max(1, len(rows))]
    paths = []
    for record in first:
        found = app.record.find(Recipe.from_dict(record["recipe"]))
        paths.append(None if found is None else Path(found[1].path))
    title = str(values.get("prompt") or "")[:80] + (f" · {made.z.label}: {made.z.texts[0]}" if made.z else "")
    name = hashlib.sha256("".join(r["fingerprint"] for r in records).encode()).hexdigest()[:16]
    out = save_plot_sheet(first, paths, columns, rows, title, app.pngs.folder / f"plot-{name}.png")
    app.pngs.added(out)
    return out
