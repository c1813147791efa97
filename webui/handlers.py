"""The app's handlers: widget values in, updates out, keyed by component name (never by position).

Every value from the page, the API, a link or a PNG goes through `seedlab.admission` before it runs;
a ValueError becomes a gr.Error whose message names fields by their visible labels. Text that a
visitor controls (a link's values, a PNG's words, an error quoting them) is shown in plain-text
components, never as Markdown or HTML.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from pathlib import Path

import gradio as gr
import torch

from seedlab import Cancelled, Original, Progress, Recipe, Result, compare, encode_link, stream
from seedlab.admission import Admission
from seedlab.determinism import device_name
from seedlab.metadata import UnreadablePNG
from seedlab.reproduction import original_from_link, original_from_png, original_from_text
from seedlab.recipe import DEFAULT_SCHEDULER, SPECS
from seedlab.seeds import format_seeds, parse_seeds, random_seeds
from seedlab.workers import Workers
from webui.cells import anchor_updates, cell_record, checked, picked, show_cell, verdict_record
from webui.fields import FIELDS, label_message, restore, user_errors
from webui.files import CancelRegistry, PngStore, ResultRecord
from webui.history import History
from webui.matrix import matrix_page
from webui.requests import DEFAULT_BASE_URL, base_url, link_query, visitor

try:  # Hugging Face ZeroGPU: GPU work must run inside a function decorated with spaces.GPU
    import spaces
except ImportError:
    spaces = None

# What a generation sends the page while it runs costs CPU that the images need (the page renders every
# update on the same cores). Progress at most every PROGRESS_INTERVAL_S; finished cells at most every
# IMAGES_INTERVAL_S (cells that finish together, one per lane, arrive in one update; the last at once).
# An 8-image grid from the page's Generate to its last cell (bench/bench_page.py, least disturbed of 3):
# 1.37x one batched diffusers call with progress every 0.25 s and every cell sent alone, 1.26x with
# these settings.
PROGRESS_INTERVAL_S = 1.0
IMAGES_INTERVAL_S = 0.2
NO_ANCHOR = "Anchor seed: none yet (click a cell of the grid)"


def shown(text: str, limit: int = 80) -> str:
    """A visitor's text quoted in a message, cut to `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def on_gpu(function):
    """`function` wrapped by spaces.GPU on a ZeroGPU Space; unchanged anywhere else."""
    return spaces.GPU(duration=120)(function) if spaces is not None else function


# Every generation is a stream of per-step events. On ZeroGPU the cancel event cannot reach the GPU
# process, so a Stop takes effect at the next image.
stream_on_gpu = on_gpu(stream)


def result_record(result: Result, base_url: str = DEFAULT_BASE_URL) -> dict:
    """One image's entry in the results JSON of /grid and /vary; seeds are text (exact in any JSON reader)."""
    return cell_record(result.recipe, result.fingerprint, result.environment, base_url)


def final_only(function):
    """A generating handler for API clients: progress ticks while it runs, the images once, at the end.

    gradio_client downloads every file of every streamed update again, so an 8-image grid streamed
    image by image costs it 36 downloads and seconds; the page keeps its image-by-image updates.
    """
    @functools.wraps(function)
    def handler(*args):
        last: dict = {}
        for update in function(*args):
            if update:
                last = {**last, **update}
            else:
                yield update  # {}: a progress tick, where Gradio may also close us
        if last:
            yield last
    return handler


def image_kind(path: str) -> str:
    """What a dropped file is, by its first bytes: "PNG", "JPEG", "WebP" (else "image")."""
    try:
        with open(path, "rb") as file:
            head = file.read(12)
    except OSError:
        return "image"
    if head.startswith(b"\x89PNG"):
        return "PNG"
    if head.startswith(b"\xff\xd8"):
        return "JPEG"
    return "WebP" if head[:4] == b"RIFF" and head[8:12] == b"WEBP" else "image"


def describe_size(recipe: Recipe) -> str:
    """A nearest recipe in words: "seed 7 at 704x1024, 20 steps, the noise drawn at 832x1216"."""
    text = f"seed {recipe.seed} at {recipe.width}x{recipe.height}, {recipe.num_inference_steps} steps"
    if recipe.seed_resize_from is not None:
        text += f", the noise drawn at {recipe.seed_resize_from[0]}x{recipe.seed_resize_from[1]} (seed resize from)"
    return text


