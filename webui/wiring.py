"""How the page's events are wired: updates by component name, the busy state, and the page's own script.

Every user action ends in exactly one of: success, refusal (a message; the page ready, nothing else
changed) or stop. Gradio runs `.then` steps only after an event that did not fail, so each generating
event resets the buttons with both `.then` (done or stopped) and `.failure` (refused): `Wiring.settles`.
"""

from __future__ import annotations

import inspect
import json

import gradio as gr

CSS = """
.pixelated img { image-rendering: pixelated; }  /* 64x64 images, enlarged with crisp pixels */
#reproduced img, #original img, #cell-image img { width: 256px; max-width: 100%; height: 256px; object-fit: contain; }  /* not at its native 64 px */
/* Gradio gives every column at least 100 px, which pushes the last cells out of a phone-wide gallery:
   columns share the width instead, and narrow screens get two (three for the matrix, whose rows are seeds). */
.cells .grid-container { grid-template-columns: repeat(var(--grid-cols), minmax(0, 1fr)) !important; }
@media (max-width: 480px) {
    .cells:not(#matrix) .grid-container { grid-template-columns: repeat(2, minmax(0, 1fr)) !important; }
    .cells .caption-label { white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
                            height: auto !important; max-height: none !important; font-size: 11px; }
}
/* A caption under its image, not over it (it covered a nudge's image, and half a variation cell on a phone). */
.cells .thumbnail-item { aspect-ratio: auto !important; height: auto !important; display: flex !important;
                         flex-direction: column; }
.cells .thumbnail-item > img { aspect-ratio: 1 / 1; height: auto !important; flex: none; }
.cells .caption-label { position: static !important; max-width: none !important; opacity: 1 !important;
                        border: 0 !important; border-top: 1px solid var(--border-color-primary) !important;
                        border-radius: 0 !important; }
/* Travel captions wrap under their frame: a seed has up to 20 digits, which no cell of five in a row fits on one line. */
#travel .caption-label { white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
                         overflow-wrap: anywhere; height: auto !important; max-height: none !important; }
/* The Selected image panel beside far cells (a plot, the matrix): fixed at the right, the page beside it. */
#cell-panel.floating { position: fixed !important; right: 16px; top: 16px; width: min(400px, 30vw) !important;
    max-height: calc(100vh - 32px); overflow: auto; z-index: 100; box-shadow: 0 6px 28px rgba(0, 0, 0, 0.3); }
body.cell-floating .gradio-container { padding-right: calc(min(400px, 30vw) + 32px) !important; }
/* A gallery is as tall as its images: no empty box under a row of cells. */
.cells .grid-wrap.fixed-height { min-height: 0 !important; max-height: none !important; }
/* Fullscreen shows the image as large as the screen allows (its 64 px pixels crisp), not at 256 px. */
#cell-image.fullscreen img, #reproduced.fullscreen img, #original.fullscreen img { width: min(100vw, 100vh) !important;
    height: min(100vw, 100vh) !important; max-width: none !important; }
/* No dropped image, no "Original" frame: a link's verdict and image come first (an empty frame pushed them down). */
#original:not(:has(img)) { display: none !important; }
"""  # noqa: E501 - the stylesheet's text as the page gets it (three long lines, reflowing would change the text)
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
    // A sampler typed as a tool writes it ("euler", "Euler", "DDIM") and Enter: that exact sampler, not the first
    // menu entry containing the text (typing euler picked "Euler a (A1111)", another sampler).
    const spellings = SPELLINGS;
    document.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" || !(event.target instanceof Element)) return;
        const input = event.target.closest("#scheduler input, #hires-sampler input");
        const label = input ? spellings[input.value.trim()] : undefined;
        if (label === undefined) return;
        event.preventDefault();
        event.stopImmediatePropagation();
        input.value = label;  // the menu takes a typed label that is one of its own when it loses the focus
        input.dispatchEvent(new Event("input", {bubbles: true}));
        input.blur();
    }, true);
    document.body.dataset.seedlab = "ready";  // the shortcuts work from here on (tests wait for it)
}
"""
GENERATE = "Generate grid"
# After a click on any cell: the Selected image panel scrolled into view (a no-op where it already is).
# After a click on a grid or variation cell: the Selected image panel docked under the grid and scrolled into view,
# its top first where it does not fit, so a panel taller than the window shows its title, not its bottom.
SHOW_CELL = """() => {
    const panel = document.querySelector('#cell-panel');
    if (!panel) return;
    panel.classList.remove('floating');
    document.body.classList.remove('cell-floating');
    const box = panel.getBoundingClientRect();
    if (box.top < 0 || box.bottom > innerHeight) {
        panel.scrollIntoView({block: box.top < 0 || box.height > innerHeight ? 'start' : 'nearest'});
    }
}"""
# A click on a cell far down the page (a plot, the matrix, travel, nudges, history) on a wide screen: the panel
# floats at the side instead, so the page stays where the cells are compared; on a phone it is scrolled to.
SHOW_CELL_HERE = """() => {
    const panel = document.querySelector('#cell-panel');
    if (!panel) return;
    if (innerWidth < 1024) return (%s)();
    if (panel.classList.contains('floating')) return;
    // the page makes room beside it: what is at the middle of the screen stays where it is
    const middle = document.elementFromPoint(innerWidth / 2, innerHeight / 2);
    const before = middle ? middle.getBoundingClientRect().top : 0;
    panel.classList.add('floating');
    document.body.classList.add('cell-floating');
    if (middle) scrollBy(0, middle.getBoundingClientRect().top - before);
}""" % SHOW_CELL  # noqa: UP031 - JavaScript text: an f-string would double each of its braces
# After "Make anchor": the anchor in view (the panel docked again), where the next step, the variations, starts.
SHOW_ANCHOR = """() => {
    document.querySelector('#cell-panel')?.classList.remove('floating');
    document.body.classList.remove('cell-floating');
    document.querySelector('#anchor')?.scrollIntoView({block: 'center'});
}"""
SHOW_SEEDS = "() => { document.querySelector('#seeds')?.scrollIntoView({block: 'nearest'}); }"
# The busy state, set in the browser (no round trip before the generation starts, which a server step cost: ~0.15 s
# and a page update): Generate and the vary button refuse clicks and say why, Stop works, the Stop note is cleared.
BUSY_LABEL = "Generating…"
BUSY = """() => [{__type__: 'update', value: %s, interactive: false}, {__type__: 'update', interactive: false},
                {__type__: 'update', interactive: true}, '']""" % json.dumps(BUSY_LABEL)  # noqa: UP031 - JavaScript, as above
# The busy state, and where the run's cells will be brought into view when they are out of it (a phone: the grid is
# ~1,900 px under Generate): `%s` the element's id.
SHOWING = """() => { const place = document.getElementById(%s);
    if (place && place.getBoundingClientRect().top > innerHeight) place.scrollIntoView({block: 'start'});
    return (%s)(); }"""
# A verdict (a link opened, an image dropped or regenerated) in view where it is below the screen: on a phone the
# panel's first column, the link box and the drop area, comes first. It may be laid out a few frames after its text
# arrives, so this looks for up to 2 s.
SHOW_VERDICT = """(text) => {
    if (!text) return;
    const started = performance.now();
    const look = () => {
        const verdict = document.getElementById('verdict');
        const box = verdict ? verdict.getBoundingClientRect() : null;
        if (box && box.height > 0) {
            if (box.top > innerHeight) verdict.scrollIntoView({block: 'start'});
        } else if (performance.now() - started < 2000) requestAnimationFrame(look);
    };
    look();
}"""
# Ready again after a run, set in the browser as well (see ready()).
READY = """() => [{__type__: 'update', value: %s, interactive: true}, {__type__: 'update', interactive: true},
                 {__type__: 'update', interactive: false}]""" % json.dumps(GENERATE)  # noqa: UP031 - JavaScript, as above


def spellings(choices: list) -> dict[str, str]:
    """What a visitor may type for each sampler menu entry (its label, its value, its label without "(A1111)" or
    "(ComfyUI)") -> the entry's label; the first entry keeps a spelling two share."""
    known: dict[str, str] = {}
    for choice in choices:
        label, value = choice if isinstance(choice, tuple) else (choice, choice)
        for typed in (label, value, label.removesuffix(" (A1111)"), label.removesuffix(" (ComfyUI)")):
            if typed:
                known.setdefault(typed, label)
    return known


