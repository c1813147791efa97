"""Plot axes: "NAME: VALUES" as A1111's X/Y/Z plot writes them, parsed into recipe values.

NAME is a recipe field (seed, num_inference_steps, scheduler, ...), `size` (WxH: width and height
together), `prompt_sr` (A1111's Prompt S/R), a field's label or one of A1111's axis labels ("Seed",
"Var. seed", "Steps", "CFG Scale", "Prompt S/R", "Sampler", ...). VALUES are A1111's: "1, 5, 9" (CSV:
"a, b" in quotes is one value), "1-5", "1-5 (+2)", "1-10 [5]" (five values evenly spaced, rounded for
whole-number fields), "0.1-0.5 (+0.1)", and -1 on a seed axis draws a seed. Every value is checked by
its field's own rules.
"""

from __future__ import annotations

import csv
import difflib
import math
import random
import re
from dataclasses import dataclass
from typing import Any

from ..engine.recipe import SPECS, FieldError
from ..engine.samplers.names import is_ksampler, schedule_label
from ..engine.seeds import random_seeds
from ..files.formats import SAMPLERS

MAX_AXIS_CHARS = 100_000  # an axis as typed: 1,000 values of up to 100 characters
MAX_AXIS_VALUES = 1000  # values on one axis; the cells of a plot are bounded by the caller's max_cells
SPECIAL = {"size": "Size", "prompt_sr": "Prompt S/R"}  # axes that are not one recipe field
TYPED = ("scheduler", "hires_sampler")  # axes whose values are labelled as typed (A1111's sampler names)
# A1111's axis labels (scripts/xyz_grid.py), matched without regard to case.
A1111_AXES = {
    "Seed": "seed", "Var. seed": "variation_seed", "Var. strength": "variation_strength",
    "Steps": "num_inference_steps", "CFG Scale": "guidance_scale", "Prompt S/R": "prompt_sr",
    "Sampler": "scheduler", "Checkpoint name": "model", "Size": "size", "RNG source": "rng",
    "Negative prompt": "negative_prompt", "Schedule type": "schedule", "Hires sampler": "hires_sampler",
    "Eta": "eta", "Sigma Churn": "s_churn", "Sigma min": "s_tmin", "Sigma max": "s_tmax", "Sigma noise": "s_noise",
    "Schedule min sigma": "schedule_sigma_min", "Schedule max sigma": "schedule_sigma_max",
    "Schedule rho": "schedule_rho", "Hires steps": "hires_steps", "Hires upscaler": "hires_upscaler",
    "Denoising": "denoising_strength",
}
_NUMBER = r"[0-9]+(?:\.[0-9]*)?"
_RANGE = re.compile(rf"^({_NUMBER})\s*-\s*({_NUMBER})\s*(?:\(\s*([+-]?\s*{_NUMBER})\s*\)|\[\s*([0-9]+)\s*\])?$")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True)
class Axis:
    """One axis of a plot: the field it sets and its values (typed, and as text for legends and JSON)."""

    name: str  # a recipe field, "size" or "prompt_sr"
    values: tuple[Any, ...]
    texts: tuple[str, ...]

    @property
    def label(self) -> str:
        """The axis as a person reads it: the field's UI label, "Size" or "Prompt S/R"."""
        return SPECIAL.get(self.name) or SPECS[self.name].label

    @property
    def fields(self) -> tuple[str, ...]:
        """The recipe fields this axis sets."""
        return {"size": ("width", "height"), "prompt_sr": ("prompt",)}.get(self.name, (self.name,))

    def changes(self, index: int, prompt: str) -> dict[str, Any]:
        """The recipe fields of value `index`; Prompt S/R replaces its first value in `prompt`."""
        value = self.values[index]
        if self.name == "size":
            return {"width": value[0], "height": value[1]}
        if self.name == "prompt_sr":
            return {"prompt": prompt.replace(self.values[0], value)}
        return {self.name: value}

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "values": list(self.texts)}


