"""SeedLab web UI: a thin Gradio shell over the `seedlab` backend.

Widget values become a Recipe at the edge; a ValueError from the backend becomes a gr.Error.
Run `python app.py` (honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT), or with `--model`,
`--device`, `--threads` (also SEEDLAB_MODEL, SEEDLAB_DEVICE, SEEDLAB_THREADS).
"""

import argparse
import atexit
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import gradio as gr
import torch

from seedlab import (
    Cancelled,
    ModelStore,
    Recipe,
    Result,
    configure_process,
    format_seeds,
    grid_recipes,
    iter_generate,
    parse_seeds,
    random_seeds,
    resolve_device,
    variation_recipes,
)
from seedlab.determinism import device_name
from seedlab.recipe import DEFAULT_MODEL, DEFAULT_SCHEDULER, DTYPES, RNG_SOURCES
from seedlab.seeds import MAX_SEEDS

MAX_PNG_FILES = 1024  # our PNGs kept on disk (Gradio serves its own cached copies); the oldest go first
MAX_SESSIONS = 512  # cancel events kept at once; the least recently started are forgotten first
CSS = """
.pixelated img { image-rendering: pixelated; }  /* 64x64 images, enlarged with crisp pixels */
"""

# --- handlers -------------------------------------------------------------------------------------


@contextmanager
def user_errors() -> Iterator[None]:
    """Show a backend ValueError to the user as a gr.Error (its message names the field), no traceback."""
    try:
        yield
    except ValueError as error:
        raise gr.Error(str(error), print_exception=False) from None


def whole(value):
    """A float that is a whole number (JSON and number widgets send 20.0) as an int; anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def result_record(result: Result) -> dict:
    """One image's entry in the results JSON that /grid and /vary return."""
    return {
        "seed": result.recipe.seed,
        "prompt": result.recipe.prompt,
        "fingerprint": result.fingerprint,
        "recipe": result.recipe.to_dict(),
        "environment": result.environment.to_dict(),
    }


