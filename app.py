"""SeedLab web UI: a thin Gradio shell over the `seedlab` backend (handlers in webui/).

Run `python app.py` (honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT), or with `--model`,
`--device`, `--threads`, `--lanes`, `--dtype` (also SEEDLAB_MODEL, SEEDLAB_DEVICE, SEEDLAB_THREADS,
SEEDLAB_LANES, SEEDLAB_DTYPE). SEEDLAB_MODELS (comma-separated) allows more models beside the default one;
SEEDLAB_BASE_URL sets where image links point when the address the browser used is not the public
one. Per-request limits, the compute budget and queue settings come from SEEDLAB_MAX_* and friends
(see seedlab/limits.py). On a ZeroGPU Space (the `spaces` package is importable) the generation runs
inside `spaces.GPU`; elsewhere nothing changes.
"""

import argparse
import atexit
import inspect
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import gradio as gr
import torch
from starlette.middleware import Middleware

from seedlab import ModelStore, configure_process, cpu, resolve_device
from seedlab.admission import Admission, measure_speed
from seedlab.limits import Limits
from seedlab.models import default_lanes
from seedlab.workers import Workers
from seedlab.recipe import DEFAULT_MODEL, DEFAULT_SCHEDULER, DTYPES
from webui.cells import cell_panel, strip_panel
from webui.history import history_panel
from webui.matrix import matrix_panel
from webui.fields import DETERMINISM, FIELDS, MAIN, MORE, RESTORED, control, with_fields
from webui.handlers import NO_ANCHOR, SeedLab, final_only
from webui.uploads import UploadGuard

MAX_UPLOAD = "4mb"  # a dropped PNG: SeedLab's own are a few kB to a few MB at the default size limit
CSS = """
.pixelated img { image-rendering: pixelated; }  /* 64x64 images, enlarged with crisp pixels */
#reproduced img, #cell-image img { width: 256px; max-width: 100%; height: 256px; object-fit: contain; }  /* not at its native 64 px */
/* Gradio gives every column at least 100 px, which pushes the last cells out of a phone-wide gallery:
   columns share the width instead, and narrow screens get two (three for the matrix, whose rows are seeds). */
.cells .grid-container { grid-template-columns: repeat(var(--grid-cols), minmax(0, 1fr)) !important; }
@media (max-width: 480px) {
    .cells:not(#matrix) .grid-container { grid-template-columns: repeat(2, minmax(0, 1fr)) !important; }
    .cells .caption-label { white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
                            height: auto !important; max-height: none !important; font-size: 11px; }
}
/* A gallery is as tall as its images: no empty box under a row of cells. */
.cells .grid-wrap.fixed-height { min-height: 0 !important; max-height: none !important; }
/* Fullscreen shows the image as large as the screen allows (its 64 px pixels crisp), not at 256 px. */
#cell-image.fullscreen img, #reproduced.fullscreen img { width: min(100vw, 100vh) !important;
    height: min(100vw, 100vh) !important; max-width: none !important; }
"""
# Ctrl+Enter (Cmd+Enter) in the prompt presses Generate, unless it is busy; plain Enter still adds a line.
# Enter in the seeds box while a grid runs would be dropped without a word (Gradio ignores a trigger
# whose event is still pending): it is stopped here and the page says why until Generate is ready.
SHORTCUTS = """
() => {
    document.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" || !(event.target instanceof Element)) return;
        const button = document.querySelector("#generate");
        const busy = button !== null && button.disabled;
        if (event.target.closest("#seeds") && !event.shiftKey && busy) {
            event.preventDefault();
            event.stopImmediatePropagation();
            const note = document.querySelector("#busy-note");
            if (!note) return;
            note.textContent = "Still generating: press Enter again when it is done, or Stop to end it.";
            const clear = setInterval(() => {
                if (!button.disabled) { note.textContent = ""; clearInterval(clear); }
            }, 250);
            return;
        }
        if (!(event.ctrlKey || event.metaKey) || !event.target.closest("#prompt")) return;
        event.preventDefault();
        if (button && !busy) button.click();
    }, true);
    document.body.dataset.seedlab = "ready";  // the shortcuts work from here on (tests wait for it)
}
"""
GENERATE = "Generate grid"
# After a click on any cell: the Selected image panel scrolled into view (a no-op where it already is).
SHOW_CELL = "() => { document.querySelector('#cell-panel')?.scrollIntoView({block: 'nearest'}); }"
SHOW_SEEDS = "() => { document.querySelector('#seeds')?.scrollIntoView({block: 'nearest'}); }"


