"""SeedLab web UI: a thin Gradio shell over the `seedlab` backend (handlers in webui/).

Run `python app.py` (honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT), or with `--model`, `--device`, `--threads`,
`--lanes`, `--dtype` (also SEEDLAB_MODEL, SEEDLAB_DEVICE, SEEDLAB_THREADS, SEEDLAB_LANES, SEEDLAB_DTYPE).
SEEDLAB_MODELS (comma-separated) allows more models beside the default one; SEEDLAB_BASE_URL sets where image links
point when the address the browser used is not the public one. Per-request limits, the compute budget and queue
settings come from SEEDLAB_MAX_* and friends (see seedlab/serving/limits.py). On a ZeroGPU Space (the `spaces`
package is importable) the generation runs inside `spaces.GPU`; elsewhere nothing changes.
"""

import argparse
import atexit
import os
import shutil
import signal
import sys
import tempfile
from functools import partial
from pathlib import Path

import gradio as gr
import torch
from starlette.middleware import Middleware

from seedlab import ModelStore, configure_process, resolve_device
from seedlab.engine import cpu
from seedlab.engine.models import default_lanes
from seedlab.engine.recipe import DEFAULT_MODEL, DEFAULT_SCHEDULER, DTYPES, SPECS
from seedlab.engine.samplers.names import A1111_OWN_SAMPLERS, A1111_SAMPLERS, COMFY_SAMPLERS
from seedlab.engine.weights import checkpoint_files, library
from seedlab.scale.workers import Workers
from seedlab.serving.admission import Admission, measure_speed
from seedlab.serving.limits import Limits
from webui.cells import ANCHOR, CELL, cell_panel, nudge_panel
from webui.compare import compare_panel, travel_panel
from webui.fields import ACCORDIONS, DETERMINISM, FIELDS, MAIN, RESTORED, control
from webui.fields import with_fields as with_server_fields
from webui.handlers import NO_ANCHOR, WebApp, final_only
from webui.history import history_panel, to_store
from webui.matrix import matrix_panel
from webui.previews import finish_controls, preview_controls, wire_previews
from webui.queue_cap import cap_queued
from webui.reproduction_panel import reproduction_panel, wire_reproduction
from webui.uploads import LinkGuard, PeerStamp, UploadGuard
from webui.visitors import proxy_hops
from webui.wiring import CSS, GENERATE, PRIVATE, SHOW_ANCHOR, SHOW_SEEDS, Wiring, by_name, page_js, ready, spellings

