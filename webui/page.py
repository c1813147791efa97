"""The page: its layout, read top to bottom as the page shows it, and the events of the loop (grid, pick, vary) with
each panel's own wiring (webui/cells.py, compare.py, matrix.py, history.py, previews.py, reproduction_panel.py).

`build_app` builds the page for the models an Admission allows; app.py starts the server around it.
"""

import atexit
import re
import shutil
import tempfile
from functools import partial
from pathlib import Path

import gradio as gr

from seedlab.engine.recipe import DEFAULT_MODEL, DEFAULT_SCHEDULER, SPECS
from seedlab.engine.samplers.names import A1111_OWN_SAMPLERS, A1111_SAMPLERS, COMFY_SAMPLERS
from seedlab.engine.weights import library
from seedlab.files.tool_samplers import SAMPLERS as TOOL_SAMPLERS
from seedlab.serving.admission import Admission
from webui.cells import ANCHOR, CELL, cell_panel, nudge_panel, wire_cells
from webui.compare import compare_panel, travel_panel, wire_compare
from webui.fields import ACCORDIONS, DETERMINISM, FIELDS, MAIN, control, page_defaults
from webui.fields import with_fields as with_server_fields
from webui.handlers import NO_ANCHOR, WebApp, final_only
from webui.history import history_panel, to_store, wire_history
from webui.i18n import words
from webui.matrix import matrix_panel, wire_matrix
from webui.previews import finish_controls, preview_controls, wire_previews
from webui.reproduction_panel import reproduction_panel, wire_reproduction
from webui.wiring import GENERATE, PRIVATE, Wiring, by_name, ready, spellings

# The page's example prompt and variations: words embedded-v2 shows at a glance, the diffusers guide's own among them
# (tests/test_readme_examples.py); the first embedded model knows only kinds, colours, sizes and backgrounds.
EXAMPLE_PROMPT = "a red star on a blue background"
EXAMPLE_VARIATIONS = ", highly realistic\n, artsy\n, on a yellow background\n, small"
FIRST_MODEL_EXAMPLE = ("a red circle on a blue background", ", large\n, on a yellow background")


def examples(model: str) -> tuple[str, str]:
    """The example prompt and variations the page offers for the model it serves."""
    return FIRST_MODEL_EXAMPLE if model == DEFAULT_MODEL else (EXAMPLE_PROMPT, EXAMPLE_VARIATIONS)
