"""The reproduce panel's layout (at the top of the page) and its events; its handlers are in webui.reproduction.

A link opens at once with the page (from this server's record, else regenerated); so does a dropped SeedLab PNG
that runs as written. Another tool's file waits for its button: its recipe often needs adjusting first.
"""

from __future__ import annotations

import gradio as gr

from webui.cells import ANCHOR, CELL
from webui.fields import RESTORED
from webui.i18n import words
from webui.wiring import PRIVATE, SHOW_VERDICT, Wiring, busy, by_name, only_if_pending, ready

# The image beside the original: regenerated now, or read back from this server's record of what it made (the
# verdict says which). Its label says which too, so an image read back from the record is never called regenerated.
MADE_HERE = "Made on this server"
VERDICT = ("reproduced", "verdict", "verdict_text", "reverify")  # what a regeneration (or the record) shows


def reproduction_panel(ui: dict) -> None:
    """The "Reproduce a link, a recipe or an image" accordion, added to `ui` by name.

    At the top of the page, so that the verdict and the image a link opens are the first thing a visitor
    sees; closed (one line) otherwise.
    """
    with gr.Accordion(words("Reproduce a link, a recipe or an image"), open=False,
                      elem_id="reproduction") as ui["reproduction"], gr.Row():
        with gr.Column(scale=2):
            ui["link_box"] = gr.Textbox(label=words("Link or recipe (JSON)"), lines=2, elem_id="link-or-recipe",
                                        placeholder="http://…/?v=1&prompt=…  or  {\"prompt\": …}")
            with gr.Row():
                ui["reproduce"] = gr.Button(words("Regenerate the link and compare"), elem_id="reproduce")
                # A link this server made opens from its record; this regenerates it to check.
                ui["reverify"] = gr.Button(words("Re-verify by regenerating"), interactive=False, elem_id="reverify")
            ui["png_file"] = gr.File(label=words("Drop an image made by SeedLab or another tool (PNG, JPEG, WebP)"),
                                     file_types=[".png", ".jpg", ".jpeg", ".webp"],
                                     type="filepath", elem_id="png-drop", height=120)
            ui["png_notes"] = gr.Textbox(label=words("What the image restored"), interactive=False, lines=3,
                                         elem_id="png-notes")
            with gr.Row():
                ui["regenerate_png"] = gr.Button(words("Regenerate the dropped image and compare"), interactive=False,
                                                 elem_id="regenerate-png")
                # For an image too large for this server: the same seed smaller, its noise kept.
                ui["use_nearest"] = gr.Button(words("Use the nearest runnable recipe"), interactive=False,
                                              elem_id="use-nearest")
            ui["png_nearest"] = gr.State(None)  # that recipe (JSON), until the next drop
            ui["png_now"] = gr.State(None)  # a dropped SeedLab PNG's original, regenerated as soon as it is read
        with gr.Column(scale=3):
            ui["verdict_text"] = gr.Textbox(label=words("Verdict"), interactive=False, lines=3, elem_id="verdict")
            with gr.Row(equal_height=False):  # the dropped image beside what it regenerated
                ui["original"] = gr.Image(label="Original (the dropped image)", type="filepath", interactive=False,
                                          height=280, elem_id="original", elem_classes="pixelated")
                ui["reproduced"] = gr.Image(label=MADE_HERE, type="filepath", format="png",
                                            interactive=False, height=280, elem_id="reproduced",
                                            elem_classes="pixelated")
            ui["verdict_anchor"] = gr.Button("Make this image the anchor", interactive=False,
                                             elem_id="verdict-anchor")
            with gr.Accordion("Verdict (JSON)", open=False):
                ui["verdict"] = gr.JSON(label=words("Verdict"), elem_id="verdict-json")