def axis_name(name: str) -> str:
    """The field an axis NAME means: a field name, `size`, `prompt_sr`, a field's label or A1111's axis label."""
    key = " ".join(name.split()).lower()
    if key.replace(" ", "_") in {*SPECS, *SPECIAL}:
        return key.replace(" ", "_")
    labels = {**{spec.label.lower(): field for field, spec in SPECS.items()},
              **{label.lower(): field for label, field in A1111_AXES.items()}}
    if key in labels:
        return labels[key]
    close = close_axes(key)
    if close:
        raise ValueError(f"{name.strip()[:40]!r} is not an axis; did you mean {' or '.join(close)}?")
    raise ValueError(f"{name.strip()[:40]!r} is not an axis; use one of A1111's labels ({', '.join(A1111_AXES)}) or "
                     "a recipe field's name (such as guidance_scale)")


def close_axes(key: str, most: int = 3) -> list[str]:
    """The axis names nearest a mistyped one (difflib, and names that start with it or hold it as a word), each as
    A1111's label where it has one: "cfg" -> CFG Scale."""
    label_of = {field: label for label, field in A1111_AXES.items()}
    names = {name: name for name in [*SPECS, *SPECIAL]}
    names.update({spec.label.lower(): field for field, spec in SPECS.items()})
    names.update({label.lower(): field for label, field in A1111_AXES.items()})
    names.update({spec.link: field for field, spec in SPECS.items() if spec.link and len(spec.link) > 2})  # a link's
    found = [name for name in names if name == key]  # "cfg": a link's key, not an axis name (h, w and hr would clash)
    found += [name for name in names if key and name.startswith(key)]
    found += [name for name in names if key and key in name.replace("_", " ").split()]
    found += difflib.get_close_matches(key, list(names), n=most, cutoff=0.7)
    fields = list(dict.fromkeys(names[name] for name in found))[:most]
    return [label_of.get(field, SPECS[field].label if field in SPECS else SPECIAL[field]) + f" ({field})"
            for field in fields]


def parse_axes(texts: list[tuple[str | None, str]], rng: random.Random | None = None) -> list[Axis | None]:
    """Several axes ("NAME: VALUES" each, with the option that names it; None or "" for none) parsed together:
    one ValueError naming every bad axis at once, so one pass over the plot's form fixes them all."""
    axes, problems = [], []
    for text, option in texts:
        try:
            axes.append(parse_axis(text, option, rng) if text else None)
        except ValueError as error:
            problems.append(str(error))
    if problems:
        raise ValueError("; ".join(problems))
    return axes


def parse_axis(text: str, option: str = "axis", rng: random.Random | None = None) -> Axis:
    """Parse "NAME: VALUES" into an Axis; ValueError naming `option`, the axis, the value and what is allowed.

    Values are checked against the field's Spec here; what a server allows (its models, schedulers,
    limits) is checked when cells are made (plot_recipes). -1 on a seed axis draws a seed from `rng`
    (the OS entropy pool by default), and the Axis keeps the drawn seed.
    """
    if not isinstance(text, str) or ":" not in text:
        raise ValueError(f'{option} must be "NAME: VALUES", such as "seed: 1-5" or "Steps: 10, 20", got {text!r:.60}')
    if len(text) > MAX_AXIS_CHARS:  # before any splitting: a 100 MB axis must cost no more than reading it
        raise ValueError(f"{option} is {len(text):,} characters long; at most {MAX_AXIS_CHARS:,} are read")
    name_text, values_text = text.split(":", 1)
    try:
        name = axis_name(name_text)
    except ValueError as error:
        raise ValueError(f"{option}: {error}") from None
    label = SPECIAL.get(name) or SPECS[name].label
    try:
        items = [item.strip() for item in next(csv.reader([values_text], skipinitialspace=True), [])]
    except csv.Error as error:
        raise ValueError(f"{option}: {label} values cannot be read ({error})") from None
    items = [item for item in items if item]
    if not items:
        raise ValueError(f"{option}: {label} needs at least one value")
    values: list[Any] = []
    texts: list[str] = []
    for item in items:
        try:
            found = _values(name, item, rng)
            values += found
        except FieldError as error:
            raise ValueError(f"{option}: {label} value {item!r:.60} {error.problem}") from None
        except ValueError as error:
            raise ValueError(f"{option}: {label} value {item!r:.60}: {error}") from None
        if len(values) > MAX_AXIS_VALUES:
            raise ValueError(f"{option}: {label} has more than {MAX_AXIS_VALUES} values")
        # A sampler is labelled as typed ("DDIM", not the class it runs as, DDIMScheduler); other values as read.
        texts += [item] if name in TYPED else [_text(name, value) for value in found]
    if name == "prompt_sr" and len(values) < 2:
        raise ValueError(f"{option}: Prompt S/R needs the text to find and at least one replacement, "
                         'such as "red, blue"')
    return Axis(name, tuple(values), tuple(texts))