# Long: the page's layout, read top to bottom as the page shows it.
def build_app(admission: Admission, image_dir: Path | None = None) -> tuple[gr.Blocks, WebApp]:
    """The UI for the models `admission` allows (the default one is loaded here if it is not yet)."""
    if image_dir is None:
        image_dir = Path(tempfile.mkdtemp(prefix="seedlab-png-"))
        atexit.register(shutil.rmtree, image_dir, ignore_errors=True)
    app = WebApp(admission, image_dir)
    store, model = admission.store, app.default
    defaults = page_defaults(admission)  # prompts typed on the page are read as A1111 reads them (links, API: plain)
    a1111, own = (list(A1111_SAMPLERS), list(A1111_OWN_SAMPLERS)) if model.info.a1111 else ([], [])  # run as A1111
    eps = model.info.a1111 and model.info.scheduler_config.get("prediction_type", "epsilon") == "epsilon"
    comfy = [(f"{name} (ComfyUI)", name) for name in COMFY_SAMPLERS] if eps else []  # ComfyUI's: eps models
    a1111 = [(f"{name} (A1111)", name) for name in a1111]
    schedulers = [(f"model default: {scheduler_label(model.default_scheduler)}", DEFAULT_SCHEDULER), *a1111, *own,
                  *comfy, *[(scheduler_label(name), name) for name in model.schedulers]]
    hires = [("same as Scheduler", ""), *a1111, *comfy]
    choices = {"scheduler": schedulers, "model": store.allowed, "dtype": [store.dtype], "hires_sampler": hires}
    app.spellings = spellings([*schedulers, *hires])  # typed + Enter picks the sampler of that exact name
    ui: dict[str, gr.components.Component] = {}

    def add(name: str, **options) -> gr.components.Component:
        ui[name] = control(name, defaults[name], choices.get(name), **options)
        return ui[name]

    with gr.Blocks(title="SeedLab", delete_cache=(3600, 3600)) as demo:
        gr.Markdown(words("# SeedLab\nPick seeds, make a grid, click the cell you like, then vary its prompt."))
        reproduction_panel(ui)  # at the top: what a link opens is the first thing a visitor sees
        with gr.Row():
            with gr.Column(scale=2):
                unconditional = store.info(store.default).unconditional  # DDIM, DDPM: no prompt at all
                ui["prompt"] = gr.Textbox(
                    label=words("Prompt"), value="" if unconditional else examples(store.default)[0], lines=2,
                    info=words("this model is unconditional: leave it empty (Ctrl+Enter generates)" if unconditional
                               else "Ctrl+Enter generates; read with A1111's syntax: (word:1.2), [word], BREAK "
                               "(Prompt syntax)" if model.info.a1111_prompts else "Ctrl+Enter generates"),
                    elem_id="prompt")
                with gr.Row(equal_height=True):
                    ui["seeds"] = gr.Textbox(label=words("Seeds"), value="0-3", scale=4, elem_id="seeds",
                                             info=words('"42", "0-7" or "3, 17, 99" (-1: a random seed)'))
                    # No min/max on the widget: the handler refuses a bad count with a message naming the field.
                    ui["dice_count"] = gr.Number(label=words("Random seeds to draw"), value=4, precision=0,
                                                 min_width=150, scale=1, elem_id="dice-count")
                    ui["dice"] = gr.Button(words("Random"), min_width=90, scale=0, elem_id="dice")  # text, no emoji
                with gr.Row():  # right under the seeds: in view with the grid on a laptop screen
                    ui["generate"] = gr.Button(words(GENERATE), variant="primary", elem_id="generate", min_width=100)
                    preview_controls(ui, add)
                    ui["stop"] = gr.Button(words("Stop"), variant="stop", interactive=False, elem_id="stop",
                                           min_width=80)  # narrow buttons: the four share one row
                ui["busy_note"] = gr.HTML("", elem_id="busy-note")  # written and cleared by webui/page.js
                # The loop's third step beside its first: the anchor and its variations under the prompt they extend,
                # in view with the grid and the Selected image on a laptop screen (issue 54).
                with gr.Group(elem_id="vary-group"):
                    ui["anchor_text"] = gr.Textbox(value=NO_ANCHOR, label=words("Anchor"), show_label=False,
                                                   interactive=False, elem_id="anchor")
                    ui["variations"] = gr.Textbox(label=words("Variations (one per line)"), lines=2, max_lines=8,
                                                  placeholder=examples(store.default)[1], elem_id="variations-box")
                    ui["vary_button"] = gr.Button(words("Regenerate variations from anchor"), variant="primary",
                                                  elem_id="vary")
                    ui["vary_note"] = gr.Textbox(show_label=False, interactive=False, visible=False,
                                                 elem_id="vary-note")
                for name in MAIN:  # a menu of models only where there is more than one
                    add(name, **(model_options(len(store.allowed)) if name == "model" else {}))
                for title, names, elem_id in ACCORDIONS:  # the fields by what they are for, closed
                    with gr.Accordion(words(title), open=False, elem_id=elem_id):
                        for name in names:
                            add(name, **({"info": lora_help()} if name == "loras" else {}))
                with gr.Accordion(words("Determinism"), open=False):
                    for name in DETERMINISM:
                        add(name)
                    ui["environment"] = gr.JSON(app.environment(None)["environment"], label=words("Environment"),
                                                elem_id="environment")
            with gr.Column(scale=3):
                # No preview on click: the grid stays in view while the clicked cell becomes the anchor.
                ui["grid"] = gr.Gallery(label=words("Grid"), columns=4, object_fit="contain", format="png",
                                        type="filepath", interactive=False, allow_preview=False, height="auto",
                                        elem_id="grid", elem_classes=["pixelated", "cells"])
                finish_controls(ui)
                cell_panel(ui)  # under the grid: a clicked cell shows where the eye is
                # The public /vary (a seed and the controls, no anchor), /grid (the page's Generate streams its
                # cells), /matrix, /plot and /travel (their images at the end).
                for name in ("vary_api", "grid_api", "matrix_api", "plot_api", "travel_api"):
                    ui[name] = gr.Button(visible=False)
                ui["vary"] = gr.Gallery(label=words("Variations"), columns=4, object_fit="contain", format="png",
                                        type="filepath", interactive=False, height="auto", elem_id="variations",
                                        elem_classes=["pixelated", "cells"])
                ui["variation_link"] = gr.Textbox(label=words("Link to the selected variation"), buttons=["copy"],
                                                  interactive=False, elem_id="variation-link")
                # The anchor's own record, under what is made from it (the Selected image shows a clicked cell's).
                with gr.Accordion(words("Anchor's recipe and link"), open=True):
                    ui["anchor_seed"] = gr.Textbox(value="", visible=False)  # text: a seed may pass 2**53
                    ui["anchor_fingerprint"] = gr.Textbox(label=words("Pixel fingerprint"),
                                                          interactive=False, elem_id="anchor-fingerprint")
                    ui["anchor_recipe"] = gr.JSON(label=words("Recipe"), elem_id="anchor-recipe")
                    ui["grid_link"] = gr.Textbox(label=words("Link to this image"), buttons=["copy"], interactive=False,
                                                 elem_id="grid-link")
                nudge_panel(ui, strength=0.1)
                for panel in (matrix_panel, compare_panel, travel_panel, history_panel):
                    panel(ui)
                with gr.Accordion(words("Results (JSON)"), open=False):
                    ui["grid_results"] = gr.JSON(label=words("Grid results"))
                    ui["vary_results"] = gr.JSON(label=words("Variation results"))
        # The anchor's recipe, as the user clicked it: kept in the page (a hidden JSON, not a gr.State, which lives on
        # the server and was gone after a restart while the page still showed the anchor). The page's values are the
        # visitor's to change, so every handler checks it as it checks the API's fields.
        ui["anchor"] = gr.JSON(None, visible=False, elem_id="anchor-state")
        ui["pending"] = gr.State(None)  # the original a link or a dropped PNG names, until it is regenerated
        wire(demo, app, ui)
    app.ui = ui  # the page's components by name (the wiring's names; tests walk them)
    return demo, app