def by_name(function, components: dict, outputs: list):
    """Wire a handler that returns (or yields) updates keyed by component name to Gradio's dict-by-component form."""
    allowed = set(outputs)

    def convert(update: dict | None):
        unknown = [name for name in update or {} if name not in components]
        if unknown:  # a misspelt name would be an update nobody sees
            raise KeyError(f"{function.__name__} updates components that do not exist: {', '.join(unknown)}")
        # A known component that is not this event's output is left alone: one handler serves several events.
        converted = {components[name]: value for name, value in (update or {}).items() if components[name] in allowed}
        if converted:
            return converted
        skips = tuple(gr.skip() for _ in outputs)  # nothing to change (Gradio reads an empty dict as one value)
        return skips[0] if len(skips) == 1 else skips

    if inspect.isgeneratorfunction(function) or inspect.isgeneratorfunction(getattr(function, "__wrapped__", None)):
        def wired(*args):
            for update in function(*args):
                yield convert(update)
    else:
        def wired(*args):
            return convert(function(*args))
    wired.__signature__ = inspect.signature(function)
    wired.__annotations__ = gr.utils.get_type_hints(function)  # resolved where the handler was written
    wired.__name__, wired.__doc__ = function.__name__, function.__doc__
    return wired


def busy() -> tuple:
    """Generate and the vary button refuse clicks and say why; Stop becomes available."""
    return gr.Button("Generating…", interactive=False), gr.Button(interactive=False), gr.Button(interactive=True)


def ready() -> tuple:
    """Nothing runs: Generate and the vary button work again; Stop has nothing to stop."""
    return gr.Button(GENERATE, interactive=True), gr.Button(interactive=True), gr.Button(interactive=False)


def only_if_pending(change):
    """`change` (busy or ready) when the page opened a link it regenerates; otherwise the buttons stay."""
    def apply(pending):
        return change() if pending is not None else (gr.skip(), gr.skip(), gr.skip())
    apply.__name__ = change.__name__
    return apply


