"""A generation streamed to the page: cells as they finish, progress between them, Stop at any step.

What a generation sends the page while it runs costs CPU that the images need (the page renders every update on
the same cores). Progress only after PROGRESS_INTERVAL_S without any update (new cells say how far it got); where
images run side by side (lanes, worker processes), a finished cell waits up to IMAGES_INTERVAL_S for the ones
finishing after it, so that they arrive in one update (the last at once); previews, many a second, wait up to
PREVIEW_IMAGES_INTERVAL_S.
An 8-image grid from the page's Generate to its last cell (bench/bench_page.py, least disturbed of 7): 1.08x one
batched diffusers call with these settings and the busy state set in the page (1.31x with progress every second,
each cell alone and two round trips before the run).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import gradio as gr

from seedlab import Cancelled, Recipe, Result
from seedlab.files.links import result_record
from webui.fields import user_errors
from webui.gpu import stream_on_gpu
from webui.requests import base_url

PROGRESS_INTERVAL_S = 2.0
IMAGES_INTERVAL_S = 0.3
# Previews come about eight a second, and each update costs the server (Gradio postprocesses every cell shown, to
# the cache and back) and the page (it draws them all again) more than a 5-step image costs: 16 previews on the page
# took 0.45 of a full grid's time with an update every 0.3 s, 0.36-0.38 with one every 0.8 s (bench_preview.py
# --page-costs 16; 1.5 s gained nothing more). A full grid gains nothing from a longer wait (its images dominate).
PREVIEW_IMAGES_INTERVAL_S = 0.8


@dataclass(frozen=True)
class Cells:
    """Cells already shown (gallery entries and their result records) and where each new result goes: finishing
    previews replaces them in place."""

    gallery: list
    results: list[dict]
    places: list[int]


# Long: one loop from the first event to the last update, its sending rules (above) in one place.
def stream_cells(app, recipes: list[Recipe], captions: list[str], request, progress, target: str,
                 into: Cells | None = None):
    """Generate recipes one by one, yielding the gallery and results as images finish.

    The stream hands control back at every step: when Gradio closes this generator (Stop, a closed tab, a cancelled
    API call) the stream is closed and the worker stops within a step.
    """
    cancel = app.cancels.new(getattr(request, "session_hash", None))
    cancel.progress = (0, len(recipes))  # what Stop says it stopped
    base = base_url(request)
    gallery: list = list(into.gallery) if into else []
    results: list[dict] = list(into.results) if into else []
    done = 0
    yield {target: list(gallery), f"{target}_results": list(results)}  # a new run clears the previous images at once
    with user_errors(request):
        model = app.store.get(recipes[0].model)
        finished_at, unsent = 0.0, False  # when the oldest cell not yet sent finished
        try:
            shown_at = -math.inf  # the first progress goes at once (monotonic may be small)
            if app.workers is not None and app.workers.serves(recipes):
                events, beside = app.workers.stream(recipes, cancel=cancel), app.workers.pool.size
            else:
                events, beside = stream_on_gpu(model, recipes, cancel=cancel), model.lanes
            fast = all(recipe.preview_steps for recipe in recipes)  # previews: many cells a second
            # (one image at a time: nothing finishes beside a cell, so it need not wait)
            wait = PREVIEW_IMAGES_INTERVAL_S if fast else IMAGES_INTERVAL_S if beside > 1 else 0.0
            for event in events:
                if isinstance(event, Result):
                    path = app.pngs.save(event)
                    app.record.add(event, path)
                    cell = (path, captions[done])
                    record = result_record(event.recipe, event.fingerprint, event.environment, base)
                    if into:
                        gallery[into.places[done]], results[into.places[done]] = cell, record
                    else:
                        gallery.append(cell)
                        results.append(record)
                    done += 1
                    cancel.progress = (done, len(recipes))
                    finished_at = finished_at if unsent else time.monotonic()
                    unsent = True
                if unsent and (done == len(recipes) or time.monotonic() - finished_at >= wait):
                    shown_at, unsent = time.monotonic(), False
                    yield {target: list(gallery), f"{target}_results": list(results)}
                    continue
                if isinstance(event, Result):  # sent with the next one, or at the next step past the interval
                    continue
                # Progress reaches the page only after PROGRESS_INTERVAL_S without an update: each costs this process
                # and the page CPU that the images need. Stop reaches the worker directly, not through these.
                if time.monotonic() - shown_at < PROGRESS_INTERVAL_S:
                    continue
                shown_at = time.monotonic()
                if progress is not None:
                    progress((event.done, event.total), desc=f"image {done + 1} of {len(recipes)}", unit="steps")
                yield {}  # hands control to Gradio, which may close us here
        except Cancelled:
            gr.Info(f"Stopped after {done} of {len(recipes)} images.")  # what the visitor chose: no warning
        if unsent:  # a stop between a cell and its update: the cell is shown all the same
            yield {target: list(gallery), f"{target}_results": list(results)}


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