# What the variations box offers as an example: words the embedded model knows, so the example keeps the seed's shape.
EXAMPLE_PROMPT, EXAMPLE_VARIATIONS = "a red circle on a blue background", ", large\n, on a yellow background"
MAX_UPLOAD = "4mb"  # a dropped PNG: SeedLab's own are a few kB to a few MB at the default size limit
# Long: the page's layout, read top to bottom as the page shows it.
def build_app(admission: Admission, image_dir: Path | None = None) -> tuple[gr.Blocks, WebApp]:
    """The UI for the models `admission` allows (the default one is loaded here if it is not yet)."""
    if image_dir is None:
        image_dir = Path(tempfile.mkdtemp(prefix="seedlab-png-"))
        atexit.register(shutil.rmtree, image_dir, ignore_errors=True)
    app = WebApp(admission, image_dir)
    store, model = admission.store, app.default
    defaults = admission.defaults()
    if model.info.a1111_prompts:  # prompts typed on the page are read as A1111 reads them (links, API: plain)
        defaults["prompt_syntax"] = "a1111"
    a1111, own = (list(A1111_SAMPLERS), list(A1111_OWN_SAMPLERS)) if model.info.a1111 else ([], [])  # run as A1111
    eps = model.info.a1111 and model.info.scheduler_config.get("prediction_type", "epsilon") == "epsilon"
    comfy = [(f"{name} (ComfyUI)", name) for name in COMFY_SAMPLERS] if eps else []  # ComfyUI's: eps models
    a1111 = [(f"{name} (A1111)", name) for name in a1111]
    schedulers = [(f"model default ({model.default_scheduler})", DEFAULT_SCHEDULER), *a1111, *own, *comfy,
                  *model.schedulers]
    hires = [("same as Scheduler", ""), *a1111, *comfy]
    choices = {"scheduler": schedulers, "model": store.allowed, "dtype": [store.dtype], "hires_sampler": hires}
    app.spellings = spellings([*schedulers, *hires])  # typed + Enter picks the sampler of that exact name
    ui: dict[str, gr.components.Component] = {}

    def add(name: str, **options) -> gr.components.Component:
        ui[name] = control(name, defaults[name], choices.get(name), **options)
        return ui[name]

    with gr.Blocks(title="SeedLab", delete_cache=(3600, 3600)) as demo:
        gr.Markdown("# SeedLab\nPick seeds, make a grid, click the cell you like, then vary its prompt.")
        reproduction_panel(ui)  # at the top: what a link opens is the first thing a visitor sees
        with gr.Row():
            with gr.Column(scale=2):
                unconditional = store.info(store.default).unconditional  # DDIM, DDPM: no prompt at all
                ui["prompt"] = gr.Textbox(
                    label="Prompt", value="" if unconditional else EXAMPLE_PROMPT, lines=2,
                    info="this model is unconditional: leave it empty (Ctrl+Enter generates)" if unconditional
                    else "Ctrl+Enter generates; read with A1111's syntax: (word:1.2), [word], BREAK (Prompt syntax)"
                    if model.info.a1111_prompts else "Ctrl+Enter generates", elem_id="prompt")
                with gr.Row(equal_height=True):
                    ui["seeds"] = gr.Textbox(label="Seeds", value="0-3", scale=4, elem_id="seeds",
                                             info='"42", "0-7" or "3, 17, 99" (0 to 18446744073709551615; -1: '
                                                  'a random seed)')
                    # No min/max on the widget: the handler refuses a bad count with a message naming the field.
                    ui["dice_count"] = gr.Number(label="Random seeds to draw", value=4, precision=0, min_width=80,
                                                 scale=1, elem_id="dice-count")
                    ui["dice"] = gr.Button("Random", min_width=90, scale=0, elem_id="dice")  # text: needs no emoji font
                with gr.Row():  # right under the seeds: in view with the grid on a laptop screen
                    ui["generate"] = gr.Button(GENERATE, variant="primary", elem_id="generate")
                    preview_controls(ui, add)
                    ui["stop"] = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop")
                ui["busy_note"] = gr.HTML("", elem_id="busy-note")  # written and cleared by the page script (webui/page.js)
                for name in MAIN:  # a menu of models only where there is more than one
                    add(name, **({"interactive": len(store.allowed) > 1} if name == "model" else {}))
                for title, names, elem_id in ACCORDIONS:  # the fields by what they are for, closed
                    with gr.Accordion(title, open=False, elem_id=elem_id):
                        for name in names:
                            add(name, **({"info": lora_help()} if name == "loras" else {}))
                with gr.Accordion("Determinism", open=False):
                    for name in DETERMINISM:
                        add(name)
                    ui["environment"] = gr.JSON(app.environment(None)["environment"], label="Environment",
                                                elem_id="environment")
            with gr.Column(scale=3):
                # No preview on click: the grid stays in view while the clicked cell becomes the anchor.
                ui["grid"] = gr.Gallery(label="Grid", columns=4, object_fit="contain", format="png", type="filepath",
                                        interactive=False, allow_preview=False, height="auto", elem_id="grid",
                                        elem_classes=["pixelated", "cells"])
                finish_controls(ui)
                cell_panel(ui)  # under the grid: a clicked cell shows where the eye is
                with gr.Accordion("Anchor", open=True):
                    ui["anchor_text"] = gr.Textbox(value=NO_ANCHOR, label="Anchor", show_label=False, interactive=False,
                                                   elem_id="anchor")
                    ui["anchor_seed"] = gr.Textbox(value="", visible=False)  # text: a seed may pass 2**53
                    ui["anchor_fingerprint"] = gr.Textbox(label="Pixel fingerprint (sha256 of the RGB pixels)",
                                                          interactive=False, elem_id="anchor-fingerprint")
                    ui["anchor_recipe"] = gr.JSON(label="Recipe", elem_id="anchor-recipe")
                    ui["grid_link"] = gr.Textbox(label="Link to this image", buttons=["copy"], interactive=False,
                                                 elem_id="grid-link")
                ui["variations"] = gr.Textbox(label="Variations (one per line)", lines=3,
                                              placeholder=EXAMPLE_VARIATIONS, elem_id="variations-box")
                ui["vary_button"] = gr.Button("Regenerate variations from anchor", variant="primary", elem_id="vary")
                ui["vary_note"] = gr.Textbox(show_label=False, interactive=False, visible=False, elem_id="vary-note")
                # The public /vary (a seed and the controls, no anchor), /grid (the page's Generate streams its
                # cells), /matrix, /plot and /travel (their images at the end).
                for name in ("vary_api", "grid_api", "matrix_api", "plot_api", "travel_api"):
                    ui[name] = gr.Button(visible=False)
                ui["vary"] = gr.Gallery(label="Variations", columns=4, object_fit="contain", format="png",
                                        type="filepath", interactive=False, height="auto", elem_id="variations",
                                        elem_classes=["pixelated", "cells"])
                ui["variation_link"] = gr.Textbox(label="Link to the selected variation", buttons=["copy"],
                                                  interactive=False, elem_id="variation-link")
                nudge_panel(ui, strength=0.1)
                for panel in (matrix_panel, compare_panel, travel_panel, history_panel):
                    panel(ui)
                with gr.Accordion("Results (JSON)", open=False):
                    ui["grid_results"] = gr.JSON(label="Grid results")
                    ui["vary_results"] = gr.JSON(label="Variation results")
        ui["anchor"] = gr.State(None)  # the anchor's recipe (JSON), as the user clicked it
        ui["pending"] = gr.State(None)  # the original a link or a dropped PNG names, until it is regenerated
        wire(demo, app, ui)
    app.ui = ui  # the page's components by name (the wiring's names; tests walk them)
    return demo, app