def build_app(admission: Admission, image_dir: Path | None = None) -> tuple[gr.Blocks, SeedLab]:
    """The UI for the models `admission` allows (the default one is loaded here if it is not yet)."""
    if image_dir is None:
        image_dir = Path(tempfile.mkdtemp(prefix="seedlab-png-"))
        atexit.register(shutil.rmtree, image_dir, ignore_errors=True)
    app = SeedLab(admission, image_dir)
    store, model = admission.store, app.default
    defaults = admission.defaults()
    schedulers = [(f"model default ({model.default_scheduler})", DEFAULT_SCHEDULER), *model.schedulers]
    choices = {"scheduler": schedulers, "model": store.allowed, "dtype": [store.dtype]}
    ui: dict[str, gr.components.Component] = {}

    def add(name: str, **options) -> gr.components.Component:
        ui[name] = control(name, defaults[name], choices.get(name), **options)
        return ui[name]

    with gr.Blocks(title="SeedLab", delete_cache=(3600, 3600)) as demo:
        gr.Markdown("# SeedLab\nPick seeds, make a grid, click the cell you like, then vary its prompt.")
        # A link, a recipe or a dropped image: at the top, so that the verdict and the image a link opens are the
        # first thing a visitor sees; closed (one line) otherwise.
        with gr.Accordion("Reproduce a link, a recipe or an image", open=False, elem_id="reproduction") as ui["reproduction"]:
            with gr.Row():
                with gr.Column(scale=2):
                    ui["link_box"] = gr.Textbox(label="Link or recipe (JSON)", lines=2, elem_id="link-or-recipe",
                                                placeholder="http://…/?v=1&prompt=…  or  {\"prompt\": …}")
                    with gr.Row():
                        ui["reproduce"] = gr.Button("Regenerate and compare", elem_id="reproduce")
                        # A link this server made opens from its record; this regenerates it to check.
                        ui["reverify"] = gr.Button("Re-verify by regenerating", interactive=False, elem_id="reverify")
                    ui["png_file"] = gr.File(label="Drop an image made by SeedLab or another tool (PNG, JPEG, WebP)",
                                             file_types=[".png", ".jpg", ".jpeg", ".webp"],
                                             type="filepath", elem_id="png-drop", height=120)
                    ui["png_notes"] = gr.Textbox(label="What the image restored", interactive=False, lines=3,
                                                 elem_id="png-notes")
                    with gr.Row():
                        ui["regenerate_png"] = gr.Button("Regenerate the image and compare", interactive=False,
                                                         elem_id="regenerate-png")
                        # For an image too large for this server: the same seed smaller, its noise kept.
                        ui["use_nearest"] = gr.Button("Use the nearest runnable recipe", interactive=False,
                                                      elem_id="use-nearest")
                    ui["png_nearest"] = gr.State(None)  # that recipe (JSON), until the next drop
                with gr.Column(scale=3):
                    ui["verdict_text"] = gr.Textbox(label="Verdict", interactive=False, lines=3, elem_id="verdict")
                    with gr.Row(equal_height=False):
                        ui["reproduced"] = gr.Image(label="Regenerated", type="filepath", format="png",
                                                    interactive=False, height=280, elem_id="reproduced",
                                                    elem_classes="pixelated")
                        with gr.Column():
                            ui["verdict_anchor"] = gr.Button("Make this image the anchor", interactive=False,
                                                             elem_id="verdict-anchor")
                            with gr.Accordion("Verdict (JSON)", open=False):
                                ui["verdict"] = gr.JSON(label="Verdict", elem_id="verdict-json")
        with gr.Row():
            with gr.Column(scale=2):
                ui["prompt"] = gr.Textbox(label="Prompt", value="a red circle on a blue background", lines=2,
                                          info="Ctrl+Enter generates", elem_id="prompt")
                with gr.Row(equal_height=True):
                    ui["seeds"] = gr.Textbox(label="Seeds", value="0-3", scale=4, elem_id="seeds",
                                             info='"42", "0-7" or "3, 17, 99" (0 to 18446744073709551615)')
                    # No min/max on the widget: the handler refuses a bad count with a message naming the field.
                    ui["dice_count"] = gr.Number(label="Random seeds to draw", value=4, precision=0, min_width=80,
                                                 scale=1, elem_id="dice-count")
                    ui["dice"] = gr.Button("Random", min_width=90, scale=0, elem_id="dice")  # text: no emoji font needed
                with gr.Row():  # right under the seeds: in view with the grid on a laptop screen
                    ui["generate"] = gr.Button(GENERATE, variant="primary", elem_id="generate")
                    ui["stop"] = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop")
                ui["busy_note"] = gr.HTML("", elem_id="busy-note")  # written and cleared by SHORTCUTS
                for name in MAIN:
                    add(name)
                with gr.Accordion("Seed variation, resize and more", open=False):
                    for name in MORE:
                        add(name)
                with gr.Accordion("Determinism", open=False):
                    for name in DETERMINISM:
                        add(name, interactive=name != "model" or len(store.allowed) > 1)
                    ui["environment"] = gr.JSON(app.environment(None)["environment"], label="Environment",
                                                elem_id="environment")
            with gr.Column(scale=3):
                # No preview on click: the grid stays in view while the clicked cell becomes the anchor.
                ui["grid"] = gr.Gallery(label="Grid", columns=4, object_fit="contain", format="png", type="filepath",
                                        interactive=False, allow_preview=False, height="auto", elem_id="grid",
                                        elem_classes=["pixelated", "cells"])
                cell_panel(ui)  # under the grid: a clicked cell shows where the eye is
                with gr.Accordion("Anchor", open=True):
                    ui["anchor_text"] = gr.Textbox(value=NO_ANCHOR, show_label=False, interactive=False,
                                                   elem_id="anchor")
                    ui["anchor_seed"] = gr.Textbox(value="", visible=False)  # text: a seed may pass 2**53
                    ui["anchor_fingerprint"] = gr.Textbox(label="Pixel fingerprint (sha256 of the RGB pixels)",
                                                          interactive=False, elem_id="anchor-fingerprint")
                    ui["anchor_recipe"] = gr.JSON(label="Recipe", elem_id="anchor-recipe")
                    ui["grid_link"] = gr.Textbox(label="Link to this image", buttons=["copy"], interactive=False,
                                                 elem_id="grid-link")
                ui["variations"] = gr.Textbox(label="Variations (one per line)", lines=3,
                                              placeholder=", highly realistic\n, artsy", elem_id="variations-box")
                ui["vary_button"] = gr.Button("Regenerate variations from anchor", variant="primary", elem_id="vary")
                ui["vary_note"] = gr.Textbox(show_label=False, interactive=False, visible=False, elem_id="vary-note")
                ui["vary_api"] = gr.Button(visible=False)  # the public /vary: a seed and the controls, no anchor
                ui["grid_api"] = gr.Button(visible=False)  # the public /grid (the page's Generate streams its cells)
                ui["matrix_api"] = gr.Button(visible=False)  # the public /matrix (its images at the end)
                ui["vary"] = gr.Gallery(label="Variations", columns=4, object_fit="contain", format="png",
                                        type="filepath", interactive=False, height="auto", elem_id="variations",
                                        elem_classes=["pixelated", "cells"])
                ui["variation_link"] = gr.Textbox(label="Link to the selected variation", buttons=["copy"],
                                                  interactive=False, elem_id="variation-link")
                strip_panel(ui, strength=0.1)
                matrix_panel(ui)
                history_panel(ui)
                with gr.Accordion("Results (JSON)", open=False):
                    ui["grid_results"] = gr.JSON(label="Grid results")
                    ui["vary_results"] = gr.JSON(label="Variation results")
        ui["anchor"] = gr.State(None)  # the anchor's recipe (JSON), as the user clicked it
        ui["pending"] = gr.State(None)  # the original a link or a dropped PNG names, until it is regenerated

        wire(demo, app, ui)
    return demo, app