class SeedLab:
    """The app object: the model store, the PNG folder and each session's cancel event."""

    def __init__(self, store: ModelStore, image_dir: Path):
        self.store = store
        self.image_dir = image_dir
        self.default = store.get(store.default)  # loaded once, at start-up
        self._cancel_events: OrderedDict[str, threading.Event] = OrderedDict()
        self._lock = threading.Lock()

    # Public API endpoints (/grid and /vary): keyword names are the recipe's field names.

    def grid(
        self,
        prompt: str,
        seeds: str,
        negative_prompt: str | None = None,
        num_inference_steps: int = 20,
        guidance_scale: float = 7.5,
        scheduler: str = DEFAULT_SCHEDULER,
        width: int | None = None,
        height: int | None = None,
        rng: str = "cpu",
        deterministic: bool = False,
        dtype: str = "float32",
        model: str | None = None,
        request: gr.Request = None,
        progress: gr.Progress = gr.Progress(),
    ):
        """A grid: the prompt once per seed ("42", "0-7", "3, 17, 99"), each image captioned with its seed."""
        with user_errors():
            seed_list = parse_seeds(seeds)
            base = self.recipe(
                prompt=prompt, seed=seed_list[0], negative_prompt=negative_prompt,
                num_inference_steps=num_inference_steps, guidance_scale=guidance_scale, scheduler=scheduler,
                width=width, height=height, rng=rng, deterministic=deterministic, dtype=dtype, model=model,
            )
            recipes = grid_recipes(base, seed_list)
        yield from self.run(recipes, [f"seed {seed}" for seed in seed_list], request, progress)

    def vary(
        self,
        prompt: str,
        seed: int | None = None,
        variations: str | None = None,
        negative_prompt: str | None = None,
        num_inference_steps: int = 20,
        guidance_scale: float = 7.5,
        scheduler: str = DEFAULT_SCHEDULER,
        width: int | None = None,
        height: int | None = None,
        rng: str = "cpu",
        deterministic: bool = False,
        dtype: str = "float32",
        model: str | None = None,
        request: gr.Request = None,
        progress: gr.Progress = gr.Progress(),
    ):
        """The base prompt, then each variation (one per line) appended to it, all from the anchor seed."""
        lines = [line for line in (variations or "").splitlines() if line.strip()]  # joined as written
        with user_errors():
            if seed is None:
                raise ValueError("seed is missing: pick an anchor by clicking a cell of the grid first")
            if not lines:
                raise ValueError('variations: write at least one, one per line, such as ", highly realistic"')
            if len(lines) >= MAX_SEEDS:
                raise ValueError(f"variations: at most {MAX_SEEDS - 1} lines at once, got {len(lines)}")
            anchor = self.recipe(
                prompt=prompt, seed=seed, negative_prompt=negative_prompt,
                num_inference_steps=num_inference_steps, guidance_scale=guidance_scale, scheduler=scheduler,
                width=width, height=height, rng=rng, deterministic=deterministic, dtype=dtype, model=model,
            )
            recipes = variation_recipes(anchor, lines)
        yield from self.run(recipes, ["base prompt", *(line.strip() for line in lines)], request, progress)

    # UI-only handlers (private endpoints).

    def dice(self, count: int | None, seeds: str) -> str:
        """Draw fresh random seeds into the seeds box (shown before anything is generated)."""
        if count is None:
            try:
                count = len(parse_seeds(seeds))
            except ValueError:
                count = 4
        with user_errors():
            return format_seeds(random_seeds(whole(count)))

    def select(self, results: list | None, evt: gr.SelectData):
        """Make the clicked cell's seed the anchor and show its recipe and fingerprint."""
        if not results or not 0 <= evt.index < len(results):
            raise gr.Error("that cell has no result yet: wait for the grid to finish", print_exception=False)
        record = results[evt.index]
        return f"**Anchor seed: {record['seed']}**", record["seed"], record["recipe"], record["fingerprint"]

    def stop(self, request: gr.Request) -> None:
        """Ask this session's running generation to stop (the backend checks at every step)."""
        session = getattr(request, "session_hash", None)
        with self._lock:
            event = self._cancel_events.get(session)
        if event is not None:
            event.set()

    def environment(self, results: list | None) -> dict:
        """The environment panel: the last result's environment, or the server's before any result."""
        if results:
            return {**results[-1]["environment"], "torch_threads": torch.get_num_threads()}
        return {"device": device_name(self.store.device), "torch_threads": torch.get_num_threads()}

    # Helpers.

    def recipe(self, *, prompt, seed, negative_prompt, num_inference_steps, guidance_scale, scheduler,
               width, height, rng, deterministic, dtype, model) -> Recipe:
        """Turn widget (or API) values into a validated Recipe; the scheduler is checked against the model."""
        name = self.store.check(model or self.store.default)
        native_width, native_height = self.default.native_size
        recipe = Recipe(
            prompt=prompt if prompt is not None else "",
            seed=whole(seed),
            negative_prompt=negative_prompt or "",
            model=name,
            scheduler=scheduler or DEFAULT_SCHEDULER,
            num_inference_steps=whole(num_inference_steps),
            guidance_scale=guidance_scale,
            width=native_width if width is None else whole(width),
            height=native_height if height is None else whole(height),
            rng=rng,
            deterministic=deterministic,
            dtype=dtype,
        )
        self.store.get(recipe.model, recipe.dtype).make_scheduler(recipe.scheduler)
        return recipe

    def run(self, recipes: list[Recipe], captions: list[str], request: gr.Request | None, progress: gr.Progress):
        """Generate recipes one by one, streaming (gallery, results) after each image."""
        cancel = self.new_cancel_event(request)
        gallery: list[tuple[str, str]] = []
        results: list[dict] = []
        yield gallery, results  # clear the previous images at once

        def on_step(done: int, total: int) -> None:
            progress((done, total), desc=f"image {len(gallery) + 1} of {len(recipes)}", unit="steps")

        with user_errors():
            model = self.store.get(recipes[0].model, recipes[0].dtype)
            try:
                for result, caption in zip(iter_generate(model, recipes, progress=on_step, cancel=cancel), captions):
                    gallery.append((self.save_png(result), caption))
                    results.append(result_record(result))
                    yield gallery, results
            except Cancelled:
                gr.Warning(f"Stopped after {len(gallery)} of {len(recipes)} images.")

    def save_png(self, result: Result) -> str:
        """Save an image as PNG (lossless, so its fingerprint still holds) and return the path."""
        path = self.image_dir / f"seed{result.recipe.seed}-{result.fingerprint[:20]}.png"
        if not path.exists():
            result.image.save(path, format="PNG")
            self.prune_pngs()
        return str(path)

    def prune_pngs(self) -> None:
        """Keep the PNG folder bounded on a long-running server: delete the oldest files beyond the limit."""
        files = sorted(self.image_dir.glob("*.png"), key=lambda file: file.stat().st_mtime)
        for file in files[:-MAX_PNG_FILES]:
            file.unlink(missing_ok=True)

    def new_cancel_event(self, request: gr.Request | None) -> threading.Event:
        """A fresh cancel event for this session's new run; Stop sets it (a stopped old run keeps its own)."""
        event = threading.Event()
        session = getattr(request, "session_hash", None)
        if session:  # sessionless calls cannot be stopped
            with self._lock:
                self._cancel_events.pop(session, None)
                self._cancel_events[session] = event  # most recent last
                while len(self._cancel_events) > MAX_SESSIONS:
                    self._cancel_events.popitem(last=False)
        return event