# Long: every event of the page in one place, in the order a user meets them.
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
                 [ui["prompt"], ui["seeds"], *fields], ["grid", "grid_results", *ANCHOR, "vary_note"],
                 api_name="page_grid", concurrency_id="generation", show_progress="minimal", **PRIVATE)
    # The public /grid, /vary and /matrix send their images once, at the end (see final_only).
    grid_api = event(ui["grid_api"].click, with_fields(final_only(app.grid), ("prompt", "seeds")),
                     [ui["prompt"], ui["seeds"], *fields], ["grid", "grid_results"], api_name="grid",
                     concurrency_id="generation")
    grid.then(by_name(app.environment, ui, [ui["environment"]]), ui["grid_results"], ui["environment"], queue=False,
              **PRIVATE)
    shows_cell(ui["grid"].select, app.select, [ui["grid_results"]], [*ANCHOR, *CELL])
    shows_cell(ui["vary"].select, app.select_variation, [ui["vary_results"]], ["variation_link", *CELL])
    event(ui["make_anchor"].click, app.make_anchor, [ui["cell"]], list(ANCHOR), queue=False, **PRIVATE).then(
        None, js=SHOW_ANCHOR, queue=False, **PRIVATE)  # the anchor in view: the variations start there
    event(ui["reuse_seed"].click, app.reuse_seed, [ui["cell"]], ["seeds"], queue=False, **PRIVATE).then(
        None, js=SHOW_SEEDS, queue=False, **PRIVATE)  # the box it changed, in view
    wiring.says_vary_note(app.anchor_prompt_note)  # which prompt the vary button varies, before the run
    # The button varies the anchor's own recipe; the public /vary takes a seed and the recipe's fields.
    vary = event(guarded([ui["vary_button"].click], "variations"),
                 with_fields(app.vary_anchor, ("prompt", "anchor", "variations")),
                 [ui["prompt"], ui["anchor"], ui["variations"], *fields],
                 ["vary", "vary_results", "variation_link", "vary_note"], concurrency_id="generation",
                 show_progress="minimal", **PRIVATE)
    vary.then(by_name(app.environment, ui, [ui["environment"]]), ui["vary_results"], ui["environment"], queue=False,
              **PRIVATE)
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
                        concurrency_id="generation", show_progress="minimal", **PRIVATE)
    shows_cell(ui["matrix"].select, app.select_matrix, [ui["matrix_results"]], list(CELL), floating=True)
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
    nudges = event(guarded([ui["make_nudges"].click]), app.nudge, [ui["anchor"], ui["nudge_count"],
                                                                  ui["nudge_strength"]],
                   ["nudges", "nudges_results"], concurrency_id="generation", show_progress="minimal", **PRIVATE)
    shows_cell(ui["nudges"].select, app.select_nudge, [ui["nudges_results"]], list(CELL), floating=True)

    # History: kept in this browser; every finished grid, variation set, matrix, nudge set, plot and travel.
    kept = ["history", "timeline", "history_export", "history_note"]
    event(demo.load, to_store(app.history.show), [ui["history"]], kept, queue=False, **PRIVATE)
    for made, target in ((grid, "grid"), (vary, "vary"), (page_matrix, "matrix"), (nudges, "nudges"),
                         (page_plot, "plot"), (page_travel, "travel")):
        made.success(by_name(to_store(app.history.remember(target)), ui, [ui[name] for name in kept]),
                     [ui[f"{target}_results"], ui["history"], ui["anchor"], ui["anchor_fingerprint"]],
                     [ui[name] for name in kept], queue=False, **PRIVATE)
    # Queued (one at a time, and within each visitor's cap on waiting requests): a restore checks every cell the
    # browser sends, so unqueued, parallel restores could take every worker thread from the other visitors.
    event(ui["timeline"].select, app.history.restore, [ui["history"], ui["timeline"]],
          [*RESTORED, "variations", *ANCHOR, "history_view", "history_view_results", "restored_entry",
           "history_regenerate", "history_note"], concurrency_id="history", show_progress="hidden", **PRIVATE)
    shows_cell(ui["history_view"].select, app.select_history, [ui["history_view_results"]], list(CELL), floating=True)
    event(ui["history_import"].upload, to_store(app.history.import_), [ui["history_import"], ui["history"]], kept,
          **PRIVATE)
    regenerate = event(guarded([ui["history_regenerate"].click]), app.history.regenerate, [ui["restored_entry"]],
                       ["history_view", "history_view_results", "history_note"], concurrency_id="generation",
                       show_progress="minimal", **PRIVATE)

    reproducing = wire_reproduction(wiring, demo, app.reproduction)  # links, recipes and dropped images (at the top)
    # Stop (and a closed tab, through Gradio) ends whichever generation this session is running.
    generating = [grid, grid_api, vary, vary_api, matrix, page_matrix, page_plot, plot_api, page_travel, travel_api,
                  nudges, regenerate, *reproducing, *wire_previews(wiring, app, ui, with_fields, fields, kept)]
    ui["stop"].click(app.stop, None, ui["busy_note"], cancels=generating, queue=False, **PRIVATE)
    wiring.settles(grid, vary, page_matrix, page_plot, page_travel, nudges, regenerate)
    stopped = ui["stop"].click(ready, None, wiring.buttons, queue=False, show_progress="hidden", **PRIVATE)
    # A stopped generation keeps its finished cells: they go to History too.
    stopped.then(by_name(to_store(app.history.remember_stopped), ui, [ui[name] for name in kept]),
                 [ui[name] for name in ("history", "anchor", "anchor_fingerprint", "grid_results", "vary_results",
                                        "matrix_results", "nudges_results", "plot_results", "travel_results")],
                 [ui[name] for name in kept], queue=False, **PRIVATE)


