"""The recipe's fields as Gradio controls and as handler parameters, derived from `seedlab.engine.recipe.SPECS`.

Adding a recipe field adds its control, its API keyword and its restore path here without edits:
each comes from the field's Spec (kind, label, help, range).
"""

from __future__ import annotations

import dataclasses
import html
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gradio as gr

from seedlab.engine.recipe import SPECS, SPECS_ORDER, Recipe, RecipeError
from webui.i18n import field_label, language, message_text, problem_text, words

# The fields every generating endpoint takes as keywords, after its own leading ones (prompt, seeds/seed).
FIELDS = tuple(name for name in SPECS_ORDER if name not in ("prompt", "seed"))
# Where a field's control sits in the layout: the fields the user sets most, then the seed's own fields.
RESTORED = ("prompt", "seeds", *FIELDS)  # the controls a recipe restores (a link, a PNG, a reproduction)
MAIN = ("model", "negative_prompt", "num_inference_steps", "guidance_scale", "scheduler", "schedule", "width", "height")
DETERMINISM = ("rng", "deterministic", "dtype")  # the model is a main control: it changes the picture altogether
HIRES = ("hires_scale", "hires_upscaler", "hires_steps", "denoising_strength", "hires_sampler", "hires_schedule",
         "hires_cfg", "hires_seed")
SAMPLING = ("eta", "eta_ddim", "eta_noise_seed_delta", "s_churn", "s_tmin", "s_tmax", "s_noise", "schedule_sigma_min",
            "schedule_sigma_max", "schedule_rho", "start_step", "end_step")  # A1111's and ComfyUI's sampler settings
LORA = ("loras", "lora_hashes", "ti_hashes", "vae", "vae_hash")  # with the VAE: what the models folder gives
PREVIEW = ("preview_steps",)  # beside the Preview button (webui/previews.py)
PROMPT_READING = ("prompt_syntax", "emphasis", "clip_skip")  # how the prompt box's text is read
# seed fields, any new
MORE = tuple(name for name in FIELDS
             if name not in MAIN + DETERMINISM + HIRES + SAMPLING + LORA + PREVIEW + PROMPT_READING)
# The closed groups under the main controls: (title, fields, element id), in the page's order.
ACCORDIONS = (("Prompt syntax, emphasis and clip skip", PROMPT_READING, "prompt-reading"),
              ("Hires fix (A1111 and ComfyUI samplers)", HIRES, "hires-fix"),
              ("Sampler settings (A1111 and ComfyUI samplers)", SAMPLING, "sampler-settings"),
              ("LoRA, embeddings and VAE", LORA, "lora-group"),
              ("Seed variation, resize and more", MORE, "seed-more"))


def control(name: str, value: Any, choices: list | None = None, **options: Any) -> gr.components.Component:
    """The control for recipe field `name`, starting at `value` (seeds are text: exact past 2**53)."""
    spec = SPECS[name]
    common = {"label": words(spec.label), "info": words(spec.help), "elem_id": name.replace("_", "-"), **options}
    if spec.kind == "seed":
        return gr.Textbox(value=spec.to_text(value), max_lines=1, **common)
    if spec.kind == "size":
        return gr.Textbox(value=spec.to_text(value), max_lines=1, placeholder="e.g. 512x512 (empty: off)", **common)
    # Numbers are checked by admission, not by the widget: a refusal then names the field and its range,
    # and 2.5 steps is refused rather than silently rounded.
    if spec.kind == "int":
        return gr.Number(value=value, step=spec.multiple, **common)
    if spec.kind == "float":  # not a Slider: its own range check fails without a message on API input
        return gr.Number(value=value, step=0.05 if spec.high <= 1 else 0.5, **common)
    if spec.kind == "bool":
        return gr.Checkbox(value=value, **common)
    if spec.kind == "choice" or choices is not None:
        return gr.Dropdown(choices if choices is not None else list(spec.choices), value=value,
                           allow_custom_value=True, **common)
    return gr.Textbox(value=value, **common)


def widget_value(name: str, value: Any) -> Any:
    """A recipe value as its control shows it (seeds and sizes as text)."""
    spec = SPECS[name]
    return spec.to_text(value) if spec.kind in ("seed", "size") else value


def values_of(recipe: Recipe) -> dict[str, Any]:
    """Every field's widget value for a recipe; "seeds" is the seeds box, which gets the one seed."""
    values = {name: widget_value(name, value) for name, value in recipe.to_dict().items()}
    return {**values, "seeds": values["seed"]}


