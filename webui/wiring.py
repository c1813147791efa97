"""How the page's events are wired: updates by component name, the busy state, and the page's own script.

Every user action ends in exactly one of: success, refusal (a message; the page ready, nothing else
changed) or stop. Gradio runs `.then` steps only after an event that did not fail, so each generating
event resets the buttons with both `.then` (done or stopped) and `.failure` (refused): `Wiring.settles`.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import gradio as gr

from webui.i18n import sent

HERE = Path(__file__).resolve().parent

CSS = (HERE / "page.css").read_text()  # the stylesheet, loaded with the page
GENERATE = "Generate grid"
# The events' own scripts: the page script's helpers (page.js, window.seedlab), which the page loads first.
SHOW_CELL = "() => window.seedlab.showCell()"
SHOW_CELL_HERE = "() => window.seedlab.showCellHere()"
SHOW_ANCHOR = "() => window.seedlab.showAnchor()"
SHOW_SEEDS = "() => window.seedlab.showSeeds()"
SHOW_VERDICT = "(text) => window.seedlab.showVerdict(text)"
# The busy state, set in the browser (no round trip before the generation starts, which a server step cost: ~0.15 s
# and a page update): Generate and the vary button refuse clicks and say why, Stop works, the Stop note is cleared.
BUSY_LABEL = "Generating…"
BUSY = """() => [{__type__: 'update', value: %s, interactive: false}, {__type__: 'update', interactive: false},
                {__type__: 'update', interactive: true}, '']""" % json.dumps(sent(BUSY_LABEL))  # noqa: UP031 - JavaScript, as above
# The busy state, and where the run's cells will be, brought into view when they are out of it: `%s` the element's
# id, then BUSY.
SHOWING = "() => { window.seedlab.showPlace(%s); return (%s)(); }"
# Ready again after a run, set in the browser as well (see ready()).
READY = """() => [{__type__: 'update', value: %s, interactive: true}, {__type__: 'update', interactive: true},
                 {__type__: 'update', interactive: false}]""" % json.dumps(sent(GENERATE))  # noqa: UP031 - JavaScript, as above


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
    """The page's script (page.js) with the sampler menus' spellings (see spellings)."""
    lines = (HERE / "page.js").read_text().splitlines()
    while lines and lines[0].startswith("//"):  # the file's heading: Gradio takes the script as one expression
        lines.pop(0)
    return "\n".join(lines).replace("SPELLINGS", json.dumps(spelled))


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
    every = WIRED_OUTPUTS.setdefault(wired_key(inspect.unwrap(function)), set())  # the page's and the API's wrappers
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
    return gr.Button(sent(BUSY_LABEL), interactive=False), gr.Button(interactive=False), gr.Button(interactive=True)


def ready() -> tuple:
    """Nothing runs: Generate and the vary button work again; Stop has nothing to stop."""
    return gr.Button(sent(GENERATE), interactive=True), gr.Button(interactive=True), gr.Button(interactive=False)


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