def regenerated_at_once(wiring: Wiring, opened, state: str, handler) -> dict:
    """After `opened` (a page load, a drop): while the original in `state` is regenerated, the page is busy (Stop
    works); a page or file with none leaves the buttons alone, or a click in that moment would be refused.

    Returns the regeneration's event (for Stop)."""
    ui, verdict = wiring.ui, [wiring.ui[name] for name in VERDICT]
    then = opened.then(only_if_pending(busy), ui[state], wiring.buttons, queue=False, show_progress="hidden",
                       **PRIVATE)
    regenerating = then.then(by_name(handler, ui, verdict), ui[state], verdict, concurrency_id="generation", **PRIVATE)
    for ends in (regenerating.then, regenerating.failure):
        ends(only_if_pending(ready), ui[state], wiring.buttons, queue=False, show_progress="hidden", **PRIVATE)
    return regenerating


def wire_reproduction(wiring: Wiring, demo: gr.Blocks, reproduction) -> list:  # a webui.reproduction.Reproduction
    """The panel's events; returns its generating ones (for Stop). /reproduce and /reverify are public."""
    ui, event, guarded = wiring.ui, wiring.event, wiring.guarded
    restored, verdict = [ui[name] for name in RESTORED], list(VERDICT)
    # Links: restore the controls at once, then regenerate (or read back from the record) and show the verdict.
    opened = event(demo.load, reproduction.open_link, None, ["link_box", *RESTORED, *verdict, "pending",
                                                             "reproduction", "original"], queue=False, **PRIVATE)
    link = regenerated_at_once(wiring, opened, "pending", reproduction.reproduce_linked)
    reproduce = event(guarded([ui["reproduce"].click]), reproduction.reproduce, [ui["link_box"]],
                      ["reproduced", "verdict"], api_name="reproduce", concurrency_id="generation")
    reverify = event(guarded([ui["reverify"].click]), reproduction.reverify, [ui["link_box"]],
                     ["reproduced", "verdict"], api_name="reverify", concurrency_id="generation")
    after = restored + [ui["verdict_text"], ui["reverify"], ui["original"]]
    for reproducing in (reproduce, reverify):
        reproducing.success(by_name(reproduction.after_reproduce, ui, after), ui["verdict"], after, queue=False,
                            **PRIVATE)
    # A dropped image: every field it holds restored; a SeedLab PNG then gets its verdict as a link does (from the
    # record with the drop, else regenerated at once), another tool's file when its button is pressed.
    dropped = ["png_notes", "pending", "png_now", "regenerate_png", "png_nearest", "use_nearest", "original", *verdict]
    read = event(ui["png_file"].upload, reproduction.open_png, [ui["png_file"]], [*RESTORED, *dropped], **PRIVATE)
    drop = regenerated_at_once(wiring, read, "png_now", reproduction.reproduce_pending)
    event(ui["png_file"].clear, reproduction.clear_png, None, dropped, queue=False, **PRIVATE)
    event(ui["use_nearest"].click, reproduction.use_nearest, [ui["png_nearest"]], [*RESTORED, "png_notes"],
          queue=False, **PRIVATE)
    png = event(guarded([ui["regenerate_png"].click]), reproduction.reproduce_dropped, [ui["pending"]], verdict,
                concurrency_id="generation", **PRIVATE)
    # The regenerated image can be the anchor (the cell outputs show it as the selection).
    event(ui["verdict_anchor"].click, reproduction.verdict_anchor, [ui["verdict"]], [*ANCHOR, *CELL], queue=False,
          **PRIVATE)
    # On a phone: the verdict in view (the link box and the drop area come first).
    ui["verdict_text"].change(None, ui["verdict_text"], None, js=SHOW_VERDICT, queue=False, **PRIVATE)
    ui["verdict"].change(by_name(reproduction.verdict_ready, ui, [ui["verdict_anchor"]]), ui["verdict"],
                         ui["verdict_anchor"], queue=False, **PRIVATE)
    wiring.settles(reproduce, reverify, png)
    return [link, drop, reproduce, reverify, png]
