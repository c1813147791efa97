"""Compare and travel: an X/Y/Z plot over any recipe field (seedlab/explore/plot.py) and seed travel
(seedlab/explore/travel.py), on the page and as /plot and /travel.

Every cell and every frame is its own exact, linkable image (made alone, as a grid cell is); the labelled
sheet of a plot lists every cell's recipe, fingerprint and link in its `seedlab-plot` chunk.
"""

from __future__ import annotations

import hashlib
import html
from pathlib import Path

import gradio as gr

from seedlab import Recipe
from seedlab.engine.seeds import parse_seeds
from seedlab.explore.axes import parse_axes
from seedlab.explore.plot import plot_recipes
from seedlab.explore.travel import CURVES, animation_name, save_animation, steps_draw_noise, travel_recipes
from seedlab.files.sheets import save_plot_sheet
from webui.fields import user_errors
from webui.history_words import phrase
from webui.i18n import language, words
from webui.requests import visitor

AXES = (("plot_x", "X axis", "seed: 1-4"), ("plot_y", "Y axis (optional)", "num_inference_steps: 10, 20"),
        ("plot_z", "Z axis (optional)", "guidance_scale: 2, 3"))
PREVIEW = "(file) => ({__type__: 'update', value: file, visible: Boolean(file)})"  # the animation, or hidden


def compare_panel(ui: dict) -> None:
    """The Compare accordion's components, added to `ui` by name."""
    with gr.Accordion(words("Compare (X/Y/Z plot over any recipe field)"), open=False, elem_id="compare-panel"):
        gr.Markdown('Each axis is "NAME: VALUES" over any recipe field (seed, variation_seed, variation_strength, '
                    "num_inference_steps, guidance_scale, scheduler, size, negative_prompt, rng, model) or "
                    '`prompt_sr` (A1111\'s Prompt S/R: "red, blue" replaces "red" in the prompt); values as in '
                    'A1111: "1, 5, 9", "1-5", "1-5 (+2)", "1-10 [5]", -1 for a random seed. The other fields are '
                    "the current settings. Every cell is its own exact, linkable image.")
        with gr.Row():
            for name, label, example in AXES:
                ui[name] = gr.Textbox(label=label, placeholder=example, max_lines=1, elem_id=name.replace("_", "-"))
        with gr.Row():
            ui["make_plot"] = gr.Button(words("Make the plot"), elem_id="make-plot")
            ui["plot_sheet"] = gr.DownloadButton(words("Download sheet (PNG)"), interactive=False, elem_id="plot-sheet")
        ui["plot_layout"] = gr.HTML("", elem_id="plot-layout", padding=False)  # the plot's axes: see table_css
        ui["plot"] = gr.Gallery(label=words("Plot"), columns=4, object_fit="contain", format="png", type="filepath",
                                interactive=False, allow_preview=False, height="auto", elem_id="plot",
                                elem_classes=["pixelated", "cells"])
        with gr.Accordion(words("Plot results (JSON)"), open=False):
            ui["plot_results"] = gr.JSON(label="Plot results")


def travel_panel(ui: dict) -> None:
    """The seed travel accordion: frames from one seed to the next through the variation strength."""
    with gr.Accordion(words("Seed travel"), open=False, elem_id="travel-panel"):
        gr.Markdown(words("Frames from each seed to the next: frame k is the first seed with the next one as its "
                          "variation seed at a rising strength, so the first frame is the seed's own image and the "
                          "last the next seed's. Every frame is exact and linkable; the animation is a lossless WebP."))
        with gr.Row():
            ui["travel_seeds"] = gr.Textbox(label=words("Seeds to travel through"), value="3, 7", max_lines=1,
                                            elem_id="travel-seeds")
            ui["travel_frames"] = gr.Number(label=words("Frames per segment"), value=5, precision=0,
                                            elem_id="travel-frames")
            ui["travel_curve"] = gr.Dropdown(list(CURVES), value="linear", label=words("Curve"), elem_id="travel-curve")
        with gr.Row():
            ui["make_travel"] = gr.Button(words("Travel"), elem_id="make-travel")
            ui["travel_animation"] = gr.DownloadButton("Download animation (WebP)", interactive=False,
                                                       elem_id="travel-animation")
        # The animation plays here once made: the download's file, copied in the browser (no round trip).
        ui["travel_preview"] = gr.Image(label=words("Animation"), type="filepath", interactive=False, visible=False,
                                        height=256, elem_id="travel-preview", elem_classes="pixelated")
        ui["travel_animation"].change(None, ui["travel_animation"], ui["travel_preview"], js=PREVIEW, queue=False,
                                      show_progress="hidden", api_visibility="private")
        ui["travel"] = gr.Gallery(label=words("Frames"), columns=5, object_fit="contain", format="png", type="filepath",
                                  interactive=False, allow_preview=False, height="auto", elem_id="travel",
                                  elem_classes=["pixelated", "cells"])
        with gr.Accordion(words("Travel results (JSON)"), open=False):
            ui["travel_results"] = gr.JSON(label="Travel results")