def wire(demo: gr.Blocks, app: SeedLab, ui: dict) -> None:
    """The events: inputs and outputs by component name; /grid, /vary, /matrix, /reproduce, /reverify are public."""
    private = {"api_visibility": "private"}
    fields = [ui[name] for name in FIELDS]
    restored = [ui[name] for name in RESTORED]

    def event(trigger, function, inputs: list, outputs: list[str], **options):
        targets = [ui[name] for name in outputs]
        return trigger(by_name(function, ui, targets), inputs, targets, **options)

    # While this page generates, Generate and the vary button say so and refuse a second click; Stop works.
    # The busy step runs first and the generation follows it (events on one trigger have no set order).
    buttons = [ui["generate"], ui["vary_button"], ui["stop"]]

    def shows_cell(trigger, function, inputs: list, outputs: list[str]):
        """A click on a cell: its updates, then the Selected image panel scrolled into view."""
        event(trigger, function, inputs, outputs, queue=False, **private).then(None, js=SHOW_CELL, queue=False,
                                                                               **private)

    def guarded(triggers: list):
        return gr.on(triggers, busy, None, buttons, queue=False, show_progress="hidden", **private).then

    # Queued, so that a refused count reaches the page as a message (an unqueued error shows a bare badge).
    event(ui["dice"].click, app.dice, [ui["dice_count"], ui["seeds"]], ["seeds"], show_progress="hidden", **private)
    starts_grid = [ui["generate"].click, ui["seeds"].submit]
    event(lambda *a, **k: gr.on(starts_grid, *a, **k), app.clear_anchor, None,
          ["anchor_text", "anchor_seed", "anchor", "anchor_recipe", "anchor_fingerprint", "grid_link", "grid",
           "vary_note"], queue=False, **private)
    grid = event(guarded(starts_grid), with_fields(app.grid, ("prompt", "seeds")), [ui["prompt"], ui["seeds"], *fields],
                 ["grid", "grid_results"], api_name="page_grid", concurrency_id="generation", show_progress="minimal",
                 **private)
    # The public /grid, /vary and /matrix send their images once, at the end (see final_only).
    grid_api = event(ui["grid_api"].click, with_fields(final_only(app.grid), ("prompt", "seeds")),
                     [ui["prompt"], ui["seeds"], *fields], ["grid", "grid_results"], api_name="grid",
                     concurrency_id="generation")
    grid.then(by_name(app.environment, ui, [ui["environment"]]), ui["grid_results"], ui["environment"], queue=False,
              **private)
    anchor = ["anchor_text", "anchor_seed", "anchor", "anchor_recipe", "anchor_fingerprint", "grid_link"]
    cell = ["cell", "cell_panel", "cell_image", "cell_title", "cell_link", "cell_params", "cell_recipe",
            "cell_download", "make_anchor", "reuse_seed"]
    shows_cell(ui["grid"].select, app.select, [ui["grid_results"]], anchor + cell)
    shows_cell(ui["vary"].select, app.select_variation, [ui["vary_results"]], ["variation_link", *cell])
    event(ui["make_anchor"].click, app.make_anchor, [ui["cell"]], anchor, queue=False, **private)
    event(ui["reuse_seed"].click, app.reuse_seed, [ui["cell"]], ["seeds"], queue=False, **private).then(
        None, js=SHOW_SEEDS, queue=False, **private)  # the box it changed, in view
    event(ui["verdict_anchor"].click, app.verdict_anchor, [ui["verdict"]], anchor + cell, queue=False, **private)
    ui["verdict"].change(by_name(app.verdict_ready, ui, [ui["verdict_anchor"]]), ui["verdict"], ui["verdict_anchor"],
                         queue=False, **private)
    # The button varies the anchor's own recipe; the public /vary takes a seed and the recipe's fields.
    vary = event(guarded([ui["vary_button"].click]), with_fields(app.vary_anchor, ("prompt", "anchor", "variations")),
                 [ui["prompt"], ui["anchor"], ui["variations"], *fields],
                 ["vary", "vary_results", "variation_link", "vary_note"], concurrency_id="generation",
                 show_progress="minimal", **private)
    vary.then(by_name(app.environment, ui, [ui["environment"]]), ui["vary_results"], ui["environment"], queue=False,
              **private)
    vary_api = event(ui["vary_api"].click, with_fields(final_only(app.vary), ("prompt", "seed", "variations")),
                     [ui["prompt"], ui["anchor_seed"], ui["variations"], *fields], ["vary", "vary_results"],
                     api_name="vary", concurrency_id="generation")
    matrix = event(ui["matrix_api"].click, with_fields(final_only(app.matrix), ("prompt", "seeds", "variations")),
                   [ui["prompt"], ui["seeds"], ui["variations"], *fields], ["matrix", "matrix_results"],
                   api_name="matrix", concurrency_id="generation")

    page_matrix = event(guarded([ui["make_matrix"].click]),
                        with_fields(app.matrix_page, ("prompt", "seeds", "variations")),
                        [ui["prompt"], ui["seeds"], ui["variations"], *fields],
                        ["matrix", "matrix_results", "matrix_sheet"], api_name="page_matrix",
                        concurrency_id="generation", show_progress="minimal", **private)
    shows_cell(ui["matrix"].select, app.select_matrix, [ui["matrix_results"]], cell)
    strip = event(guarded([ui["make_strip"].click]), app.strip, [ui["anchor"], ui["strip_count"], ui["strip_strength"]],
                  ["strip", "strip_results"], concurrency_id="generation", show_progress="minimal", **private)
    shows_cell(ui["strip"].select, app.select_strip, [ui["strip_results"]], cell)

    # History: kept in this browser; every finished grid, variation set, matrix and nudge set is added to it.
    kept = ["history", "timeline", "history_export", "history_note"]
    event(demo.load, app.history.show, [ui["history"]], kept, queue=False, **private)
    for made, target in ((grid, "grid"), (vary, "vary"), (page_matrix, "matrix"), (strip, "strip")):
        made.success(by_name(app.history.remember(target), ui, [ui[name] for name in kept]),
                     [ui[f"{target}_results"], ui["history"], ui["anchor"], ui["anchor_fingerprint"]],
                     [ui[name] for name in kept], queue=False, **private)
    event(ui["timeline"].select, app.history.restore, [ui["history"], ui["timeline"]],
          [*RESTORED, "variations", *anchor, "history_view", "history_view_results", "restored_entry",
           "history_regenerate", "history_note"], queue=False, **private)
    shows_cell(ui["history_view"].select, app.select_history, [ui["history_view_results"]], cell)
    event(ui["history_import"].upload, app.history.import_, [ui["history_import"], ui["history"]], kept, **private)
    regenerate = event(guarded([ui["history_regenerate"].click]), app.history.regenerate, [ui["restored_entry"]],
                       ["history_view", "history_view_results", "history_note"], concurrency_id="generation",
                       show_progress="minimal", **private)

    # Links and PNGs: restore the controls at once, then regenerate and show the verdict.
    verdict = ["reproduced", "verdict", "verdict_text", "reverify"]
    link = event(demo.load, app.open_link, None, ["link_box", *RESTORED, *verdict, "pending", "reproduction"],
                 queue=False, **private)
    # Only a page that opened a link to regenerate is busy (Stop works meanwhile); a plain page load must not
    # flip the buttons, or a click in that moment would be refused.
    link = link.then(only_if_pending(busy), ui["pending"], buttons, queue=False, show_progress="hidden", **private)
    link = link.then(by_name(app.reproduce_linked, ui, [ui[name] for name in verdict]), ui["pending"],
                     [ui[name] for name in verdict], concurrency_id="generation", **private)
    reproduce = event(guarded([ui["reproduce"].click]), app.reproduce, [ui["link_box"]], ["reproduced", "verdict"],
                      api_name="reproduce", concurrency_id="generation")
    reverify = event(guarded([ui["reverify"].click]), app.reverify, [ui["link_box"]], ["reproduced", "verdict"],
                     api_name="reverify", concurrency_id="generation")
    after = restored + [ui["verdict_text"], ui["reverify"]]
    for reproducing in (reproduce, reverify):
        reproducing.success(by_name(app.after_reproduce, ui, after), ui["verdict"], after, queue=False, **private)
    event(ui["png_file"].upload, app.open_png, [ui["png_file"]],
          [*RESTORED, "png_notes", "pending", "regenerate_png", "png_nearest", "use_nearest"], **private)
    event(ui["use_nearest"].click, app.use_nearest, [ui["png_nearest"]], [*RESTORED, "png_notes"], queue=False,
          **private)
    png = event(guarded([ui["regenerate_png"].click]), app.reproduce_pending, [ui["pending"]], verdict,
                concurrency_id="generation", **private)
    # Stop (and a closed tab, through Gradio) ends whichever generation this session is running.
    generating = [grid, grid_api, vary, vary_api, matrix, page_matrix, strip, regenerate, link, reproduce, reverify, png]
    ui["stop"].click(app.stop, None, None, cancels=generating, queue=False, **private)
    # Every action ends ready: done or stopped (.then), or refused (.failure: Gradio skips .then after an error).
    for running in (grid, vary, page_matrix, strip, regenerate, reproduce, reverify, png):
        for ends in (running.then, running.failure):
            ends(ready, None, buttons, queue=False, show_progress="hidden", **private)
    for ends in (link.then, link.failure):
        ends(only_if_pending(ready), ui["pending"], buttons, queue=False, show_progress="hidden", **private)
    ui["stop"].click(ready, None, buttons, queue=False, show_progress="hidden", **private)