def with_fields(function: Callable, leading: tuple[str, ...], limits: Any = None) -> Callable:
    """`function(values: dict, request, progress)` as a handler whose parameters are `leading` + FIELDS.

    Gradio names API parameters after the handler's signature, so the public API's keywords are the
    recipe's field names; every field defaults to None (unset: the chosen model's default). Gradio
    passes the request and the progress tracker after the inputs, found by annotation and default.
    """
    names = (*leading, *FIELDS)

    def handler(*args):
        values, (request, progress) = dict(zip(names, args)), args[len(names):]
        yield from function(values, request, progress)

    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(name, positional, default=inspect.Parameter.empty if name == "prompt" else None)
                  for name in names]
    parameters += [inspect.Parameter("request", positional, default=None, annotation=gr.Request),
                   inspect.Parameter("progress", positional, default=gr.Progress())]
    handler.__signature__ = inspect.Signature(parameters)
    handler.__annotations__ = {"request": gr.Request}
    handler.__name__, handler.__doc__ = function.__name__, documented(function.__doc__ or "", names, limits)
    handler.__wrapped__ = function  # the handler it serves (by_name counts a handler's events through wrappers)
    return handler


# The API's own parameters beside the recipe's fields, described for its docs and MCP tools.
LEADING = {
    "prompt": "what the image shows (text, at most the server's prompt limit)",
    "seeds": 'the seeds: "42", a range "0-7" or a list "3, 17, 99"; each 0 to 18446744073709551615',
    "seed": "the seed every variation is made from (0 to 18446744073709551615, as text or a number)",
    "variations": 'prompt variations, one per line (", highly realistic"): each appended to the prompt',
    "x": 'the X axis, "NAME: VALUES" over any recipe field or prompt_sr, with A1111\'s value syntax ("seed: 1-5 (+2)")',
    "y": 'the Y axis (optional), as the X axis ("num_inference_steps: 10, 20")',
    "z": 'the Z axis (optional): a sheet per value ("guidance_scale: 2, 3")',
    "frames": "seed travel: frames per segment, 2 to 100 (the first is the seed's own image, the last the next's)",
    "curve": "seed travel: how the variation strength rises from frame to frame: linear, ease-in, ease-out or "
             "ease-in-out",
}


# Fields whose range a server narrows (serving/limits.py), and the limit that does.
LIMITED = {"num_inference_steps": "max_steps", "hires_steps": "max_steps", "width": "max_size", "height": "max_size"}


def documented(doc: str, names: tuple[str, ...], limits: Any = None) -> str:
    """A handler's docstring with an Args section naming every parameter (Gradio's API page and MCP tools read it),
    each range as this server's `limits` allow it."""
    lines = []
    for name in names:
        if name in LEADING:
            lines.append(f"    {name}: {LEADING[name]}")
        elif name in SPECS:
            spec = SPECS[name]
            if limits is not None and name in LIMITED:
                spec = dataclasses.replace(spec, high=min(spec.high, getattr(limits, LIMITED[name])))
            lines.append(f"    {name}: {spec.label}: {spec.help or spec.allowed()} (allowed: {spec.allowed()}; "
                         "empty: the model's default)")
    summary = inspect.cleandoc(doc).split("\n\n")[0]
    return f"{summary}\n\nArgs:\n" + "\n".join(lines)


def label_message(error: ValueError, lang: str = "en") -> str:
    """A backend error for people: fields named by their visible labels, every bad field at once, in `lang`
    (webui/i18n.py: the commonest refusals' fixed parts have Chinese; the rest stays English)."""
    if isinstance(error, RecipeError) and lang != "en":
        return "；".join(f"{field_label(bad.field, lang)}：{problem_text(bad.problem, lang)}" for bad in error.errors)
    if isinstance(error, RecipeError):
        return error.named(lambda field: SPECS[field].label if field in SPECS else field)
    return message_text(str(error), lang)


@contextmanager
def user_errors(request: gr.Request | None = None) -> Iterator[None]:
    """Show a backend ValueError as a gr.Error naming fields by their labels, with no traceback, in the language of
    the visitor who sent `request` (Gradio translates only what its front end draws, never a server's message)."""
    try:
        yield
    except ValueError as error:  # Gradio renders an error's text as HTML: a visitor's value must stay text
        message = label_message(error, language(request))
        raise gr.Error(html.escape(message, quote=False), print_exception=False) from None


def page_defaults(admission: Any) -> dict[str, Any]:
    """Every control's starting value on the page (a serving.admission.Admission's defaults): prompts typed on the
    page are read as A1111 reads them where the default model is one A1111 runs (links and the API: plain)."""
    defaults = admission.defaults()
    if admission.store.info(admission.store.default).a1111_prompts:
        defaults["prompt_syntax"] = "a1111"
    return defaults


def restore(recipe: Recipe) -> dict:
    """The controls' new values for a recipe (the seeds box gets its one seed)."""
    values = values_of(recipe)
    return {name: values[name] for name in RESTORED}