def wire(demo: gr.Blocks, app: WebApp, ui: dict) -> None:
    """The events: inputs and outputs by component name; /grid, /vary, /matrix, /reproduce, /reverify are public."""
    wiring = Wiring(ui)
    event, guarded, shows_cell = wiring.event, wiring.guarded, wiring.shows_cell
    fields = [ui[name] for name in FIELDS]
    with_fields = partial(with_server_fields, limits=app.admission.limits)  # the API's docs give this server's ranges

    # Queued, so that a refused count reaches the page as a message (an unqueued error shows a bare badge).
    event(ui["dice"].click, app.dice, [ui["dice_count"], ui["seeds"]], ["seeds"], show_progress="hidden", **PRIVATE)
    starts_grid = [ui["generate"].click, ui["seeds"].submit]
    grid = event(guarded(starts_grid, "grid"), with_fields(app.page_grid, ("prompt", "seeds")),
                 [ui["prompt"], ui["seeds"], *fields], ["grid", "grid_results", *ANCHOR, *CELL, "vary_note"],
                 api_name="page_grid", concurrency_id="generation", show_progress="minimal",
                 show_progress_on=ui["grid"], **PRIVATE)  # one progress display: on the grid, not on every output
    # The public /grid, /vary and /matrix send their images once, at the end (see final_only).
    grid_api = event(ui["grid_api"].click, with_fields(final_only(app.grid), ("prompt", "seeds")),
                     [ui["prompt"], ui["seeds"], *fields], ["grid", "grid_results"], api_name="grid",
                     concurrency_id="generation")
    grid.then(by_name(app.environment, ui, [ui["environment"]]), ui["grid_results"], ui["environment"], queue=False,
              **PRIVATE)
    shows_cell(ui["grid"].select, app.select, [ui["grid_results"]], [*ANCHOR, *CELL])
    shows_cell(ui["vary"].select, app.select_variation, [ui["vary_results"]], ["variation_link", *CELL])
    wiring.says_vary_note(app.anchor_prompt_note)  # which prompt the vary button varies, before the run
    # The button varies the anchor's own recipe; the public /vary takes a seed and the recipe's fields.
    vary = event(guarded([ui["vary_button"].click], "variations"),
                 with_fields(app.vary_anchor, ("prompt", "anchor", "variations")),
                 [ui["prompt"], ui["anchor"], ui["variations"], *fields],
                 ["vary", "vary_results", "variation_link", "vary_note"], concurrency_id="generation",
                 show_progress="minimal", show_progress_on=ui["vary"], **PRIVATE)
    vary.then(by_name(app.environment, ui, [ui["environment"]]), ui["vary_results"], ui["environment"], queue=False,
              **PRIVATE)
    vary_api = event(ui["vary_api"].click, with_fields(final_only(app.vary), ("prompt", "seed", "variations")),
                     [ui["prompt"], ui["anchor_seed"], ui["variations"], *fields], ["vary", "vary_results"],
                     api_name="vary", concurrency_id="generation")
    matrix, page_matrix = wire_matrix(wiring, app, with_fields, fields)
    page_plot, plot_api, page_travel, travel_api = wire_compare(wiring, app, with_fields, fields)
    nudges = wire_cells(wiring, app)  # Make anchor, Reuse seed, nudges
    # History: kept in this browser; every finished grid, variation set, matrix, nudge set, plot and travel.
    made = {"grid": grid, "vary": vary, "matrix": page_matrix, "nudges": nudges, "plot": page_plot,
            "travel": page_travel}
    kept, regenerate = wire_history(wiring, app, demo, made)
    reproducing = wire_reproduction(wiring, demo, app.reproduction)  # links, recipes and dropped images (at the top)
    # Stop (and a closed tab, through Gradio) ends whichever generation this session is running.
    generating = [grid, grid_api, vary, vary_api, matrix, page_matrix, page_plot, plot_api, page_travel, travel_api,
                  nudges, regenerate, *reproducing, *wire_previews(wiring, app, ui, with_fields, fields, kept)]
    stopping = ui["stop"].click(app.stop, None, ui["busy_note"], cancels=generating, queue=False, **PRIVATE)
    wiring.settles(grid, vary, page_matrix, page_plot, page_travel, nudges, regenerate)
    # The buttons come back once the server has stopped the run (not beside it): a Generate clicked at once must
    # not start a run that a Stop still on its way would end.
    stopped = stopping.then(ready, None, wiring.buttons, queue=False, show_progress="hidden", **PRIVATE)
    # A stopped generation keeps its finished cells: they go to History too.
    stopped.then(by_name(to_store(app.history.remember_stopped), ui, [ui[name] for name in kept]),
                 [ui[name] for name in ("history", "anchor", "anchor_fingerprint", "grid_results", "vary_results",
                                        "matrix_results", "nudges_results", "plot_results", "travel_results")],
                 [ui[name] for name in kept], queue=False, **PRIVATE)


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")  # where a class name's words meet