def main(argv: list[str] | None = None) -> None:
    """Load the model once, then serve the UI (host and port from GRADIO_SERVER_NAME / _PORT)."""
    parser = argparse.ArgumentParser(description="SeedLab web UI")
    parser.add_argument("--model", default=os.environ.get("SEEDLAB_MODEL", DEFAULT_MODEL),
                        help='"embedded", a local diffusers folder or a hub id (env SEEDLAB_MODEL)')
    parser.add_argument("--device", default=os.environ.get("SEEDLAB_DEVICE", "auto"),
                        help="auto, cpu, cuda, cuda:N or mps (env SEEDLAB_DEVICE)")
    parser.add_argument("--dtype", default=os.environ.get("SEEDLAB_DTYPE", "float32"), choices=DTYPES,
                        help="the precision every model is served in (env SEEDLAB_DTYPE)")
    parser.add_argument("--threads", type=int, default=os.environ.get("SEEDLAB_THREADS") or None,
                        help="torch intra-op threads per image; on a CPU 1 by default, which links record "
                             "(env SEEDLAB_THREADS)")
    parser.add_argument("--lanes", type=int, default=os.environ.get("SEEDLAB_LANES") or None,
                        help="images generated at once in this process; on a CPU cores / threads by default, on "
                             "a GPU 1 (env SEEDLAB_LANES)")
    parser.add_argument("--workers", type=int, default=os.environ.get("SEEDLAB_WORKERS") or None,
                        help="worker processes for multi-image requests, each loading the default model; by "
                             "default 0 (lanes) when its UNet calls are traced, else cores / threads on a CPU "
                             "(env SEEDLAB_WORKERS)")
    parser.add_argument("--cpu-isa", default=None, choices=cpu.LEVELS,
                        help="CPU kernels: avx2 (default) gives the same pixels on every x86-64 CPU of a vendor, "
                             "portable across Intel and AMD too (slower), native is fastest and CPU-bound; links "
                             "record it (env SEEDLAB_CPU_ISA)")
    parser.add_argument("--mcp", action="store_true", default=os.environ.get("SEEDLAB_MCP", "") in ("1", "true", "yes"),
                        help="also serve the public endpoints (grid, vary, matrix, reproduce, reverify) as MCP tools "
                             "at /gradio_api/mcp/ (env SEEDLAB_MCP=1; needs the mcp package)")
    args = parser.parse_args(argv)
    try:
        limits = Limits.from_env()
        device = resolve_device(args.device)
        # On a CPU, images run side by side at one thread each: a grid keeps every core busy, and a link
        # made here reproduces on any machine that pins one thread, whatever its core count.
        threads = args.threads or (1 if device.type == "cpu" else None)
        configure_process(threads, args.cpu_isa)
        lanes = args.lanes or default_lanes(device, torch.get_num_threads())
        workers = args.workers
        if lanes < 1 or (workers is not None and (workers < 0 or (workers and device.type != "cpu"))):
            raise ValueError(f"lanes must be a positive integer and workers 0 or more (0 on a GPU), "
                             f"got {lanes} and {workers}")
        extra = [name.strip() for name in os.environ.get("SEEDLAB_MODELS", "").split(",") if name.strip()]
        store = ModelStore([args.model, *extra], device=device, dtype=args.dtype, lanes=lanes)
        admission = Admission(store, limits, measure_speed(store.get(store.default)))
    except ValueError as error:
        parser.exit(2, f"seedlab: {error}\n")
    if workers is None:
        # A traced UNet (tracing.py) runs without the interpreter lock, so lanes keep every core busy in
        # this process (8 images: as fast as worker processes, without a model copy of ~420 MiB each).
        workers = lanes if device.type == "cpu" and not store.get(store.default).traced else 0
    demo, app = build_app(admission)
    app.cancels.max_sessions = limits.sessions
    traced = "traced UNet" if store.get(store.default).traced else "eager UNet"
    print(f"seedlab: images side by side in {lanes} lane(s) of {torch.get_num_threads()} thread(s) ({traced})"
          + (f"; {workers} worker processes starting" if workers > 1 else ""), flush=True)
    if workers > 1:  # started after the speed measurement, which they would slow; ready in the background
        app.workers = Workers(store.default, workers=workers, threads=torch.get_num_threads(), dtype=args.dtype)
        atexit.register(app.workers.close)
    # One generation at a time per device (all generating events share one concurrency group);
    # the rest wait in a bounded queue and see their position.
    demo.queue(max_size=limits.queue_size, default_concurrency_limit=limits.concurrency)
    guard = Middleware(UploadGuard, max_uploads=limits.visitor_uploads)
    # Gradio keeps a copy of every component's config per session (10,000 sessions by default: gigabytes).
    demo.launch(css=CSS, js=SHORTCUTS, max_file_size=MAX_UPLOAD, app_kwargs={"middleware": [guard]},
                state_session_capacity=limits.sessions, mcp_server=args.mcp)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so atexit (the PNG folder's cleanup) runs on SIGTERM too
    main()
