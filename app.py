"""SeedLab web UI: a thin Gradio shell over the `seedlab` backend.

Widget values become a Recipe at the edge; a ValueError from the backend becomes a gr.Error.
Run `python app.py` (honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT), or with `--model`,
`--device`, `--threads` (also SEEDLAB_MODEL, SEEDLAB_DEVICE, SEEDLAB_THREADS). SEEDLAB_MODELS
(comma-separated) allows more models beside the default one; SEEDLAB_BASE_URL sets where image
links point when the address the browser used is not the public one. Per-request limits and queue
settings come from SEEDLAB_MAX_* (see seedlab/limits.py). On a ZeroGPU Space (the `spaces` package
is importable) the generation runs inside `spaces.GPU`; elsewhere nothing changes.
"""

import argparse
import atexit
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import gradio as gr
import numpy as np
import torch
from PIL import Image

from seedlab import (
    Cancelled,
    ModelStore,
    Original,
    Recipe,
    Result,
    compare,
    configure_process,
    encode_link,
    fingerprint,
    format_seeds,
    grid_recipes,
    Progress,
    original_from_link,
    original_from_png,
    original_from_text,
    parse_seeds,
    random_seeds,
    resolve_device,
    stream,
    variation_recipes,
)
from seedlab import save_png as write_png
from seedlab.determinism import device_name
from seedlab.links import KEYS as LINK_KEYS
from seedlab.links import encode_query
from seedlab.limits import Limits
from seedlab.metadata import UnreadablePNG
from seedlab.recipe import DEFAULT_MODEL, DEFAULT_SCHEDULER, DTYPES, RNG_SOURCES

try:  # Hugging Face ZeroGPU: GPU work must run inside a function decorated with spaces.GPU
    import spaces
except ImportError:
    spaces = None

MAX_PNG_FILES = 1024  # our PNGs kept on disk (Gradio serves its own cached copies); the oldest go first
MAX_UPLOAD = "8mb"  # a dropped PNG: SeedLab's own are a few kB to a few MB
MAX_SESSIONS = 512  # cancel events kept at once; the least recently started are forgotten first
DEFAULT_BASE_URL = "http://127.0.0.1:7860/"  # where links point when a request does not say
# The controls a recipe restores (a link, a PNG), by recipe field; "seeds" is the seeds box.
CONTROL_FIELDS = ("prompt", "negative_prompt", "seeds", "num_inference_steps", "guidance_scale", "scheduler", "width",
                  "height", "rng", "deterministic", "dtype", "model")
CSS = """
.pixelated img { image-rendering: pixelated; }  /* 64x64 images, enlarged with crisp pixels */
"""

# --- handlers -------------------------------------------------------------------------------------


def on_gpu(function):
    """`function` wrapped by spaces.GPU on a ZeroGPU Space; unchanged anywhere else."""
    return spaces.GPU(duration=120)(function) if spaces is not None else function


# Every generation (a grid, a variation set, one regenerated image) is a stream of per-step events.
# On ZeroGPU the cancel event cannot reach the GPU process, so a Stop takes effect at the next image.
stream_on_gpu = on_gpu(stream)


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


def result_record(result: Result, base_url: str = DEFAULT_BASE_URL) -> dict:
    """One image's entry in the results JSON that /grid and /vary return, with its link."""
    return {
        "seed": result.recipe.seed,
        "prompt": result.recipe.prompt,
        "fingerprint": result.fingerprint,
        "link": encode_link(result.recipe, result.fingerprint, result.environment, base_url),
        "recipe": result.recipe.to_dict(),
        "environment": result.environment.to_dict(),
    }


def base_url(request: gr.Request | None) -> str:
    """Where links point: SEEDLAB_BASE_URL, else the page the browser is on, else the address it called."""
    configured = os.environ.get("SEEDLAB_BASE_URL", "").strip()
    if configured:
        return configured
    headers = {key.lower(): value for key, value in dict(getattr(request, "headers", None) or {}).items()}
    referer = headers.get("referer", "")
    if referer.startswith(("http://", "https://")):  # the page itself (Gradio's API calls live under it)
        return referer.split("#")[0].split("?")[0]
    url = urlsplit(str(getattr(request, "url", "") or ""))
    if url.scheme in ("http", "https") and url.netloc:
        scheme = headers.get("x-forwarded-proto", url.scheme).split(",")[0].strip()
        host = headers.get("x-forwarded-host", url.netloc).split(",")[0].strip()
        return f"{scheme}://{host}/"
    return DEFAULT_BASE_URL


