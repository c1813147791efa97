"""The reproduce panel's handlers: a link, a recipe or a dropped image, regenerated and compared with the original.

A link this server made opens from its record at once; any other is regenerated at once. So is a dropped SeedLab
PNG that runs as written; another tool's file waits for its button. A dropped image restores every field it holds,
and one this server cannot run as it is gets the nearest runnable recipe offered beside it. The panel's layout and
events are in webui.reproduction_panel (its names are importable from here too).
"""

from __future__ import annotations

from collections.abc import Iterator

import gradio as gr
import torch

from seedlab import Original, Progress, Recipe, compare, encode_link
from seedlab.engine.generation import Cancelled
from seedlab.engine.recipe import SPECS, RecipeError
from seedlab.files.formats import NOT_MADE_HERE
from seedlab.files.links import KEYS as LINK_FIELDS
from seedlab.files.links import decode_recipe_link, is_recipe_link, parse_query
from seedlab.files.metadata import UnreadableImage
from seedlab.serving.admission import Admission, FileAdmission
from seedlab.serving.conventions import retry_conventions
from seedlab.serving.reproduction import (
    CONSEQUENCES,
    original_from_link,
    original_from_png,
    original_from_text,
    retry_natively,
    unretried_verdict,
)
from webui.cells import anchor_updates, show_cell, verdict_record
from webui.fields import label_message, page_defaults, restore, user_errors
from webui.files import CancelRegistry, PngStore, ResultRecord
from webui.gpu import stream_on_gpu
from webui.i18n import language
from webui.reproduction_panel import MADE_HERE, reproduction_panel, wire_reproduction
from webui.requests import base_url, link_query, visitor
from webui.verdict_words import said, spoken

__all__ = ["MADE_HERE", "Reproduction", "reproduction_panel", "wire_reproduction"]
# The button that regenerates what the record served: the link box's, or the dropped file's.
AGAIN = {"link": "Re-verify by regenerating", "file": "Regenerate the dropped image and compare"}


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


def refused_offer(admitted: FileAdmission) -> str:
    """What a visitor can do with a dropped recipe this server refuses: the nearest one it runs (smaller, fewer
    steps, its text shortened, with the words that go shown), or the fields to change (a noise source it lacks)."""
    if admitted.nearest is not None:
        return (f"\nThe nearest recipe this server runs (not the original image): {describe_size(admitted.nearest)}"
                f"{describe_cuts(admitted.original.recipe, admitted.nearest)}. \"Use the nearest runnable recipe\" "
                "puts it in the controls.")
    fields = admitted.refused.errors if isinstance(admitted.refused, RecipeError) else ()
    named = ", ".join(dict.fromkeys(SPECS[error.field].label for error in fields if error.field in SPECS))
    return f"\nChange {named or 'it'} in the controls, then press Generate."


def describe_size(recipe: Recipe) -> str:
    """A nearest recipe in words: "seed 7 at 704x1024, 20 steps, the noise drawn at 832x1216"."""
    text = f"seed {recipe.seed} at {recipe.width}x{recipe.height}, {recipe.num_inference_steps} steps"
    if recipe.seed_resize_from is not None:
        text += f", the noise drawn at {recipe.seed_resize_from[0]}x{recipe.seed_resize_from[1]} (seed resize from)"
    return text


def describe_cuts(original: Recipe, nearest: Recipe) -> str:
    """The words a shortened nearest recipe leaves out, field by field: "; the Prompt cut to 498 characters (what
    goes: "…")". Empty when no text was cut."""
    cuts = []
    for name in ("prompt", "negative_prompt"):
        kept, whole = getattr(nearest, name), getattr(original, name)
        if kept != whole:
            gone = whole[len(kept):].strip(" ,\n")
            shown = gone if len(gone) <= 400 else gone[:399] + "…"
            cuts.append(f"{SPECS[name].label} cut to {len(kept)} characters (what goes: \"{shown}\")")
    return "".join(f"; {cut}" for cut in cuts)


API_OUTPUTS = ("reproduced", "verdict")  # what /reproduce and /reverify return