class SeedLab:
    """The app object: admission (models, limits, budget), the PNG folder and the sessions' cancel events."""

    def __init__(self, admission: Admission, image_dir: Path):
        self.admission = admission
        self.store = admission.store
        self.pngs = PngStore(image_dir)
        self.record = ResultRecord()  # what this server made: a link it rendered opens without regenerating
        self.workers: Workers | None = None  # worker processes for multi-image requests, once started
        self.cancels = CancelRegistry()
        self.default = self.store.get(self.store.default)  # loaded once, at start-up
        self.history = History(self)  # the browser-kept history's handlers

    # Public API endpoints (/grid, /vary, /reproduce).

    def grid(self, values: dict, request: gr.Request | None = None, progress=None):
        """A grid: the prompt once per seed ("42", "0-7", "3, 17, 99"), each image captioned with its seed."""
        values = dict(values)
        with user_errors():
            recipes = self.admission.grid(values, values.pop("seeds", None) or "")
            self.admission.charge(recipes, visitor(request))
        yield from self.run(recipes, [f"seed {recipe.seed}" for recipe in recipes], request, progress, "grid")

    def vary(self, values: dict, request: gr.Request | None = None, progress=None):
        """The base prompt, then each variation (one per line) appended to it, all from the anchor seed."""
        values = dict(values)
        lines = [line for line in str(values.pop("variations", None) or "").splitlines() if line.strip()]
        with user_errors():
            if values.get("seed") in (None, ""):
                raise ValueError("Seed is missing: pick an anchor by clicking a cell of the grid first")
            recipes = self.admission.variations(values, lines)
            self.admission.charge(recipes, visitor(request))
        yield from self.run(recipes, ["base prompt", *(line.strip() for line in lines)], request, progress, "vary")

    def matrix(self, values: dict, request: gr.Request | None = None, progress=None):
        """Seeds x variations: a row per seed, its cells the base prompt then each variation; each cell == solo."""
        values = dict(values)
        seeds = values.pop("seeds", None) or ""
        lines = [line for line in str(values.pop("variations", None) or "").splitlines() if line.strip()]
        with user_errors():
            rows = self.admission.grid(values, seeds)  # the seeds, within the image limit
            recipes = [cell for row in rows for cell in self.admission.variations({**values, "seed": row.seed}, lines)]
            limits = self.admission.limits
            if len(recipes) > limits.max_images:
                raise ValueError(f"matrix: this server makes at most {limits.max_images} images per request "
                                 f"({limits.setting('max_images')}), got {len(rows)} seeds x {len(lines) + 1} "
                                 f"columns = {len(recipes)}")
            self.admission.charge(recipes, visitor(request))
        columns = ["base prompt", *(line.strip() for line in lines)]
        captions = [f"seed {row.seed} · {column}" for row in rows for column in columns]
        yield from self.run(recipes, captions, request, progress, "matrix")

    def reproduce(self, link_or_recipe: str, request: gr.Request | None = None, progress=None):
        """Reproduce a link or a recipe (JSON text) and compare: the image, and the verdict (exact, or how far off).

        An image this server made recently is served from its record (the verdict says so and when it
        was made); /reverify always regenerates.

        Args:
            link_or_recipe: a SeedLab link (http://…/?v=1&prompt=…&fp=…) or a recipe as JSON text ({"prompt": …})
        """
        yield from self.reproduce_text(link_or_recipe, request, progress, from_record=True)

    def reverify(self, link_or_recipe: str, request: gr.Request | None = None, progress=None):
        """Regenerate a link or a recipe (JSON text) now, even if this server has it on record, and compare.

        Args:
            link_or_recipe: a SeedLab link (http://…/?v=1&prompt=…&fp=…) or a recipe as JSON text ({"prompt": …})
        """
        yield from self.reproduce_text(link_or_recipe, request, progress, from_record=False)

    def reproduce_text(self, link_or_recipe: str, request, progress, from_record: bool):
        with user_errors():
            original = self.admission.original(original_from_text(link_or_recipe), strict=True)
            if not (from_record and self.record.find(original.recipe)):
                self.admission.charge([original.recipe], visitor(request))
        yield from self.regenerate(original, request, progress, from_record)

    # UI-only handlers (private endpoints).

    def dice(self, count, seeds: str) -> dict:
        """Draw fresh random seeds into the seeds box (shown before anything is generated)."""
        if count is None:
            try:
                count = len(parse_seeds(seeds))
            except ValueError:
                count = 4
        with user_errors():
            count = int(count) if isinstance(count, float) and count.is_integer() else count
            return {"seeds": format_seeds(random_seeds(count))}

    def select(self, results: list | None, evt: gr.SelectData) -> dict:
        """A grid click: the cell's recipe becomes the anchor, and the cell is shown large with its actions."""
        record = picked(results, evt.index, "grid")
        return {**anchor_updates(record), **show_cell(record, self.record)}

    def strip(self, anchor: dict | None, count, strength, request: gr.Request | None = None,
              progress=gr.Progress()):
        """Nudges: the anchor's recipe with fresh random variation seeds at a strength; each cell exact and linkable."""
        if not anchor:
            raise gr.Error("Pick an anchor first: click a cell of the grid", print_exception=False)
        with user_errors():
            count = int(count) if isinstance(count, float) and count.is_integer() else count
            most = self.admission.limits.max_images
            if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= most:
                raise ValueError(f"Nudges must be a whole number from 1 to {most}, got {shown(str(count), 20)}")
            recipes = self.admission.strip(anchor, random_seeds(count), strength)
            self.admission.charge(recipes, visitor(request))
        captions = [f"variation seed {r.variation_seed} · strength {r.variation_strength:g}" for r in recipes]
        yield from self.run(recipes, captions, request, progress, "strip")

    def select_strip(self, results: list | None, evt: gr.SelectData) -> dict:
        """A nudge click: the cell shown large with its actions ("Make anchor" goes on from it)."""
        return show_cell(picked(results, evt.index, "nudges"), self.record)

    def select_matrix(self, results: list | None, evt: gr.SelectData) -> dict:
        """A matrix click: the cell shown large with its actions."""
        return show_cell(picked(results, evt.index, "matrix"), self.record)

    def select_history(self, results: list | None, evt: gr.SelectData) -> dict:
        """A click in a restored history entry: the cell shown large with its actions."""
        return show_cell(picked(results, evt.index, "history entry"), self.record)

    def matrix_page(self, values: dict, request: gr.Request | None = None, progress=None):
        """The page's matrix: cells as they finish, then the labelled sheet PNG to download."""
        yield from matrix_page(self, values, request, progress)

    def make_anchor(self, cell: dict | None) -> dict:
        """The selected image (any gallery's cell, or a regenerated image) becomes the anchor."""
        if not cell:
            raise gr.Error("Select an image first: click a cell of the grid or the variations", print_exception=False)
        return anchor_updates(checked(cell))

    def reuse_seed(self, cell: dict | None) -> dict:
        """The selected image's seed goes back into the seeds box."""
        if not cell:
            raise gr.Error("Select an image first: click a cell of the grid or the variations", print_exception=False)
        return {"seeds": checked(cell)["seed"]}

    def verdict_anchor(self, verdict: dict | None) -> dict:
        """The regenerated image (a link, a reproduction, a dropped PNG) becomes the anchor and the selection."""
        record = verdict_record(verdict)
        if record is None:
            raise gr.Error("Nothing was regenerated yet: open a link, paste a recipe or drop an image first",
                           print_exception=False)
        return {**anchor_updates(record), **show_cell(record, self.record)}

    def verdict_ready(self, verdict: dict | None) -> dict:
        """"Make this image the anchor" works once an image was regenerated."""
        return {"verdict_anchor": gr.Button(interactive=verdict_record(verdict) is not None)}

    def clear_anchor(self) -> dict:
        """A new grid: no cell is selected and no anchor is shown until the user picks one of the new cells."""
        return {"anchor_text": NO_ANCHOR, "anchor_seed": "", "anchor": None, "anchor_recipe": None,
                "anchor_fingerprint": "", "grid_link": "", "grid": gr.Gallery(selected_index=None),
                "vary_note": gr.Textbox(value="", visible=False)}

    def vary_anchor(self, values: dict, request: gr.Request | None = None, progress=None):
        """The vary button: variations of the anchor's own recipe, saying so when the controls now differ."""
        anchor = values.pop("anchor")
        if not anchor:
            raise gr.Error("Pick an anchor first: click a cell of the grid", print_exception=False)
        note = self.anchor_note(Recipe.from_dict(anchor), values)
        first = {"variation_link": "", "vary": gr.Gallery(value=[], selected_index=None),
                 "vary_note": gr.Textbox(value=note, visible=bool(note))}
        for update in self.vary({**anchor, "variations": values.get("variations")}, request, progress):
            yield {**update, **first} if first else update
            first = None

    def anchor_note(self, anchor: Recipe, values: dict) -> str:
        """A plain-text line when the prompt box or a setting no longer matches the anchor's recipe; else ""."""
        changes = []
        if (values.get("prompt") or "") != anchor.prompt:
            changes.append(f"the prompt box now says {shown(values.get('prompt') or '')}")
        try:
            current = self.admission.recipe({**{name: values.get(name) for name in FIELDS},
                                             "prompt": anchor.prompt, "seed": anchor.seed})
        except ValueError:
            changes.append("the settings now hold values that cannot be used")
        else:
            if current.scheduler == DEFAULT_SCHEDULER:  # results record the class the model's default resolved to
                current = current.replace(scheduler=self.store.info(current.model).default_scheduler)
            for name in FIELDS:
                now, then = getattr(current, name), getattr(anchor, name)
                if now != then:
                    spec = SPECS[name]
                    changes.append(f"{spec.label} is now {shown(spec.to_text(now))} "
                                   f"(the anchor's: {shown(spec.to_text(then))})")
        if not changes:
            return ""
        return (f"Variations start from the anchor's recipe (prompt {shown(anchor.prompt)}, seed {anchor.seed}); "
                + "; ".join(changes) + ".")

    def select_variation(self, results: list | None, evt: gr.SelectData) -> dict:
        """Show the clicked variation's link, and the cell large with its actions ("Make anchor" among them)."""
        record = picked(results, evt.index, "variations")
        return {"variation_link": record.get("link", ""), **show_cell(record, self.record)}

    def open_link(self, request: gr.Request) -> dict:
        """On page load: a link in the query string restores every control; its regeneration follows."""
        query = link_query(request)
        if query is None:
            return {"pending": None}
        try:
            original = self.admission.original(original_from_link(query), strict=True)
        except ValueError as error:
            return {"verdict_text": f"This link cannot be opened. {label_message(error)}", "pending": None,
                    "reproduction": gr.Accordion(open=True)}
        opened = {"link_box": f"{base_url(request)}?{query}", **restore(original.recipe),
                  "reproduction": gr.Accordion(open=True)}
        served = self.from_record(original, request)  # at once, not queued behind other visitors' generations
        if served is not None:
            return {**opened, **served, "pending": None}
        return {**opened, "verdict_text": "Regenerating the linked image…", "pending": original}

    def open_png(self, path: str | None) -> dict:
        """A dropped image restores every field its recipe holds; notes say what could not be mapped.

        Every field is replaced (nothing stays from the previous file). A recipe this server cannot run as it
        is (too large, too many steps, too long) is still restored, with the limit it passes and the nearest
        recipe the server runs offered beside it: not the original image, so it is not compared.
        """
        nothing = {"pending": None, "regenerate_png": gr.Button(interactive=False), "png_nearest": None,
                   "use_nearest": gr.Button(interactive=False)}
        if not path:
            return {"png_notes": "", **nothing}
        kind = image_kind(path)
        try:
            read = self.admission.adapt(original_from_png(path))
        except UnreadablePNG as error:
            return {"png_notes": f"This {kind} cannot be read: {error}", **nothing}
        except ValueError as error:  # no recipe in it, or one that no server could run: the message names the field
            return {"png_notes": f"Nothing was restored from this {kind}: {label_message(error)}", **nothing}
        notes = "\n".join(f"- {note}" for note in read.notes) or f"- everything in the {kind} was restored"
        restored = f"Restored from the {kind} (seed {read.recipe.seed})."
        try:
            original = self.admission.original(read, strict=True)
            self.admission.price(original.recipe)
        except ValueError as error:  # its recipe breaks a limit of this server: every field is restored anyway
            nearest = self.admission.nearest(read.recipe)
            offer = ("\nNo smaller recipe fits this server either." if nearest is None else
                     f"\nThe nearest recipe this server runs (not the original image): {describe_size(nearest)}. "
                     "\"Use the nearest runnable recipe\" puts it in the controls.")
            return {**restore(read.recipe), **nothing,
                    "png_notes": f"{restored} This server cannot run it as it is: {label_message(error)}.{offer}\n"
                                 f"{notes}",
                    "png_nearest": None if nearest is None else nearest.to_json(),
                    "use_nearest": gr.Button(interactive=nearest is not None)}
        if original.pixels is not None and original.fingerprint is not None:
            self.pngs.keep_pixels(original.pixels, original.fingerprint)  # on disk, not in the session's memory
        return {**restore(original.recipe), **nothing, "png_notes": f"{restored}\n{notes}",
                "pending": original.with_pixels(None), "regenerate_png": gr.Button(interactive=True)}

    def use_nearest(self, nearest: dict | None) -> dict:
        """The nearest runnable recipe of a dropped image into the controls (Generate makes it)."""
        if not nearest:
            raise gr.Error("Drop an image whose recipe this server cannot run first", print_exception=False)
        recipe = Recipe.from_dict(nearest)
        return {**restore(recipe), "png_notes": f"In the controls: {describe_size(recipe)}, not the original "
                                                "image. Press Generate to make it."}

    def reproduce_pending(self, original: Original | None, request: gr.Request | None = None, progress=None):
        """Regenerate the dropped PNG that open_png left in the session state, and compare."""
        yield from self.pending(original, request, progress, from_record=False)

    def reproduce_linked(self, original: Original | None, request: gr.Request | None = None, progress=None):
        """The linked image that open_link left in the session state: from this server's record, else regenerated."""
        yield from self.pending(original, request, progress, from_record=True)

    def pending(self, original: Original | None, request, progress, from_record: bool):
        if original is None:  # nothing to regenerate: leave every output as it is (a verdict shown at load stays)
            yield {}
            return
        with user_errors():
            if not (from_record and self.record.find(original.recipe)):
                self.admission.charge([original.recipe], visitor(request))
        for update in self.regenerate(original, request, progress, from_record):
            if "verdict" in update and update["verdict"]:
                update = {**update, "verdict_text": update["verdict"]["summary"]}
            yield update

    def after_reproduce(self, verdict: dict | None) -> dict:
        """After /reproduce: the controls show the regenerated recipe, and the verdict its summary."""
        if not verdict:
            return {}
        return {**restore(Recipe.from_dict(verdict["recipe"])), "verdict_text": verdict["summary"],
                "reverify": gr.Button(interactive=bool(verdict.get("served_from_record")))}

    def stop(self, request: gr.Request) -> None:
        """Ask this session's running generation to stop (the backend checks at every step)."""
        self.cancels.stop(getattr(request, "session_hash", None))

    def environment(self, results: list | None) -> dict:
        """The determinism panel: the last result's environment and noise source, or the server's."""
        threads = torch.get_num_threads()
        if results:
            record = results[-1]
            return {"environment": {"noise source (rng)": record["recipe"]["rng"], **record["environment"],
                                    "torch_threads": threads}}
        return {"environment": {"device": device_name(self.store.device), "torch_threads": threads}}

    # Generation.

    def run(self, recipes: list[Recipe], captions: list[str], request, progress, target: str):
        """Generate recipes one by one, streaming the gallery and results as images finish (see IMAGES_INTERVAL_S).

        The stream hands control back at every step: when Gradio closes this generator (Stop, a
        closed tab, a cancelled API call) the stream is closed and the worker stops within a step.
        """
        cancel = self.cancels.new(getattr(request, "session_hash", None))
        base = base_url(request)
        gallery: list[tuple[str, str]] = []
        results: list[dict] = []
        yield {target: gallery, f"{target}_results": results}  # clear the previous images at once
        with user_errors():
            model = self.store.get(recipes[0].model)
            sent_at, unsent = 0.0, False
            try:
                shown_at = 0.0
                if self.workers is not None and self.workers.serves(recipes):
                    events = self.workers.stream(recipes, cancel=cancel)
                else:
                    events = stream_on_gpu(model, recipes, cancel=cancel)
                for event in events:
                    if isinstance(event, Result):
                        path = self.pngs.save(event)
                        self.record.add(event, path)
                        gallery.append((path, captions[len(gallery)]))
                        results.append(result_record(event, base))
                        unsent = True
                    if unsent and (len(gallery) == len(recipes) or time.monotonic() - sent_at >= IMAGES_INTERVAL_S):
                        sent_at, unsent = time.monotonic(), False
                        yield {target: list(gallery), f"{target}_results": list(results)}
                        continue
                    if isinstance(event, Result):  # sent with the next one, or at the next step past the interval
                        continue
                    # Progress reaches the page at most every PROGRESS_INTERVAL_S: each update costs this
                    # process CPU that the images need. Stop reaches the worker directly, not through these.
                    if time.monotonic() - shown_at < PROGRESS_INTERVAL_S:
                        continue
                    shown_at = time.monotonic()
                    if progress is not None:
                        progress((event.done, event.total), desc=f"image {len(gallery) + 1} of {len(recipes)}",
                                 unit="steps")
                    yield {}  # hands control to Gradio, which may close us here
            except Cancelled:
                gr.Warning(f"Stopped after {len(gallery)} of {len(recipes)} images.")
            if unsent:  # a stop between a cell and its update: the cell is shown all the same
                yield {target: list(gallery), f"{target}_results": list(results)}

    def from_record(self, original: Original, request) -> dict | None:
        """The verdict for an image this server already made, read back from its record; None if it has not."""
        recorded = self.record.find(original.recipe)
        if recorded is None:
            return None
        result, entry = recorded
        verdict = compare(result, original)
        link = encode_link(result.recipe, result.fingerprint, result.environment, base_url(request))
        summary = (f"Served from this server's record of the image it made at {entry.made_at_text()}: not "
                   f"regenerated now (press \"Re-verify by regenerating\" to check). {verdict.summary}")
        return {"reproduced": entry.path, "reverify": gr.Button(interactive=True), "verdict_text": summary,
                "verdict": {**verdict.to_dict(), "summary": summary, "served_from_record": True,
                            "made_at": entry.made_at_text(), "recipe": result.recipe.to_json(), "link": link}}

    def regenerate(self, original: Original, request, progress, from_record: bool = False) -> Iterator[dict]:
        """Generate an original's recipe again, save the PNG and compare: yields {} per step, then the verdict.

        With `from_record`, an image this server already made is read back from its record instead.
        """
        served = self.from_record(original, request) if from_record else None
        if served is not None:
            yield served
            return
        cancel = self.cancels.new(getattr(request, "session_hash", None))
        if original.pixels is None and original.fingerprint is not None:
            original = original.with_pixels(self.pngs.pixels(original.fingerprint))
        with user_errors():
            model = self.store.get(original.recipe.model)
            result = None
            try:
                for event in stream_on_gpu(model, [original.recipe], cancel=cancel):
                    if isinstance(event, Progress):
                        if progress is not None:
                            progress((event.done, event.total), desc="regenerating", unit="steps")
                        yield {}
                        continue
                    result = event
            except Cancelled:
                gr.Warning("Stopped: the image was not regenerated.")
                yield {"reproduced": None, "verdict": None, "verdict_text": "Stopped before the image was regenerated."}
                return
        verdict = compare(result, original)
        link = encode_link(result.recipe, result.fingerprint, result.environment, base_url(request))
        path = self.pngs.save(result)
        self.record.add(result, path)
        yield {"reproduced": path, "reverify": gr.Button(interactive=False),
               "verdict": {**verdict.to_dict(), "recipe": result.recipe.to_json(), "link": link,
                           "served_from_record": False}}
