"""Previews on the page: Preview beside Generate, Finish on the selected cell, Finish all under the grid.

A preview grid is the grid with `preview_steps` set (engine/previews.py): each seed in a few steps, captioned
"preview". Finishing renders a preview's full recipe from the start and puts the image in the preview's place, in the
grid and its results; History records the preview grid and the finished one. The public /preview is /grid's
previews; /finish takes preview links (one per line) and returns their full images.
"""

from __future__ import annotations

import gradio as gr

from seedlab import Recipe
from seedlab.engine.previews import PREVIEW_STEPS, finished
from seedlab.files.links import decode_link
from seedlab.serving.admission import Admission
from webui.cells import checked, show_cell
from webui.fields import user_errors
from webui.history_words import phrase
from webui.i18n import language, words
from webui.requests import visitor
from webui.streaming import Cells, final_only

PREVIEW = "Preview"
MAX_LINKS_CHARS = 200_000  # /finish's links: a grid's worth at the longest link a page sends (16,000 characters)
MAX_IMAGES_SEEN = 256  # records read to decide whether Finish all shows: far more than any grid this server makes


def preview_controls(ui: dict, add) -> None:
    """Preview and its steps, in the row of Generate (`add` makes a recipe field's control)."""
    ui["preview"] = gr.Button(words(PREVIEW), elem_id="preview", min_width=90)
    hint = f"Preview: each seed in this many steps, to finish later (0 picks {PREVIEW_STEPS})"
    add("preview_steps", info=words(hint), min_width=150)


def preview_places(results: list | None) -> list[int]:
    """Where a grid's records (the page's or a visitor's) hold previews."""
    return [index for index, record in enumerate(results or []) if isinstance(record, dict)
            and isinstance(record.get("recipe"), dict) and record["recipe"].get("preview_steps") not in (None, 0, "0")]


def finish_all_shown(results: list | None) -> dict:
    """"Finish all previews" is there only while the grid holds a preview: pressed with none, it could only refuse."""
    return {"finish_all": gr.Button(visible=bool(preview_places(results[:MAX_IMAGES_SEEN] if isinstance(results, list)
                                                                else None)))}


def finish_controls(ui: dict) -> None:
    """Finish all, under the grid (shown while the grid holds previews); the public /finish's hidden parts."""
    ui["finish_all"] = gr.Button(words("Finish all previews"), elem_id="finish-all", size="sm", visible=False)
    ui["preview_api"] = gr.Button(visible=False)  # the public /preview (its images at the end)
    ui["finish_api"] = gr.Button(visible=False)  # the public /finish: preview links in, full images out
    ui["finish_links"] = gr.Textbox(visible=False)


def preview_values(values: dict) -> dict:
    """The page's values for a preview grid: Preview steps as set (0: PREVIEW_STEPS), below Steps when it can be."""
    wanted = values.get("preview_steps") or PREVIEW_STEPS
    steps = values.get("num_inference_steps")
    if isinstance(steps, (int, float)) and steps >= 2 and isinstance(wanted, (int, float)):
        wanted = min(wanted, int(steps) - 1)  # 20 -> 5; a 4-step recipe previews in 3
    return {**values, "preview_steps": wanted}


def caption(recipe: Recipe, lang: str = "en") -> str:
    """A grid cell's caption in the visitor's language: its seed, and whether it is a preview."""
    return phrase("seed {seed}", lang, seed=recipe.seed) + (phrase(" · preview", lang) if recipe.preview_steps else "")


