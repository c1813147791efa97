"""The app's handlers: widget values in, updates out, keyed by component name (never by position).

Every value from the page, the API, a link or a PNG goes through `seedlab.serving.admission` before it runs;
a ValueError becomes a gr.Error whose message names fields by their visible labels. Text that a
visitor controls (a link's values, a PNG's words, an error quoting them) is shown in plain-text
components, never as Markdown or HTML.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import torch

from seedlab import Recipe
from seedlab.engine.determinism import device_name
from seedlab.engine.recipe import DEFAULT_SCHEDULER, SPECS
from seedlab.engine.seeds import format_seeds, parse_seeds, random_seeds
from seedlab.scale.workers import Workers
from seedlab.serving.admission import Admission
from webui.cells import ANCHOR, CELL, anchor_updates, checked, no_cell, picked, show_cell
from webui.compare import plot as compare_plot
from webui.compare import travel as compare_travel
from webui.fields import FIELDS, user_errors
from webui.files import MAX_EXPORT_BYTES, MAX_EXPORTS, CancelRegistry, PngStore, ResultRecord
from webui.history import History
from webui.history_words import phrase
from webui.i18n import language, translated
from webui.matrix import matrix_page
from webui.previews import Previews, caption
from webui.reproduction import Reproduction
from webui.requests import visitor
from webui.streaming import Cells, final_only, stream_cells  # noqa: F401  (final_only: app.py's)

NO_ANCHOR = "Anchor seed: none yet (click a cell of the grid)"


def shown(text: str, limit: int = 80) -> str:
    """A visitor's text quoted in a message, cut to `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "…")




