"""The page's wiring fails loudly (issue 56): every handler wired by name updates only components that some event
wired to it outputs, checked by walking each handler's return and yield statements, and an update nobody would see
raises when it is sent."""

import ast
import inspect
import textwrap

import gradio as gr
import pytest

from webui import wiring


def updated_names(function) -> set[str]:
    """The component names a handler's own return and yield statements update (string keys of dict displays)."""
    function = inspect.unwrap(function)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Return, ast.Yield)) and isinstance(node.value, ast.Dict):
            names |= {key.value for key in node.value.keys if isinstance(key, ast.Constant)
                      and isinstance(key.value, str)}
    return names


def test_every_handler_updates_only_what_its_events_output(tiny_page):
    _, app, wired = tiny_page
    names = {component: name for name, component in app.ui.items()}
    checked = 0
    for (owner, function), outputs in wired.items():
        updated = updated_names(function.__get__(owner) if owner is not None and hasattr(function, "__get__")
                                else function)
        if updated:
            checked += 1
            missing = updated - {names[component] for component in outputs}
            assert not missing, f"{function.__name__} updates {sorted(missing)}, which none of its events outputs"
    assert checked >= 10, f"only {checked} handlers were walked"


def test_an_update_for_a_component_no_event_outputs_raises():
    one, two = gr.Textbox(render=False), gr.Textbox(render=False)

    def handler():
        return {"two": "shown nowhere"}

    wired = wiring.by_name(handler, {"one": one, "two": two}, [one])
    with pytest.raises(KeyError, match="updates two, which no event wired to it outputs"):
        wired()
    wiring.by_name(handler, {"one": one, "two": two}, [two])  # another event of the handler outputs it
    assert wired() == gr.skip()  # not this event's output: left alone here