class Previews:
    """The page's and the API's preview handlers, over the app's grid and its streaming (`app`: WebApp)."""

    def __init__(self, app):
        self.app = app
        self.admission: Admission = app.admission

    def page_preview(self, values: dict, request: gr.Request | None = None, progress=None):
        """The page's Preview: the grid's seeds as previews (clearing the anchor as Generate does)."""
        yield from self.app.page_cells(preview_values(values), request, progress)

    def preview(self, values: dict, request: gr.Request | None = None, progress=None):
        """Previews of the prompt once per seed: each in Preview steps (0: 5), captioned preview, to /finish."""
        yield from self.app.grid(preview_values(values), request, progress)

    def finish_cell(self, cell: dict | None, results: list | None, request: gr.Request | None = None, progress=None):
        """Finish: the selected preview of the grid made in full, in its place."""
        if not cell:
            raise gr.Error("Select a preview first: click a cell of the grid made with Preview", print_exception=False)
        results = self._bounded(results)
        record = checked(cell)
        places = [index for index, other in enumerate(results)
                  if isinstance(other, dict) and other.get("fingerprint") == record["fingerprint"]]
        if not places:
            raise gr.Error("Finish works on the grid's previews: click a preview cell of the grid",
                           print_exception=False)
        if not Recipe.from_dict(record["recipe"]).preview_steps:
            raise gr.Error("This image is already the full image (not a preview)", print_exception=False)
        last: dict = {}
        for update in self._finish(places[:1], results, request, progress):
            last = {**last, **update}
            yield update
        if last.get("grid_results"):
            yield show_cell(checked(last["grid_results"][places[0]]), self.app.record)

    def finish_all(self, results: list | None, request: gr.Request | None = None, progress=None):
        """Finish all previews: every preview cell of the grid made in full, each in its place as it is done."""
        results = self._bounded(results)
        places = preview_places(results)
        if not places:
            raise gr.Error("The grid has no previews to finish: make some with Preview", print_exception=False)
        yield from self._finish(places, results, request, progress)

    def finish(self, links: str, request: gr.Request | None = None, progress=None):
        """The full images of preview links (one per line, as /preview's results give them), in their order."""
        if not isinstance(links, str) or len(links) > MAX_LINKS_CHARS:
            raise gr.Error(f"links must be text of at most {MAX_LINKS_CHARS} characters, one link per line",
                           print_exception=False)
        with user_errors(request):
            lines = [line.strip() for line in links.splitlines() if line.strip()]
            if not lines:
                raise ValueError("links: give at least one preview link (one per line)")
            most = self.admission.limits.max_images
            if len(lines) > most:
                raise ValueError(f"links: this server finishes at most {most} images per request, got {len(lines)}")
            recipes = [self.admission.recipe(finished(decode_link(line)[0]).to_dict()) for line in lines]
            self.admission.charge(recipes, visitor(request))
        captions = [caption(recipe, language(request)) for recipe in recipes]
        yield from self.app.run(recipes, captions, request, progress, "grid")

    def _bounded(self, results) -> list:
        """The grid's results as the browser sent them, refused unread past a grid's size (max_images cells): each
        cell is checked and looked up in this server's record, so their count is the work a finish costs before
        it renders anything."""
        most = self.admission.limits.max_images
        if results is None:
            return []
        if not isinstance(results, list) or len(results) > most:
            size = f"{len(results)} cells" if isinstance(results, list) else type(results).__name__
            raise gr.Error(f"The grid's results must be a list of at most {most} cells (a grid of this server), got "
                           f"{size}: make the grid again", print_exception=False)
        return results

    def _finish(self, places: list[int], results: list, request, progress):
        """The previews at `places` of the grid made in full, each replacing its preview."""
        with user_errors(request):
            records = [checked(record) for record in results]
            gallery = []
            for record in records:
                recipe = Recipe.from_dict(record["recipe"])
                path = self.app.record.kept(recipe, record["fingerprint"])
                if path is None:
                    raise ValueError("this grid's images are no longer kept by the server: make it again")
                gallery.append((path, caption(recipe, language(request))))
            recipes = [self.admission.recipe(finished(Recipe.from_dict(records[place]["recipe"])).to_dict())
                       for place in places]
            self.admission.charge(recipes, visitor(request))
        into = Cells(gallery, records, places)
        captions = [caption(recipe, language(request)) for recipe in recipes]
        yield from self.app.run(recipes, captions, request, progress, "grid", into)


def wire_previews(wiring, app, ui: dict, with_fields, fields: list, kept: list[str]) -> list:
    """Preview, Finish, Finish all, /preview and /finish; the page's ones settle the buttons and go to History.
    Returns the generating events (Stop cancels them)."""
    from webui.cells import ANCHOR, CELL
    from webui.history import to_store
    from webui.wiring import PRIVATE, by_name

    event, guarded, previews = wiring.event, wiring.guarded, app.previews
    grid_inputs = [ui["prompt"], ui["seeds"], *fields]
    page = event(guarded([ui["preview"].click], "grid"), with_fields(previews.page_preview, ("prompt", "seeds")),
                 grid_inputs, ["grid", "grid_results", *ANCHOR, *CELL, "vary_note"], concurrency_id="generation",
                 show_progress="minimal", show_progress_on=ui["grid"], **PRIVATE)  # one progress display, as Generate
    public = event(ui["preview_api"].click, with_fields(final_only(previews.preview), ("prompt", "seeds")),
                   grid_inputs, ["grid", "grid_results"], api_name="preview", concurrency_id="generation")
    finish = event(ui["finish_api"].click, final_only(previews.finish), [ui["finish_links"]], ["grid", "grid_results"],
                   api_name="finish", concurrency_id="generation")
    one = event(guarded([ui["finish_cell"].click]), previews.finish_cell, [ui["cell"], ui["grid_results"]],
                ["grid", "grid_results", *CELL], concurrency_id="generation", show_progress="minimal", **PRIVATE)
    every = event(guarded([ui["finish_all"].click]), previews.finish_all, [ui["grid_results"]],
                  ["grid", "grid_results"], concurrency_id="generation", show_progress="minimal", **PRIVATE)
    wiring.settles(page, one, every)
    event(ui["grid_results"].change, finish_all_shown, [ui["grid_results"]], ["finish_all"], queue=False,
          show_progress="hidden", **PRIVATE)
    remember = by_name(to_store(app.history.remember("grid")), ui, [ui[name] for name in kept])
    for made in (page, one, every):
        made.success(remember, [ui["grid_results"], ui["history"], ui["anchor"], ui["anchor_fingerprint"]],
                     [ui[name] for name in kept], queue=False, **PRIVATE)
    return [page, public, finish, one, every]