# --- layout and wiring ----------------------------------------------------------------------------


def build_app(store: ModelStore) -> gr.Blocks:
    """The UI for the models in `store` (the default one is loaded here if it is not yet)."""
    image_dir = Path(tempfile.mkdtemp(prefix="seedlab-png-"))
    atexit.register(shutil.rmtree, image_dir, ignore_errors=True)
    app = SeedLab(store, image_dir)
    model = app.default
    width, height = model.native_size
    schedulers = [(f"model default ({model.default_scheduler})", DEFAULT_SCHEDULER), *model.schedulers]

    with gr.Blocks(title="SeedLab", delete_cache=(3600, 3600)) as demo:
        gr.Markdown("# SeedLab\nPick seeds, make a grid, click the cell you like, then vary its prompt.")
        with gr.Row():
            with gr.Column(scale=2):
                prompt = gr.Textbox(label="Prompt", value="a red circle on a blue background", lines=2,
                                    elem_id="prompt")
                negative_prompt = gr.Textbox(label="Negative prompt", elem_id="negative-prompt")
                with gr.Row(equal_height=True):
                    seeds = gr.Textbox(label="Seeds", value="0-3", info='"42", "0-7" or "3, 17, 99"', scale=4,
                                       elem_id="seeds")
                    dice_count = gr.Number(label="How many", value=4, precision=0, min_width=80, scale=1,
                                           elem_id="dice-count")
                    dice = gr.Button("🎲", min_width=60, scale=0, elem_id="dice")
                with gr.Row():
                    steps = gr.Number(label="Steps", value=20, precision=0)
                    guidance = gr.Number(label="Guidance scale", value=7.5, step=0.5)
                scheduler = gr.Dropdown(schedulers, value=DEFAULT_SCHEDULER, label="Scheduler", allow_custom_value=True)
                with gr.Row():
                    width_box = gr.Number(label="Width", value=width, precision=0, step=8)
                    height_box = gr.Number(label="Height", value=height, precision=0, step=8)
                with gr.Row():
                    generate = gr.Button("Generate grid", variant="primary", elem_id="generate")
                    stop = gr.Button("Stop", variant="stop", elem_id="stop")
                with gr.Accordion("Determinism", open=False):
                    model_box = gr.Dropdown(store.allowed, value=store.default, label="Model",
                                            interactive=len(store.allowed) > 1, allow_custom_value=True)
                    rng = gr.Dropdown(list(RNG_SOURCES), value="cpu", label="RNG source", allow_custom_value=True)
                    deterministic = gr.Checkbox(label="Full determinism", value=False)
                    dtype = gr.Dropdown(list(DTYPES), value=model.dtype, label="dtype", allow_custom_value=True)
                    environment = gr.JSON(app.environment(None), label="Environment fingerprint")
            with gr.Column(scale=3):
                grid = gr.Gallery(label="Grid", columns=4, object_fit="contain", format="png", type="filepath",
                                  interactive=False, elem_id="grid", elem_classes="pixelated")
                with gr.Accordion("Anchor", open=True):
                    anchor_text = gr.Markdown("Anchor seed: none yet (click a cell of the grid)", elem_id="anchor")
                    anchor_seed = gr.Number(value=None, precision=0, visible=False)
                    anchor_fingerprint = gr.Textbox(label="Pixel fingerprint (sha256 of the RGB pixels)",
                                                    interactive=False, elem_id="anchor-fingerprint")
                    anchor_recipe = gr.JSON(label="Recipe", elem_id="anchor-recipe")
                variations = gr.Textbox(label="Variations (one per line)", lines=3,
                                        placeholder=", highly realistic\n, artsy", elem_id="variations-box")
                vary = gr.Button("Regenerate variations from anchor", variant="primary", elem_id="vary")
                vary_grid = gr.Gallery(label="Variations", columns=4, object_fit="contain", format="png",
                                       type="filepath", interactive=False, elem_id="variations",
                                       elem_classes="pixelated")
                with gr.Accordion("Results (JSON)", open=False):
                    grid_results = gr.JSON(label="Grid results")
                    vary_results = gr.JSON(label="Variation results")

        recipe_inputs = [negative_prompt, steps, guidance, scheduler, width_box, height_box, rng, deterministic,
                         dtype, model_box]
        private = {"api_visibility": "private"}
        dice.click(app.dice, [dice_count, seeds], seeds, queue=False, **private)
        grid_event = gr.on(
            [generate.click, seeds.submit], app.grid, [prompt, seeds, *recipe_inputs], [grid, grid_results],
            api_name="grid", concurrency_id="generation",
        )
        grid_event.then(app.environment, grid_results, environment, queue=False, **private)
        grid.select(app.select, grid_results, [anchor_text, anchor_seed, anchor_recipe, anchor_fingerprint],
                    queue=False, **private)
        vary_event = vary.click(
            app.vary, [prompt, anchor_seed, variations, *recipe_inputs], [vary_grid, vary_results],
            api_name="vary", concurrency_id="generation",
        )
        vary_event.then(app.environment, vary_results, environment, queue=False, **private)
        stop.click(app.stop, None, None, cancels=[grid_event, vary_event], queue=False, **private)
    return demo


def main(argv: list[str] | None = None) -> None:
    """Load the model once, then serve the UI (host and port from GRADIO_SERVER_NAME / _PORT)."""
    parser = argparse.ArgumentParser(description="SeedLab web UI")
    parser.add_argument("--model", default=os.environ.get("SEEDLAB_MODEL", DEFAULT_MODEL),
                        help='"embedded", a local diffusers folder or a hub id (env SEEDLAB_MODEL)')
    parser.add_argument("--device", default=os.environ.get("SEEDLAB_DEVICE", "auto"),
                        help="auto, cpu, cuda, cuda:N or mps (env SEEDLAB_DEVICE)")
    parser.add_argument("--threads", type=int, default=os.environ.get("SEEDLAB_THREADS") or None,
                        help="torch intra-op threads; pin it to reproduce links across machines (env SEEDLAB_THREADS)")
    args = parser.parse_args(argv)
    try:
        configure_process(args.threads)
        store = ModelStore([args.model], device=resolve_device(args.device))
        store.get(store.default)
    except ValueError as error:
        parser.exit(2, f"seedlab: {error}\n")
    demo = build_app(store)
    demo.queue(default_concurrency_limit=1)
    demo.launch(css=CSS)


if __name__ == "__main__":
    main()