def _values(name: str, item: str, rng: random.Random | None) -> list[Any]:
    """The typed values one comma-separated item stands for (a range gives several)."""
    if name == "prompt_sr":
        return [item]
    if name == "size":
        size = SPECS["seed_resize_from"].coerce(item)
        if not isinstance(size, tuple):
            raise ValueError(f"must be WIDTHxHEIGHT, such as 64x64 ({SPECS['width'].allowed()} each)")
        return [(SPECS["width"].check("width", size[0]), SPECS["height"].check("height", size[1]))]
    spec = SPECS[name]
    if spec.kind == "seed" and item == "-1":
        return random_seeds(1, rng)
    if spec.kind in ("seed", "int", "float") and (match := _RANGE.match(item)):
        return [spec.check(name, value) for value in _range(spec.kind != "float", *match.groups())]
    if spec.kind == "bool":
        if item.lower() not in (*_TRUE, *_FALSE):
            raise FieldError(name, f"must be {spec.allowed()}, got {item!r}")
        return [item.lower() in _TRUE]
    if name == "scheduler" and not is_ksampler(item):
        item = SAMPLERS.get(item, item)  # A1111's other sampler names ("DDIM", "UniPC") as diffusers classes
    if name in ("schedule", "hires_schedule"):
        item = schedule_label(item) or item  # "karras", "SGMUniform": A1111's other spellings
    return [spec.check(name, spec.coerce(item))]


def _range(whole: bool, first: str, last: str, step: str | None, count: str | None) -> list[int | float]:
    """A1111's ranges: "1-5" (step 1 towards the end), "1-5 (+2)", "1-10 [5]" (evenly spaced, inclusive)."""
    number = int if whole else float
    texts = [first, last] + ([step.replace(" ", "")] if step else [])
    if whole and any("." in text for text in texts):
        raise ValueError("a whole-number axis needs whole numbers in its range")
    if any(len(text) > 40 for text in texts):
        raise ValueError("a range's numbers have at most 40 characters")
    start, end = number(first), number(last)
    if not whole and not all(math.isfinite(value) for value in (start, end, *map(float, texts[2:]))):
        raise ValueError("a range's numbers must be finite")
    if count is not None:
        count = int(count)
        if not 1 <= count <= MAX_AXIS_VALUES:
            raise ValueError(f"[count] must be from 1 to {MAX_AXIS_VALUES}")
        if count == 1:
            return [start]
        if whole:  # integer arithmetic: seeds reach 2**64, past a float's exact integers
            return [start + ((end - start) * 2 * i + (count - 1)) // (2 * (count - 1)) for i in range(count)]
        return [round(start + (end - start) * i / (count - 1), 10) for i in range(count)]
    stride = number(texts[2]) if step else (1 if end >= start else -1)
    if stride == 0 or (end - start) * stride < 0:
        raise ValueError(f"the step {stride:+} never goes from {first} to {last}")
    steps = (end - start) // stride if whole else math.floor((end - start) / stride + 1e-9)
    if steps + 1 > MAX_AXIS_VALUES:
        raise ValueError(f"the range has {steps + 1} values, more than {MAX_AXIS_VALUES}")
    return [start + i * stride if whole else round(start + i * stride, 10) for i in range(int(steps) + 1)]


def _text(name: str, value: Any) -> str:
    if name == "size":
        return f"{value[0]}x{value[1]}"
    if name == "prompt_sr":
        return value
    return SPECS[name].to_text(value)