def model_options(count: int) -> dict:
    """The Model menu: a choice where the server offers several, else the one it runs, shown as such (a visitor
    cannot name another model here, so the hint does not invite one)."""
    hint = "the models this server offers" if count > 1 else "the model this server runs"
    return {"interactive": count > 1, "info": words(hint)}


def scheduler_label(name: str) -> str:
    """A diffusers scheduler as the menu names it, in a user's words: A1111's name where one matches
    ("DPM++ 2M (diffusers)"), else its class name in words ("DEIS Multistep (diffusers)"). The value a choice
    sends stays the class name (links, the API and PNGs keep it)."""
    a1111 = {cls: label for label, cls in TOOL_SAMPLERS.items()}.get(name)
    words = a1111 or _CAMEL.sub(" ", name.removesuffix("Scheduler")).strip() or name
    return f"{words} (diffusers)"


def lora_help() -> str:
    """The LoRA field's help with the LoRAs the models folder holds (read when the page is built)."""
    names = sorted(library.files("lora"), key=str.lower)
    if library.models_dir() is None:
        where = "this server has no models folder, so none can be used"
    elif not names:
        where = f"the models folder {library.models_dir().name}/ holds none (Lora/ or loras/)"
    else:
        shown = ", ".join(names[:40]) + (f" and {len(names) - 40} more" if len(names) > 40 else "")
        where = f"in the models folder: {shown}"
    return f"{SPECS['loras'].help}; {where}"