def travel(app, values: dict, request=None, progress=None):
    """Seed travel: every frame made alone and streamed, then the animation (WebP) to download."""
    values = {name: value for name, value in values.items() if name not in ("variation_seed", "variation_strength")}
    with user_errors(request):
        seeds = parse_seeds(str(values.pop("seeds", None) or ""))
        frames, curve = values.pop("frames", None), values.pop("curve", None) or "linear"
        frames = int(frames) if isinstance(frames, float) and frames.is_integer() else frames
        if isinstance(frames, bool) or not isinstance(frames, int) or not 2 <= frames <= 100:
            raise ValueError(f"Frames per segment must be a whole number from 2 to 100, got {str(frames)[:20]!r}")
        if curve not in CURVES:
            raise ValueError(f"Curve must be one of {', '.join(CURVES)}, got {str(curve)[:40]!r}")
        recipes = travel_recipes(app.admission, values, seeds, frames, curve)
        if steps_draw_noise(app.admission, recipes[0]):
            raise ValueError(f"Scheduler {recipes[0].scheduler} draws noise at every step, so the animation would "
                             "jump between frames: pick a scheduler that draws nothing while stepping (Euler, DPM++ "
                             "2M, DDIM, UniPC)")
        app.admission.charge(recipes, visitor(request))
    captions = [frame_caption(recipe, language(request)) for recipe in recipes]
    last: dict = {}
    for update in app.run(recipes, captions, request, progress, "travel"):
        if not last:  # the previous travel's animation goes with the first update
            update = {**update, "travel_animation": gr.DownloadButton(value=None, interactive=False)}
        last = {**last, **update}
        yield update
    records = last.get("travel_results") or []
    if len(records) != len(recipes):
        return  # stopped part way: the frames shown are exact, but no animation of a partial travel
    paths = [Path(app.record.find(Recipe.from_dict(record["recipe"]))[1].path) for record in records]
    name = hashlib.sha256("".join(r["fingerprint"] for r in records).encode()).hexdigest()[:16]
    folder = app.pngs.folder / f"travel-{name}"
    folder.mkdir(exist_ok=True)
    animation = save_animation(paths, folder, duration=200, name=animation_name(recipes))["webp"]
    app.pngs.added(animation)
    yield {"travel_animation": gr.DownloadButton(value=str(animation), interactive=True)}


def frame_caption(recipe: Recipe, lang: str = "en") -> str:
    """A frame as a person reads it: "seed 2" where it is a seed's own image, "seed 2 → 0, 25%" between seeds."""
    seed = phrase("seed {seed}", lang, seed=recipe.seed)
    if not recipe.variation_strength:
        return seed
    return f"{seed} → {recipe.variation_seed}, {recipe.variation_strength * 100:.3g}%"


def axes_of(values: dict):
    """The plot's axes from the request's x, y and z (y and z optional); ValueError naming every bad axis at once."""
    texts = []
    for key, label, _ in AXES:
        text = values.pop(key[-1], None)
        texts.append((text.strip() if isinstance(text, str) else text, label.split(" (")[0]))
    if not texts[0][0]:
        raise ValueError('X axis is missing: write "NAME: VALUES", such as "seed: 1-4"')
    return parse_axes(texts)


def plot(app, values: dict, request=None, progress=None):
    """A plot: every cell made alone, streamed as it finishes, captioned with its axis values."""
    values = dict(values)
    with user_errors(request):
        x, y, z = axes_of(values)
        made = plot_recipes(app.admission, values, x, y, z, options=("X axis", "Y axis", "Z axis"))
        app.admission.charge(made.recipes, visitor(request))
    captions = [" · ".join(f"{axis.label} {text}" for axis, text in zip((x, y, z), made.texts(cell).values())
                           if axis is not None) for cell in made.cells]
    # The Selected image panel names a clicked cell by its axis values (its seed it names anyway).
    titles = [" · ".join(f"{axis.label} {text}" for axis, text in zip((x, y, z), made.texts(cell).values())
                         if axis is not None and axis.name != "seed") for cell in made.cells]
    yield {"plot_layout": plot_table(made)}  # the page lays the cells out as a table of the axes (the API ignores it)
    last: dict = {}
    for update in app.run(made.recipes, captions, request, progress, "plot"):
        for record, title in zip(update.get("plot_results") or [], titles):
            record["axes"] = title
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