def link_query(request: gr.Request | None) -> str | None:
    """The page's query string when it carries a link (Gradio passes the page's query to every event)."""
    params = getattr(request, "query_params", None) or {}
    items = params.multi_items() if hasattr(params, "multi_items") else list(dict(params).items())
    items = [(key, value) for key, value in items if not key.startswith("__") and key != "view"]  # Gradio's own
    if not {"v", "fp", *LINK_KEYS} & {key for key, _ in items}:
        return None
    return encode_query(items)


def open_accordion() -> gr.Accordion:
    return gr.Accordion(open=True)


def control_values(recipe: Recipe) -> tuple:
    """The controls' new values for a recipe, in CONTROL_FIELDS order (the seeds box gets the one seed)."""
    values = {**recipe.to_dict(), "seeds": str(recipe.seed)}
    return tuple(values[name] for name in CONTROL_FIELDS)


class SeedLab:
    """The app object: the model store, the PNG folder and each session's cancel event."""

    def __init__(self, store: ModelStore, image_dir: Path, limits: Limits | None = None):
        self.store = store
        self.image_dir = image_dir
        self.limits = limits or Limits()
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
        guidance_scale: float | None = None,
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
            self.limits.check_count(len(seed_list), "seeds")
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
        guidance_scale: float | None = None,
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
            self.limits.check_count(len(lines), "variations")
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
        """Make the clicked cell's seed the anchor and show its recipe, fingerprint and link."""
        if not results or not 0 <= evt.index < len(results):
            raise gr.Error("that cell has no result yet: wait for the grid to finish", print_exception=False)
        record = results[evt.index]
        return (f"**Anchor seed: {record['seed']}**", record["seed"], record["recipe"], record["fingerprint"],
                record.get("link", ""))

    def select_variation(self, results: list | None, evt: gr.SelectData) -> str:
        """Show the clicked variation's link."""
        if not results or not 0 <= evt.index < len(results):
            raise gr.Error("that cell has no result yet: wait for the variations to finish", print_exception=False)
        return results[evt.index].get("link", "")

    def open_link(self, request: gr.Request):
        """On page load: a link in the query string restores every control; its regeneration follows.

        Returns (link box, *controls, verdict text, pending original, reproduction accordion). A bad
        link is explained in the verdict text, and the app stays as it was.
        """
        query = link_query(request)
        keep = tuple(gr.skip() for _ in CONTROL_FIELDS)
        if query is None:
            return gr.skip(), *keep, gr.skip(), None, gr.skip()
        try:
            original = self.admit(original_from_link(query), strict=True)
        except ValueError as error:
            message = f"**This link cannot be opened.** {error}"
            return gr.skip(), *keep, message, None, gr.Accordion(open=True)
        link = f"{base_url(request)}?{query}"
        status = "Regenerating the linked image…"
        return link, *control_values(original.recipe), status, original, gr.Accordion(open=True)

    def reproduce_pending(self, original: Original | None, request: gr.Request = None,
                          progress: gr.Progress = gr.Progress()):
        """Regenerate what open_link or open_png left in the session state: (image, verdict, verdict text)."""
        if original is None:
            yield gr.skip(), gr.skip(), gr.skip()
            return
        with user_errors():
            try:
                for update in self.regenerate(original, request, progress):
                    if update is None:
                        yield gr.skip(), gr.skip(), gr.skip()  # hands control to Gradio, which may close us here
                        continue
                    path, verdict = update
                    yield path, verdict, verdict["summary"]
            except Cancelled:
                gr.Warning("Stopped: the image was not regenerated.")
                yield None, None, "Stopped before the image was regenerated."

    def after_reproduce(self, verdict: dict | None):
        """After /reproduce: the controls show the regenerated recipe, and the verdict its summary."""
        if not verdict:
            return *(gr.skip() for _ in CONTROL_FIELDS), gr.skip()
        return *control_values(Recipe.from_dict(verdict["recipe"])), verdict["summary"]

    def open_png(self, path: str | None):
        """A dropped PNG restores its recipe into the controls; notes say what could not be mapped.

        Returns (*controls, notes, pending original, regenerate button).
        """
        keep = tuple(gr.skip() for _ in CONTROL_FIELDS)
        if not path:
            return *keep, "", None, gr.Button(interactive=False)
        try:
            original = self.admit(original_from_png(path), strict=False)
        except UnreadablePNG as error:
            return *keep, f"**This PNG cannot be read.** {error}", None, gr.Button(interactive=False)
        except ValueError as error:  # read, but its recipe breaks a rule or a limit: the message names the field
            return *keep, str(error), None, gr.Button(interactive=False)
        notes = "\n".join(f"- {note}" for note in original.notes) or "- everything in the PNG was restored"
        text = f"**Restored from the PNG** (seed {original.recipe.seed}).\n\n{notes}"
        return *control_values(original.recipe), text, original, gr.Button(interactive=True)

    # Public API endpoint (/reproduce).

    def reproduce(self, link_or_recipe: str, request: gr.Request = None, progress: gr.Progress = gr.Progress()):
        """Regenerate a link or a recipe (JSON text) and compare: the image, and the verdict (exact, or how far off)."""
        with user_errors():
            original = self.admit(original_from_text(link_or_recipe), strict=True)
            try:
                for update in self.regenerate(original, request, progress):
                    yield update if update is not None else (gr.skip(), gr.skip())
            except Cancelled:
                gr.Warning("Stopped: the image was not regenerated.")
                yield None, None

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

    def admit(self, original: Original, strict: bool) -> Original:
        """Check an untrusted original's recipe against this server (model allowed, scheduler offered).

        strict (links, API): anything this server cannot run is an error. Not strict (a PNG, maybe
        from another tool): the server's default model or scheduler is used instead, with a note.
        """
        recipe, notes = original.recipe, list(original.notes)
        if not strict:
            if recipe.model not in self.store.allowed:
                notes.append(f"model {recipe.model} is not available on this server: {self.store.default} is used")
                recipe = recipe.replace(model=self.store.default)
            offered = self.store.get(recipe.model, recipe.dtype).schedulers
            if recipe.scheduler != DEFAULT_SCHEDULER and recipe.scheduler not in offered:
                notes.append(f"scheduler {recipe.scheduler} is not offered by this model: its default is used")
                recipe = recipe.replace(scheduler=DEFAULT_SCHEDULER)
        recipe = self.recipe(**recipe.to_dict())
        return Original(recipe, original.fingerprint, original.environment, original.pixels, tuple(notes))

    def regenerate(self, original: Original, request: gr.Request | None,
                   progress=None) -> Iterator[tuple[str, dict] | None]:
        """Generate an original's recipe again, save the PNG and compare.

        Yields None after every step, then (path, verdict with recipe and link). Cancelled like
        run(): Stop sets this session's cancel event, and closing this generator (a closed tab, a
        cancelled API call) closes the stream, so the worker stops within a step.
        """
        cancel = self.new_cancel_event(request)
        if original.pixels is None and original.fingerprint is not None:
            original = original.with_pixels(self.cached_pixels(original.fingerprint))
        model = self.store.get(original.recipe.model, original.recipe.dtype)
        for event in stream_on_gpu(model, [original.recipe], cancel=cancel):
            if isinstance(event, Progress):
                if progress is not None:
                    progress((event.done, event.total), desc="regenerating", unit="steps")
                yield None
                continue
            result = event
        verdict = compare(result, original)
        link = encode_link(result.recipe, result.fingerprint, result.environment, base_url(request))
        yield self.save_png(result), {**verdict.to_dict(), "recipe": result.recipe.to_dict(), "link": link}

    def cached_pixels(self, print_: str) -> np.ndarray | None:
        """The pixels of a recent result with this fingerprint, if its PNG is still in the bounded folder."""
        for path in self.image_dir.glob(f"*-{print_[:20]}-*.png"):
            try:
                with Image.open(path) as image:
                    pixels = np.asarray(image.convert("RGB"))
            except OSError:  # pruned while reading
                continue
            if fingerprint(pixels) == print_:
                return pixels
        return None

    def recipe(self, *, prompt, seed, negative_prompt, num_inference_steps, guidance_scale, scheduler,
               width, height, rng, deterministic, dtype, model) -> Recipe:
        """Turn widget, API or link values into a validated Recipe within this server's limits.

        Every path to a generation (grid, vary, links, PNGs, /reproduce) comes through here.
        """
        name = self.store.check(model or self.store.default)
        native_width, native_height = self.default.native_size
        recipe = Recipe(
            prompt=prompt if prompt is not None else "",
            seed=whole(seed),
            negative_prompt=negative_prompt or "",
            model=name,
            scheduler=scheduler or DEFAULT_SCHEDULER,
            num_inference_steps=whole(num_inference_steps),
            guidance_scale=self.default.default_guidance if guidance_scale is None else guidance_scale,
            width=native_width if width is None else whole(width),
            height=native_height if height is None else whole(height),
            rng=rng,
            deterministic=deterministic,
            dtype=dtype,
        )
        self.limits.check_recipe(recipe)
        self.store.get(recipe.model, recipe.dtype).make_scheduler(recipe.scheduler)
        return recipe

    def run(self, recipes: list[Recipe], captions: list[str], request: gr.Request | None, progress: gr.Progress):
        """Generate recipes one by one, streaming (gallery, results) after each image.

        The stream hands control back at every step: when Gradio closes this generator (Stop, a
        closed tab, a cancelled API call) the stream is closed and the worker stops within a step.
        """
        cancel = self.new_cancel_event(request)
        base = base_url(request)
        gallery: list[tuple[str, str]] = []
        results: list[dict] = []
        yield gallery, results  # clear the previous images at once

        with user_errors():
            model = self.store.get(recipes[0].model, recipes[0].dtype)
            events = stream_on_gpu(model, recipes, cancel=cancel)
            try:
                for event in events:
                    if isinstance(event, Progress):
                        progress((event.done, event.total), desc=f"image {len(gallery) + 1} of {len(recipes)}",
                                 unit="steps")
                        yield gr.skip(), gr.skip()  # hands control to Gradio, which may close us here
                        continue
                    gallery.append((self.save_png(event), captions[len(gallery)]))
                    results.append(result_record(event, base))
                    yield gallery, results
            except Cancelled:
                gr.Warning(f"Stopped after {len(gallery)} of {len(recipes)} images.")

    def save_png(self, result: Result) -> str:
        """Save an image as a PNG that carries its recipe (lossless, so its fingerprint still holds)."""
        # Named by pixels and recipe: equal pixels from two recipes (determinism on and off) are two files.
        recipe_key = hashlib.sha256(json.dumps(result.recipe.to_dict(), sort_keys=True).encode()).hexdigest()[:8]
        path = self.image_dir / f"seed{result.recipe.seed}-{result.fingerprint[:20]}-{recipe_key}.png"
        if not path.exists():
            write_png(result, path)
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