def page_js(spelled: dict[str, str]) -> str:
    """The page's script: SHORTCUTS with the sampler menus' spellings (see spellings)."""
    return SHORTCUTS.replace("SPELLINGS", json.dumps(spelled))


# Every component some event wired to a handler outputs, by handler: one handler serves several events (Reuse seed
# and Make anchor share one), so an update is for one of them at least, else it is a wiring mistake.
WIRED_OUTPUTS: dict = {}


def wired_key(function):
    """A handler's key in WIRED_OUTPUTS: a bound method by its object and function (each access makes a new one)."""
    return (getattr(function, "__self__", None), getattr(function, "__func__", function))


def by_name(function, components: dict, outputs: list):
    """Wire a handler that returns (or yields) updates keyed by component name to Gradio's dict-by-component form.

    An update for a component that does not exist, or that no event wired to this handler outputs, raises: it would
    be an update nobody sees (a button that silently does nothing)."""
    allowed = set(outputs)
    every = WIRED_OUTPUTS.setdefault(wired_key(function), set())
    every.update(outputs)

    def convert(update: dict | None):
        unknown = [name for name in update or {} if name not in components]
        if unknown:
            raise KeyError(f"{function.__name__} updates components that do not exist: {', '.join(unknown)}")
        unwired = [name for name in update or {} if components[name] not in every]
        if unwired:
            raise KeyError(f"{function.__name__} updates {', '.join(unwired)}, which no event wired to it outputs")
        # A component another event of this handler outputs is left alone here.
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
    return gr.Button(BUSY_LABEL, interactive=False), gr.Button(interactive=False), gr.Button(interactive=True)