def plot_table(made) -> str:
    """The plot's cells as a table, labelled like the sheet: a line naming the axes, and a style that gives the
    gallery one column per X value and puts each X value above its column and each row's Y (and Z) values left of
    it. The labels are CSS content, each character escaped, so no axis value can end the style or add markup."""
    columns = [f"{made.x.label}: {text}" for text in made.x.texts]
    rows = [" · ".join(part for part in (f"{made.y.label}: {y}" if made.y else "",
                                         f"{made.z.label}: {z}" if made.z else "") if part)
            for z in (made.z.texts if made.z else [""]) for y in (made.y.texts if made.y else [""])]
    rows = rows if made.y or made.z else []
    cell = "#compare-panel #plot .gallery-item"
    rules = [f"#compare-panel #plot .grid-container {{ grid-template-columns: repeat({len(columns)}, minmax(0, 1fr)) "
             f"!important; padding: 2.8em 0 0 {'7.5em' if rows else '0'} !important; }}",
             f"{cell} {{ position: relative; overflow: visible !important; }}",
             "#compare-panel #plot .caption-label { display: none !important; }",
             f"{cell}::before, {cell}::after {{ position: absolute; font-size: 12px; line-height: 1.2; "
             "overflow-wrap: break-word; color: var(--body-text-color); pointer-events: none; }",
             f"{cell}::before {{ bottom: 100%; left: 0; right: 0; text-align: center; padding-bottom: 4px; }}",
             f"{cell}::after {{ right: 100%; top: 0; bottom: 0; width: 7em; display: flex; align-items: center; "
             "justify-content: flex-end; text-align: right; padding-right: 6px; box-sizing: border-box; }",
             "@media (max-width: 480px) { #compare-panel #plot .grid-container { padding-left: "
             f"{'4.8em' if rows else '0'} !important; }} {cell}::after {{ width: 4.6em; }} "
             f"{cell}::before, {cell}::after {{ font-size: 10px; }} }}"]
    rules += [f"{cell}:nth-child({index + 1})::before {{ content: \"{_css_text(text)}\"; }}"
              for index, text in enumerate(columns)]
    rules += [f"{cell}:nth-child({index * len(columns) + 1})::after {{ content: \"{_css_text(text)}\"; }}"
              for index, text in enumerate(rows)]
    named = f"Columns: {made.x.label} ({', '.join(made.x.texts)})" + "".join(
        f" · {kind}: {axis.label} ({', '.join(axis.texts)})" for kind, axis in (("rows", made.y), ("blocks of rows",
                                                                                               made.z)) if axis)
    return f'<p class="plot-axes">{html.escape(named[:2000])}</p><style>{"".join(rules)}</style>'


def _css_text(text: str) -> str:
    """Text as the inside of a CSS string: ASCII letters and digits as they are, every other character escaped."""
    return "".join(char if char.isalnum() and char.isascii() else f"\\{ord(char):06x}"
                   for char in text[:120])


def wire_compare(wiring, app, with_fields, fields: list) -> tuple:
    """The X/Y/Z plot's and seed travel's events, the page's and the public /plot and /travel; a cell of either shows
    floating beside them. Returns (page plot, /plot, page travel, /travel)."""
    from webui.cells import CELL
    from webui.streaming import final_only
    from webui.wiring import PRIVATE

    ui, event, guarded, shows_cell = wiring.ui, wiring.event, wiring.guarded, wiring.shows_cell
    axes = [ui["prompt"], ui["plot_x"], ui["plot_y"], ui["plot_z"], *fields]
    page_plot = event(guarded([ui["make_plot"].click]), with_fields(app.plot, ("prompt", "x", "y", "z")), axes,
                      ["plot", "plot_results", "plot_sheet", "plot_layout"], api_name="page_plot",
                      concurrency_id="generation", show_progress="minimal", **PRIVATE)
    plot_api = event(ui["plot_api"].click, with_fields(final_only(app.plot), ("prompt", "x", "y", "z")), axes,
                     ["plot", "plot_results"], api_name="plot", concurrency_id="generation")
    shows_cell(ui["plot"].select, app.select_plot, [ui["plot_results"]], list(CELL), floating=True)
    journey = [ui["prompt"], ui["travel_seeds"], ui["travel_frames"], ui["travel_curve"], *fields]
    page_travel = event(guarded([ui["make_travel"].click]), with_fields(app.travel, ("prompt", "seeds", "frames",
                                                                                      "curve")),
                        journey, ["travel", "travel_results", "travel_animation"], api_name="page_travel",
                        concurrency_id="generation", show_progress="minimal", **PRIVATE)
    travel_api = event(ui["travel_api"].click, with_fields(final_only(app.travel), ("prompt", "seeds", "frames",
                                                                                     "curve")),
                       journey, ["travel", "travel_results"], api_name="travel", concurrency_id="generation")
    shows_cell(ui["travel"].select, app.select_travel, [ui["travel_results"]], list(CELL), floating=True)
    return page_plot, plot_api, page_travel, travel_api