class Reproduction:
    """The reproduce panel's handlers: a link, a recipe or a dropped image, regenerated (or read back from this
    server's record) and compared with the original, pixel for pixel."""

    def __init__(self, admission: Admission, pngs: PngStore, record: ResultRecord, cancels: CancelRegistry):
        self.admission, self.pngs, self.record, self.cancels = admission, pngs, record, cancels

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
        with user_errors(request):
            original = self.admission.original(original_from_text(link_or_recipe))
            if not (from_record and self.record.find(original.recipe)):
                self.admission.charge_reproduction(original, visitor(request))
        for update in self.regenerate(original, request, progress, from_record):  # the page's verdict text and
            yield {name: value for name, value in update.items() if name in API_OUTPUTS}  # button follow after it

    def open_link(self, request: gr.Request) -> dict:
        """On page load: a link in the query string restores every control; its regeneration follows."""
        return spoken(self.linked(request), language(request))

    def linked(self, request: gr.Request) -> dict:
        """open_link's updates, in English."""
        query = link_query(request)
        if query is None:
            return {"pending": None}
        if is_recipe_link(query):  # written by hand: no fingerprint, so a recipe to make, not an image to check
            return self.open_recipe_link(query, request)
        try:
            original = self.admission.original(original_from_link(query))
        except ValueError as error:  # every bad key at once, and the link in the box where it can be fixed
            why = label_message(error, language(request))
            return {"verdict_text": f"This link cannot be opened. {why} (It is in the box above: "
                                    "fix it there and press \"Regenerate the link and compare\".)",
                    "link_box": f"{base_url(request)}?{query}", "pending": None,
                    "reproduction": gr.Accordion(open=True)}
        opened = {"link_box": f"{base_url(request)}?{query}", **restore(original.recipe), "original": None,
                  "reproduction": gr.Accordion(open=True)}
        served = self.from_record(original, request)  # at once, not queued behind other visitors' generations
        if served is not None:
            return {**opened, **served, "pending": None}
        return {**opened, "verdict_text": "Regenerating the linked image…", "pending": original}

    def open_recipe_link(self, query: str, request: gr.Request) -> dict:
        """A link with a recipe and no fingerprint (`?prompt=a+blue+square&seed=7`) fills the controls; nothing is
        regenerated, since there is no image to compare with: Generate makes it."""
        shown = {"link_box": f"{base_url(request)}?{query}", "pending": None, "reproduction": gr.Accordion(open=True)}
        try:
            written = decode_recipe_link(query)  # the keys it states; the others take this server's model's defaults
            recipe = self.admission.recipe({field: getattr(written, field) for key, field in LINK_FIELDS.items()
                                            if key in parse_query(query)})
        except ValueError as error:  # every bad key at once, the link in the box where it can be fixed
            why = label_message(error, language(request))
            return {**shown, "verdict_text": f"This link cannot be opened. {why} (It is in the box "
                                             "above: fix it there and press \"Regenerate the link and compare\".)"}
        return {**shown, **restore(recipe), "original": None,
                "verdict_text": f"The link holds a recipe (seed {recipe.seed}) but no pixel fingerprint, so there is "
                                "no image to compare with: it is in the controls, and Generate makes it."}

    def open_png(self, path: str | None, request: gr.Request | None = None) -> dict:
        """A dropped image restores every field its recipe holds; notes say what could not be mapped (read_png)."""
        return spoken(self.read_png(path, request), language(request))

    def read_png(self, path: str | None, request: gr.Request | None = None) -> dict:
        """open_png's updates, in English.

        A dropped image restores every field its recipe holds; notes say what could not be mapped.

        Every field is replaced (nothing stays from the previous file): a file that restores nothing puts the page's
        defaults back and says so. A recipe this server cannot run as it is (too large, too many steps, too long) is
        still restored, with the limit it passes and the nearest recipe the server runs offered beside it: not the
        original image, so it is not compared; nor is one only its own tool can make (NovelAI's). A SeedLab PNG
        that runs as written gets its verdict as a link does (see at_once).
        """
        nothing = self.clear_png()  # nothing stays from the previous file: not its notes, nor its verdict
        if not path:
            return nothing
        kind = image_kind(path)
        try:  # read, adapted, checked and priced once each
            admitted = self.admission.admit_file(original_from_png(path))
        except UnreadableImage as error:
            return self.restored_nothing(f"This {kind} cannot be read: {error}")
        except ValueError as error:  # no recipe in it, or one that no server could run: the message names the field
            why = label_message(error, language(request))
            return self.restored_nothing(f"Nothing was restored from this {kind}: {why}")
        original = admitted.original
        causes = [note for note in original.notes if any(word in note for word in CONSEQUENCES)]  # what changes pixels
        ordered = causes + [note for note in original.notes if note not in causes]
        notes = "\n".join(f"- {note}" for note in ordered) or f"- everything in the {kind} was restored"
        restored = f"Restored from the {kind} (seed {original.recipe.seed})."
        if admitted.refused is not None:  # its recipe breaks a limit of this server: every field is restored anyway
            return {**restore(original.recipe), **nothing, "original": path,
                    "png_notes": f"{restored} This server cannot run it as it is: "
                                 f"{label_message(admitted.refused, language(request))}."
                                 f"{refused_offer(admitted)}\n{notes}",
                    "png_nearest": None if admitted.nearest is None else admitted.nearest.to_json(),
                    "use_nearest": gr.Button(interactive=admitted.nearest is not None)}
        if any(NOT_MADE_HERE in note for note in original.notes):  # nothing here can make the image to compare
            return {**restore(original.recipe), **nothing, "original": path,
                    "png_notes": f"{restored} Only its own tool can make this image, so there is nothing to compare: "
                                 "Generate makes its recipe with this server's model.\n" + notes}
        summary = (f" {len(causes)} of its settings cannot be run as written (listed first): the image will differ."
                   if causes else " It runs as written, so the regenerated image should match it where the "
                                  "environment does.")
        if original.pixels is not None and original.fingerprint is not None:
            self.pngs.keep_pixels(original.pixels, original.fingerprint)  # on disk, not in the session's memory
        opened = {**restore(original.recipe), **nothing, "png_notes": f"{restored}{summary}\n{notes}",
                  "original": path, "pending": original.with_pixels(None),
                  "regenerate_png": gr.Button(interactive=True)}
        return opened if causes or not original.own else {**opened, **self.at_once(original, request)}

    def restored_nothing(self, why: str) -> dict:
        """A file with no recipe to restore: the controls go back to the page's defaults (a previous file's prompt
        left in the box would read as this file's), and the notes say so."""
        blank = restore(Recipe(**page_defaults(self.admission)))
        return {**blank, **self.clear_png(), "png_notes": f"{why}\nThe controls were reset to the page's defaults."}

    def at_once(self, original: Original, request) -> dict:
        """A SeedLab PNG's verdict, as a link's: from this server's record with the drop, else regenerated at once
        (`png_now`, the page busy meanwhile). Another tool's file waits for its button, as does a SeedLab PNG
        with a setting this server changes: their recipes often need adjusting first."""
        served = self.from_record(original, request, what="file")
        if served is not None:  # the link box's "Re-verify" is not this file's: its own button regenerates it
            return {**served, "reverify": gr.Button(interactive=False)}
        return {"verdict_text": "Regenerating the dropped image…", "png_now": original.with_pixels(None)}

    def clear_png(self) -> dict:
        """No file: its notes, its pending regeneration and the verdict and image it led to are gone."""
        return {"png_notes": "", "pending": None, "png_now": None, "regenerate_png": gr.Button(interactive=False),
                "png_nearest": None, "use_nearest": gr.Button(interactive=False), "reproduced": None, "verdict": None,
                "verdict_text": "", "reverify": gr.Button(interactive=False), "original": None}

    def use_nearest(self, nearest: dict | None, request: gr.Request | None = None) -> dict:
        """The nearest runnable recipe of a dropped image into the controls (Generate makes it)."""
        if not nearest:
            raise gr.Error("Drop an image whose recipe this server cannot run first", print_exception=False)
        recipe = Recipe.from_dict(nearest)
        return spoken({**restore(recipe), "png_notes": f"In the controls: {describe_size(recipe)}, not the original "
                                                       "image. Press Generate to make it."}, language(request))

    def reproduce_pending(self, original: Original | None, request: gr.Request | None = None, progress=None):
        """Regenerate the dropped PNG that open_png left in the session state, and compare (nothing where none is)."""
        yield from self.pending(original, request, progress, from_record=False)

    def reproduce_dropped(self, original: Original | None, request: gr.Request | None = None, progress=None):
        """The "Regenerate the dropped image" button: as reproduce_pending, and said where the server no longer holds
        the file (the button is on only after a drop, so a restart since then lost it) instead of doing nothing."""
        if original is None:
            raise gr.Error("Drop the image again: the server was restarted since it read the file, and keeps no copy",
                           print_exception=False)
        yield from self.pending(original, request, progress, from_record=False)

    def reproduce_linked(self, original: Original | None, request: gr.Request | None = None, progress=None):
        """The linked image that open_link left in the session state: from this server's record, else regenerated."""
        yield from self.pending(original, request, progress, from_record=True)

    def pending(self, original: Original | None, request, progress, from_record: bool):
        if original is None:  # nothing to regenerate: leave every output as it is (a verdict shown at load stays)
            yield {}
            return
        try:
            if not (from_record and self.record.find(original.recipe)):
                self.admission.charge_reproduction(original, visitor(request))
        except ValueError as error:  # over this visitor's share: said where "Regenerating…" stood, not left there
            yield spoken({"verdict_text": f"Not regenerated: {label_message(error, language(request))}"},
                         language(request))
            return
        for update in self.regenerate(original, request, progress, from_record):
            if "verdict" in update and update["verdict"]:
                update = {**update, "verdict_text": update["verdict"]["summary"]}
            yield spoken(update, language(request))

    def after_reproduce(self, verdict: dict | None, request: gr.Request | None = None) -> dict:
        """After /reproduce: the controls show the regenerated recipe, and the verdict its summary (in the visitor's
        language; /reproduce's own verdict stays English, data for scripts)."""
        if not verdict:
            return {}
        return {**restore(Recipe.from_dict(verdict["recipe"])), "original": None,
                "verdict_text": said(str(verdict.get("summary", "")), language(request)),
                "reverify": gr.Button(interactive=bool(verdict.get("served_from_record")))}

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

    def from_record(self, original: Original, request, what: str = "link") -> dict | None:
        """The verdict for an image this server already made, read back from its record; None if it has not.

        `what` the original is ("link" or "file") names it and the button that regenerates it in the verdict."""
        recorded = self.record.find(original.recipe)
        if recorded is None:
            return None
        result, entry = recorded
        verdict = compare(result, original)
        link = encode_link(result.recipe, result.fingerprint, result.environment, base_url(request))
        # Any visitor may open any link: the record says that this server made the image, never when (issue 34).
        # Nothing was regenerated: the verdict compares the image kept here with the link, and says so.
        found = (f"Exact match: the image kept here has the {what}'s pixel fingerprint" if verdict.exact
                 else verdict.summary.rstrip("."))
        summary = (f"Served from this server's record of the image it made: not regenerated now. {found} (press "
                   f"\"{AGAIN[what]}\" to make it again and compare).")
        return {"reproduced": entry.path, "reverify": gr.Button(interactive=True), "verdict_text": summary,
                "verdict": {**verdict.to_dict(), "summary": summary, "served_from_record": True,
                            "recipe": result.recipe.to_json(), "link": link}}

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
        with user_errors(request):
            model = self.admission.store.get(original.recipe.model)
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
                gr.Info("Stopped: the image was not regenerated.")
                yield {"reproduced": None, "verdict": None, "verdict_text": "Stopped before the image was regenerated."}
                return
        verdict = compare(result, original)
        with user_errors(request):  # an original made before SeedLab recorded CPU baselines may need native kernels
            result, verdict = retry_conventions(result, verdict, original, model)  # another ComfyUI's, A1111's noise
            if self.admission.native_retry:  # priced with its process start (Admission.charge_reproduction)
                result, verdict = retry_natively(result, verdict, original, device=model.device.type,
                                                 threads=torch.get_num_threads(), dtype=model.dtype)
            else:
                verdict = unretried_verdict(verdict, original, model.device.type)
        link = encode_link(result.recipe, result.fingerprint, result.environment, base_url(request))
        path = self.pngs.save(result)
        self.record.add(result, path)
        yield {"reproduced": path, "reverify": gr.Button(interactive=False),
               "verdict": {**verdict.to_dict(), "recipe": result.recipe.to_json(), "link": link,
                           "served_from_record": False}}