def ready() -> tuple:
    """Nothing runs: Generate and the vary button work again; Stop has nothing to stop."""
    return gr.Button(GENERATE, interactive=True), gr.Button(interactive=True), gr.Button(interactive=False)


def refused(count: int):
    """After a refusal: the buttons ready, and `count` outputs left as they are (see Wiring.settles)."""
    def ready_again() -> tuple:
        return (*ready(), *(gr.skip() for _ in range(count)))
    return ready_again


def only_if_pending(change):
    """`change` (busy or ready) when the page opened a link it regenerates; otherwise the buttons stay."""
    def apply(pending):
        return change() if pending is not None else (gr.skip(), gr.skip(), gr.skip())
    apply.__name__ = change.__name__
    return apply


class Wiring:
    """Events between components named in `ui`: handlers return updates keyed by name (see by_name)."""

    def __init__(self, ui: dict):
        self.ui = ui
        # While this page generates, Generate and the vary button say so and refuse a second click; Stop works.
        self.buttons = [ui["generate"], ui["vary_button"], ui["stop"]]
        self.outputs: dict[int, list] = {}  # an event's output components, by its dependency id

    def event(self, trigger, function, inputs: list, outputs: list[str], **options):
        """`trigger(function)` with `inputs` (components) and `outputs` by name; returns the dependency."""
        targets = [self.ui[name] for name in outputs]
        dependency = trigger(by_name(function, self.ui, targets), inputs, targets, **options)
        self.outputs[dependency["id"]] = targets
        return dependency

    def guarded(self, triggers: list, shows: str | None = None):
        """The busy step on `triggers` (in the browser: BUSY), then (through the returned `.then`) the generation it
        guards; `shows`: the id of the element its cells fill, scrolled into view when it is below the screen.

        The busy step runs first and the generation follows it (events on one trigger have no set order).
        """
        js = BUSY if shows is None else SHOWING % (json.dumps(shows), BUSY)
        return gr.on(triggers, None, None, [*self.buttons, self.ui["busy_note"]], js=js, queue=False,
                     show_progress="hidden", **PRIVATE).then

    def settles(self, *events) -> None:
        """The page is ready again however each event ends: done or stopped (.then, in the browser: READY), refused
        (.failure).

        A refusal is said once, in its message: the refused event's outputs, which Gradio marks with an
        "Error" badge, are touched (left as they are) by the .failure step, whose success clears the badge.
        """
        for event in events:
            event.then(None, None, self.buttons, js=READY, queue=False, show_progress="hidden", **PRIVATE)
            touched = self.outputs.get(event["id"], [])
            event.failure(refused(len(touched)), None, [*self.buttons, *touched], queue=False,
                          show_progress="hidden", **PRIVATE)

    def says_vary_note(self, function) -> None:
        """The vary note as soon as the prompt box differs from the anchor's prompt (said before the run)."""
        for changed in (self.ui["prompt"].change, self.ui["anchor_text"].change):
            self.event(changed, function, [self.ui["prompt"], self.ui["anchor"]], ["vary_note"], queue=False,
                       trigger_mode="always_last", show_progress="hidden", **PRIVATE)

    def shows_cell(self, trigger, function, inputs: list, outputs: list[str], floating: bool = False) -> None:
        """A click on a cell: its updates, then the Selected image panel scrolled into view (or, for cells far
        from it, floating beside them on a wide screen)."""
        self.event(trigger, function, inputs, outputs, queue=False, **PRIVATE).then(
            None, js=SHOW_CELL_HERE if floating else SHOW_CELL, queue=False, **PRIVATE)


PRIVATE = {"api_visibility": "private"}  # the page's own events: not in the API, not MCP tools