def build_app(store: ModelStore, limits: Limits | None = None) -> gr.Blocks:
    """The UI for the models in `store` (the default one is loaded here if it is not yet)."""
    image_dir = Path(tempfile.mkdtemp(prefix="seedlab-png-"))
    atexit.register(shutil.rmtree, image_dir, ignore_errors=True)
    app = SeedLab(store, image_dir, limits)
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
                    dice = gr.Button("🎲 Random", min_width=90, scale=0, elem_id="dice")
                with gr.Row():
                    steps = gr.Number(label="Steps", value=20, precision=0)
                    guidance = gr.Number(label="Guidance scale", value=model.default_guidance, step=0.5)
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
                with gr.Accordion("Reproduce a link, a recipe or a PNG", open=False):
                    link_box = gr.Textbox(label="Link or recipe (JSON)", lines=2, elem_id="link-or-recipe",
                                          placeholder="http://…/?v=1&prompt=…  or  {\"prompt\": …}")
                    reproduce = gr.Button("Regenerate and compare", elem_id="reproduce")
                    png_file = gr.File(label="Drop a PNG made by SeedLab (or A1111)", file_types=[".png"],
                                       type="filepath", elem_id="png-drop")
                    png_notes = gr.Markdown(elem_id="png-notes")
                    regenerate_png = gr.Button("Regenerate the PNG and compare", interactive=False,
                                               elem_id="regenerate-png")
            with gr.Column(scale=3):
                with gr.Accordion("Reproduction", open=False) as reproduction:
                    with gr.Row():
                        reproduced = gr.Image(label="Regenerated", type="filepath", format="png", interactive=False,
                                              height=256, elem_id="reproduced", elem_classes="pixelated", scale=1)
                        with gr.Column(scale=2):
                            verdict_text = gr.Markdown(elem_id="verdict")
                            with gr.Accordion("Verdict (JSON)", open=False):
                                verdict = gr.JSON(label="Verdict", elem_id="verdict-json")
                # No preview on click: the grid stays in view while the clicked cell becomes the anchor.
                grid = gr.Gallery(label="Grid", columns=4, object_fit="contain", format="png", type="filepath",
                                  interactive=False, allow_preview=False, height="auto", elem_id="grid",
                                  elem_classes="pixelated")
                with gr.Accordion("Anchor", open=True):
                    anchor_text = gr.Markdown("Anchor seed: none yet (click a cell of the grid)", elem_id="anchor")
                    anchor_seed = gr.Number(value=None, precision=0, visible=False)
                    anchor_fingerprint = gr.Textbox(label="Pixel fingerprint (sha256 of the RGB pixels)",
                                                    interactive=False, elem_id="anchor-fingerprint")
                    anchor_recipe = gr.JSON(label="Recipe", elem_id="anchor-recipe")
                    grid_link = gr.Textbox(label="Link to this image", buttons=["copy"], interactive=False,
                                           elem_id="grid-link")
                variations = gr.Textbox(label="Variations (one per line)", lines=3,
                                        placeholder=", highly realistic\n, artsy", elem_id="variations-box")
                vary = gr.Button("Regenerate variations from anchor", variant="primary", elem_id="vary")
                vary_grid = gr.Gallery(label="Variations", columns=4, object_fit="contain", format="png",
                                       type="filepath", interactive=False, height="auto", elem_id="variations",
                                       elem_classes="pixelated")
                variation_link = gr.Textbox(label="Link to the selected variation", buttons=["copy"],
                                            interactive=False, elem_id="variation-link")
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
        grid.select(app.select, grid_results, [anchor_text, anchor_seed, anchor_recipe, anchor_fingerprint, grid_link],
                    queue=False, **private)
        vary_grid.select(app.select_variation, vary_results, variation_link, queue=False, **private)
        vary_event = vary.click(
            app.vary, [prompt, anchor_seed, variations, *recipe_inputs], [vary_grid, vary_results],
            api_name="vary", concurrency_id="generation",
        )
        vary_event.then(app.environment, vary_results, environment, queue=False, **private)

        # Links and PNGs: restore the controls at once, then regenerate and show the verdict.
        controls = dict(prompt=prompt, negative_prompt=negative_prompt, seeds=seeds, num_inference_steps=steps,
                        guidance_scale=guidance, scheduler=scheduler, width=width_box, height=height_box, rng=rng,
                        deterministic=deterministic, dtype=dtype, model=model_box)
        restore = [controls[name] for name in CONTROL_FIELDS]
        pending = gr.State(None)  # the original a link or a dropped PNG names, until it is regenerated
        link_event = demo.load(app.open_link, None, [link_box, *restore, verdict_text, pending, reproduction],
                               queue=False, **private).then(app.reproduce_pending, pending,
                                                            [reproduced, verdict, verdict_text],
                                                            concurrency_id="generation", **private)
        reproduce_event = reproduce.click(app.reproduce, link_box, [reproduced, verdict], api_name="reproduce",
                                          concurrency_id="generation")
        reproduce_event.success(app.after_reproduce, verdict, [*restore, verdict_text], queue=False, **private)
        reproduce.click(open_accordion, None, reproduction, queue=False, **private)
        png_file.upload(app.open_png, png_file, [*restore, png_notes, pending, regenerate_png], **private)
        regenerate_png.click(open_accordion, None, reproduction, queue=False, **private)
        png_event = regenerate_png.click(app.reproduce_pending, pending, [reproduced, verdict, verdict_text],
                                         concurrency_id="generation", **private)
        # Stop (and a closed tab, through Gradio) ends whichever generation this session is running.
        stop.click(app.stop, None, None, cancels=[grid_event, vary_event, link_event, reproduce_event, png_event],
                   queue=False, **private)
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
        limits = Limits.from_env()
        configure_process(args.threads)
        extra = [name.strip() for name in os.environ.get("SEEDLAB_MODELS", "").split(",") if name.strip()]
        store = ModelStore([args.model, *extra], device=resolve_device(args.device))
        store.get(store.default)
    except ValueError as error:
        parser.exit(2, f"seedlab: {error}\n")
    demo = build_app(store, limits)
    # One generation at a time per device (all generating events share one concurrency group);
    # the rest wait in a bounded queue and see their position.
    demo.queue(max_size=limits.queue_size, default_concurrency_limit=limits.concurrency)
    demo.launch(css=CSS, max_file_size=MAX_UPLOAD)


if __name__ == "__main__":
    main()