class WebApp:
    """The web app's state and its generating handlers: admission (models, limits, budget), the PNG folder, the
    record of what this server made and the sessions' cancel events; each panel's handlers get what they use."""

    def __init__(self, admission: Admission, image_dir: Path):
        self.admission = admission
        self.store = admission.store
        self.pngs = PngStore(image_dir)
        self.record = ResultRecord()  # what this server made: a link it rendered opens without regenerating
        self.workers: Workers | None = None  # worker processes for multi-image requests, once started
        self.cancels = CancelRegistry()
        self.default = self.store.get(self.store.default)  # loaded once, at start-up
        # History exports in a bounded folder of their own: any visitor can make one per page load, and they
        # must never push other visitors' PNGs out of theirs.
        (image_dir / "exports").mkdir(exist_ok=True)
        self.exports = PngStore(image_dir / "exports", max_files=MAX_EXPORTS, max_bytes=MAX_EXPORT_BYTES)
        self.history = History(admission, self.record, self.pngs, self.run, self.exports, self.cancels)
        self.reproduction = Reproduction(admission, self.pngs, self.record, self.cancels)  # links and dropped images
        self.previews = Previews(self)  # Preview, Finish, /preview, /finish

    # Public API endpoints (/grid, /vary, /matrix; /reproduce and /reverify are Reproduction's).

    def grid(self, values: dict, request: gr.Request | None = None, progress=None):
        """A grid: the prompt once per seed ("42", "0-7", "3, 17, 99"), each image captioned with its seed."""
        values = dict(values)
        with user_errors(request):
            recipes = self.admission.grid(values, values.pop("seeds", None) or "")
            self.admission.charge(recipes, visitor(request))
        yield from self.run(recipes, [caption(recipe, language(request)) for recipe in recipes], request, progress,
                            "grid")

    def vary(self, values: dict, request: gr.Request | None = None, progress=None):
        """The base prompt, then each variation (one per line) appended to it, all from the anchor seed."""
        values = dict(values)
        lines = [line for line in str(values.pop("variations", None) or "").splitlines() if line.strip()]
        with user_errors(request):
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
        with user_errors(request):
            rows = self.admission.grid(values, seeds)  # the seeds, within the image limit
            recipes = [cell for row in rows for cell in self.admission.variations({**values, "seed": row.seed}, lines)]
            limits = self.admission.limits
            if len(recipes) > limits.max_images:
                raise ValueError(f"matrix: this server makes at most {limits.max_images} images per request, "
                                 f"got {len(rows)} seeds x {len(lines) + 1} columns = {len(recipes)}")
            self.admission.charge(recipes, visitor(request))
        lang = language(request)
        columns = [phrase("base prompt", lang), *(line.strip() for line in lines)]
        captions = [phrase("seed {seed} · {column}", lang, seed=row.seed, column=column) for row in rows
                    for column in columns]
        yield from self.run(recipes, captions, request, progress, "matrix")

    # UI-only handlers (private endpoints).

    def dice(self, count, seeds: str, request: gr.Request | None = None) -> dict:
        """Draw fresh random seeds into the seeds box (shown before anything is generated)."""
        if count is None:
            try:
                count = len(parse_seeds(seeds))
            except ValueError:
                count = 4
        with user_errors(request):
            count = int(count) if isinstance(count, float) and count.is_integer() else count
            return {"seeds": format_seeds(random_seeds(count))}

    def select(self, results: list | None, evt: gr.SelectData) -> dict:
        """A grid click: the cell's recipe becomes the anchor, and the cell is shown large with its actions."""
        record = picked(results, evt.index, "grid")
        return {**anchor_updates(record), **show_cell(record, self.record)}

    def nudge(self, anchor: dict | None, count, strength, request: gr.Request | None = None,
              progress=gr.Progress()):  # noqa: B008 - Gradio's way to report progress
        """Nudges: the anchor's recipe with fresh random variation seeds at a strength; each cell exact and linkable."""
        if not anchor:
            raise gr.Error(translated("Pick an anchor first: click a cell of the grid", request),
                           print_exception=False)
        with user_errors(request):
            count = int(count) if isinstance(count, float) and count.is_integer() else count
            most = self.admission.limits.max_images
            if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= most:
                raise ValueError(f"Nudges must be a whole number from 1 to {most}, got {shown(str(count), 20)}")
            recipes = self.admission.nudges(anchor, random_seeds(count), strength)
            self.admission.charge(recipes, visitor(request))
        captions = [phrase("variation seed {seed} · strength {strength}", language(request), seed=r.variation_seed,
                           strength=f"{r.variation_strength:g}") for r in recipes]
        yield from self.run(recipes, captions, request, progress, "nudges")

    def select_nudge(self, results: list | None, evt: gr.SelectData) -> dict:
        """A nudge click: the cell shown large with its actions ("Make anchor" goes on from it)."""
        return show_cell(picked(results, evt.index, "nudges"), self.record)

    def select_matrix(self, results: list | None, evt: gr.SelectData) -> dict:
        """A matrix click: the cell shown large with its actions."""
        return show_cell(picked(results, evt.index, "matrix"), self.record)

    def select_history(self, results: list | None, evt: gr.SelectData) -> dict:
        """A click in a restored history entry: the cell shown large with its actions."""
        return show_cell(picked(results, evt.index, "history entry"), self.record)

    def plot(self, values: dict, request: gr.Request | None = None, progress=None):
        """An X/Y/Z plot over any recipe field ("seed: 1-5 (+2)", "Steps: 10, 20"): every cell made alone."""
        yield from compare_plot(self, values, request, progress)

    def travel(self, values: dict, request: gr.Request | None = None, progress=None):
        """Seed travel through the seeds ("3, 7"): every frame made alone, then the animation."""
        yield from compare_travel(self, values, request, progress)

    def select_travel(self, results: list | None, evt: gr.SelectData) -> dict:
        """A travel frame's click: shown large with its actions."""
        return show_cell(picked(results, evt.index, "travel"), self.record)

    def select_plot(self, results: list | None, evt: gr.SelectData) -> dict:
        """A plot cell's click: shown large with its actions."""
        return show_cell(picked(results, evt.index, "plot"), self.record)

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

    def page_grid(self, values: dict, request: gr.Request | None = None, progress=None):
        """The page's Generate: full images (Preview, webui/previews.py, makes previews)."""
        yield from self.page_cells({**values, "preview_steps": 0}, request, progress)

    def page_cells(self, values: dict, request: gr.Request | None = None, progress=None):
        """The page's grid, its first update also clearing the anchor and the selection (in the same message: a step
        of its own before the run cost a round trip and a page update)."""
        first = self.clear_anchor()
        for update in self.grid(values, request, progress):
            yield {**update, **first} if first else update
            first = None

    def clear_anchor(self) -> dict:
        """A new grid: no cell is selected (the Selected image is emptied) and no anchor is shown until the user picks
        one of the new cells."""
        cleared = {"anchor_text": NO_ANCHOR, "anchor_seed": "", "anchor": None, "anchor_recipe": None,
                   "anchor_fingerprint": "", "grid_link": ""}
        assert set(cleared) == set(ANCHOR) and set(no_cell()) == set(CELL)
        return {**cleared, **no_cell(), "grid": gr.Gallery(value=[], selected_index=None),
                "vary_note": gr.Textbox(value="", visible=False)}

    def vary_anchor(self, values: dict, request: gr.Request | None = None, progress=None):
        """The vary button: variations of the anchor's own recipe, saying so when the controls now differ."""
        anchor = values.pop("anchor")
        if not anchor:
            raise gr.Error(translated("Pick an anchor first: click a cell of the grid", request),
                           print_exception=False)
        with user_errors(request):  # the page's copy of the anchor: the visitor's to change
            if not isinstance(anchor, dict):
                raise ValueError(f"anchor must be a recipe (a JSON object), got {type(anchor).__name__}")
            note = self.anchor_note(Recipe.from_dict(anchor), values)
        first = {"variation_link": "", "vary": gr.Gallery(value=[], selected_index=None),
                 "vary_note": gr.Textbox(value=note, visible=bool(note))}
        for update in self.vary({**anchor, "variations": values.get("variations")}, request, progress):
            yield {**update, **first} if first else update
            first = None

    def anchor_prompt_note(self, prompt: str | None, anchor: dict | None) -> dict:
        """Before a run: the vary button varies the anchor's prompt, said beside it as soon as the prompt box
        differs (the note came only after the run)."""
        try:
            recipe = Recipe.from_dict(anchor) if isinstance(anchor, dict) and anchor else None
        except ValueError:  # a page that sends a broken anchor hears of it when it varies
            recipe = None
        if recipe is None or (prompt or "") == recipe.prompt:
            return {"vary_note": gr.Textbox(value="", visible=False)}
        note = (f"Variations start from the anchor's prompt {shown(recipe.prompt)}, not the prompt box's: generate "
                "a grid with the new prompt and click a cell to vary it instead.")
        return {"vary_note": gr.Textbox(value=note, visible=True)}

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

    def stop(self, request: gr.Request) -> str:
        """Ask this session's running generation to stop (the backend checks at every step), and say how far it
        got (the page shows it under the buttons until the next generation starts)."""
        progress = self.cancels.stop(getattr(request, "session_hash", None))
        if progress is None:
            return "Stopped."
        done, total = progress
        kept = "the finished ones stay here and in History" if done else "none was finished"
        return f"Stopped after {done} of {total} images: {kept}."

    def environment(self, results: list | None) -> dict:
        """The determinism panel: the last result's environment and noise source, or the server's."""
        threads = torch.get_num_threads()
        if results:
            record = results[-1]
            return {"environment": {"noise source (rng)": record["recipe"]["rng"], **record["environment"],
                                    "torch_threads": threads}}
        return {"environment": {"device": device_name(self.store.device), "torch_threads": threads}}

    # Generation.

    def run(self, recipes: list[Recipe], captions: list[str], request, progress, target: str,
            into: Cells | None = None):
        """Generate recipes one by one, streaming the gallery and results as images finish (webui/streaming.py);
        `into`: cells already shown, each result replacing the one at its place (finished previews)."""
        yield from stream_cells(self, recipes, captions, request, progress, target, into)