def lora_help() -> str:
    """The LoRA field's help with the LoRAs the models folder holds (read when the page is built)."""
    names = sorted(library.files("lora"), key=str.lower)
    if library.models_dir() is None:
        where = f"no models folder is set (--models-dir or {library.ENV}), so none can be used"
    elif not names:
        where = f"the models folder {library.models_dir().name}/ holds none (Lora/ or loras/)"
    else:
        shown = ", ".join(names[:40]) + (f" and {len(names) - 40} more" if len(names) > 40 else "")
        where = f"in the models folder: {shown}"
    return f"{SPECS['loras'].help}; {where}"


def build_parser() -> argparse.ArgumentParser:
    """The app's options, each with its environment variable (a Space sets those)."""
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
    parser.add_argument("--models-dir", default=os.environ.get(library.ENV) or None,
                        help="a models folder laid out as A1111's models/ or ComfyUI's: its checkpoints are offered "
                             "as models, and the LoRAs and embeddings prompts name are read from it "
                             f"(env {library.ENV})")
    parser.add_argument("--native-retry", action="store_true",
                        default=os.environ.get("SEEDLAB_NATIVE_RETRY", "") in ("1", "true", "yes"),
                        help="retry an old link or PNG that records no CPU baseline with native kernels in a worker "
                             "process of its own, priced with the process start; off on a public server (env "
                             "SEEDLAB_NATIVE_RETRY=1)")
    parser.add_argument("--mcp", action="store_true", default=os.environ.get("SEEDLAB_MCP", "") in ("1", "true", "yes"),
                        help="also serve the public endpoints (grid, vary, matrix, plot, travel, reproduce, reverify, "
                             "preview, finish) as MCP tools at /gradio_api/mcp/ (env SEEDLAB_MCP=1; needs mcp)")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Load the model once, then serve the UI (host and port from GRADIO_SERVER_NAME / _PORT)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        limits, _ = Limits.from_env(), proxy_hops()  # a bad SEEDLAB_PROXY_HOPS stops the app here, named
        device = resolve_device(args.device)
        # On a CPU, images run side by side at one thread each: a grid keeps every core busy, and a link
        # made here reproduces on any machine that pins one thread, whatever its core count.
        threads = args.threads or (1 if device.type == "cpu" else None)
        configure_process(threads, args.cpu_isa)
        library.configure(args.models_dir)
        lanes = args.lanes or default_lanes(device, torch.get_num_threads())
        workers = args.workers
        if lanes < 1 or (workers is not None and (workers < 0 or (workers and device.type != "cpu"))):
            raise ValueError(f"lanes must be a positive integer and workers 0 or more (0 on a GPU), "
                             f"got {lanes} and {workers}")
        extra = [name.strip() for name in os.environ.get("SEEDLAB_MODELS", "").split(",") if name.strip()]
        extra += checkpoint_files.checkpoint_names() if library.models_dir() is not None else []
        store = ModelStore([args.model, *extra], device=device, dtype=args.dtype, lanes=lanes)
        admission = Admission(store, limits, measure_speed(store.get(store.default)), args.native_retry)
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
    cap_queued(demo, limits.visitor_queued)  # no visitor fills the queue for the others
    local_free = not os.environ.get("SPACE_ID") and not os.environ.get(Limits.setting("visitor_uploads"))
    guards = [Middleware(PeerStamp), Middleware(LinkGuard),
              Middleware(UploadGuard, max_uploads=limits.visitor_uploads, local_free=local_free)]
    # Gradio keeps a copy of every component's config per session (10,000 sessions by default: gigabytes).
    demo.launch(css=CSS, js=page_js(app.spellings), max_file_size=MAX_UPLOAD, app_kwargs={"middleware": guards},
                state_session_capacity=limits.sessions, mcp_server=args.mcp)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so atexit (the PNG folder's cleanup) runs on SIGTERM too
    main()
