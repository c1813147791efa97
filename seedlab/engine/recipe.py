"""The recipe: one immutable, validated value that describes an image completely.

Every field is defined once, here, with its `Spec`: type, default, allowed range, UI label and
help, link key, A1111 infotext key and CLI option. Validation, the UI controls, the API handlers'
parameters, links, PNG text and the CLI options are all derived from these definitions, so adding a
field is its definition here plus its meaning (where it acts: noise.py, generation.py).

Field names follow diffusers' call arguments. A bad value raises `RecipeError` (a ValueError)
listing every bad field with the value and the allowed range; each layer names the field its own
way (the UI by its label, a link by its key, the CLI by its option).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

MAX_SEED = 2**64 - 1  # what torch's manual_seed accepts; ComfyUI and Fooocus seeds reach 2**63
MAX_SAFE_JS_INT = 2**53 - 1  # beyond this a JavaScript number loses digits: seeds travel as text
DEFAULT_MODEL = "embedded"  # the checkpoint that ships in seedlab/embedded_model (see models.py)
DEFAULT_SCHEDULER = "default"  # the model's own scheduler; resolved to a class name at generation
RNG_SOURCES = ("cpu", "device", "numpy-pcg64", "cuda-philox")
DTYPES = ("float32", "float16", "bfloat16")
MAX_PROMPT_CHARS = 2000
MAX_STEPS = 200
MAX_GUIDANCE = 50.0
MIN_SIZE, MAX_SIZE, SIZE_MULTIPLE = 32, 4096, 8
_SIZE_TEXT = re.compile(r"^\s*([0-9]{1,5})\s*[xX×]\s*([0-9]{1,5})\s*$")
_INT_TEXT = re.compile(r"^\s*[0-9]{1,20}\s*$")


class FieldError(ValueError):
    """One field's bad value: `field` and `problem` ("must be an integer from 1 to 200, got 2.5")."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


class RecipeError(ValueError):
    """Every bad field of a recipe at once."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = errors

    def named(self, name: Any) -> str:
        """The message with each field named by `name(field)` (a label, a link key, a CLI option)."""
        return "; ".join(f"{name(error.field)} {error.problem}" for error in self.errors)


@dataclass(frozen=True)
class Spec:
    """How one recipe field is checked, shown and written. `default` never changes (links omit it)."""

    kind: str  # text, name, seed, int, float, bool, choice, size
    label: str  # the UI label; messages shown in the UI name the field by it
    link: str  # the key in a link's query string
    cli: str  # the command-line option
    a1111: str | None = None  # the key in A1111 `parameters` text (None: not written there)
    a1111_when: str | None = None  # write the key only while this field is not at its default (A1111's habit)
    help: str = ""
    low: float = 0
    high: float = 0
    multiple: int = 1
    choices: tuple[str, ...] = ()

    def allowed(self) -> str:
        """The allowed values in words, for messages and help."""
        if self.kind in ("seed", "int"):
            return f"a whole number from {self.low} to {self.high}" + (
                f" and a multiple of {self.multiple}" if self.multiple > 1 else "")
        if self.kind == "float":
            return f"a number from {self.low:g} to {self.high:g}"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.kind == "size":
            return f"WIDTHxHEIGHT with each from {MIN_SIZE} to {MAX_SIZE} and a multiple of {SIZE_MULTIPLE} (or empty: off)"
        if self.kind == "text":
            return f"text of at most {int(self.high)} characters"
        return f"a non-empty name of at most {int(self.high)} characters"

    def check(self, field: str, value: Any) -> Any:
        """`value` if it is a valid typed value for this field (normalised: int guidance -> float)."""
        bad = FieldError(field, f"must be {self.allowed()}, got {_show(value)}")
        if self.kind in ("seed", "int"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad
            if not self.low <= value <= self.high or value % self.multiple:
                raise bad
            return value
        if self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise bad
            if not self.low <= value <= self.high:
                raise bad
            return float(value)
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise bad
            return value
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise bad
            return value
        if self.kind == "size":
            if value is None:
                return None
            if not (isinstance(value, tuple) and len(value) == 2):
                raise bad
            for side in value:
                if isinstance(side, bool) or not isinstance(side, int) or not MIN_SIZE <= side <= MAX_SIZE \
                        or side % SIZE_MULTIPLE:
                    raise bad
            return value
        return _check_text(field, value, self)

    def coerce(self, value: Any) -> Any:
        """A value as JSON, a widget or an API client sends it, as this field's type (not yet range-checked).

        Seeds may come as decimal text (JavaScript numbers lose digits above 2**53); whole floats
        (20.0 from a number widget) become ints; a size may be "WxH", [w, h] or empty.
        """
        if self.kind in ("seed", "int"):
            if isinstance(value, str) and _INT_TEXT.match(value):
                return int(value)
            if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_JS_INT:
                return int(value)
        elif self.kind == "size":
            if value is None or (isinstance(value, str) and not value.strip()):
                return None
            if isinstance(value, str) and _SIZE_TEXT.match(value):
                match = _SIZE_TEXT.match(value)
                return int(match[1]), int(match[2])
            if isinstance(value, (list, tuple)) and len(value) == 2:
                return tuple(self.coerce_side(side) for side in value)
        elif self.kind == "float" and isinstance(value, str):
            try:
                return float(value) if len(value) <= 40 else value
            except ValueError:
                return value
        return value

    @staticmethod
    def coerce_side(side: Any) -> Any:
        return int(side) if isinstance(side, float) and side.is_integer() else side

    def to_json(self, value: Any) -> Any:
        """The field's JSON value: seeds as decimal text (exact in any JSON reader), a size as "WxH"."""
        if self.kind == "seed":
            return str(value)
        if self.kind == "size":
            return None if value is None else f"{value[0]}x{value[1]}"
        return value

    def to_text(self, value: Any) -> str:
        """The field's value as text (links, the CLI, PNG text): the shortest text that reads back the same."""
        if self.kind == "bool":
            return "1" if value else "0"
        if self.kind == "float":
            return repr(float(value)).removesuffix(".0")
        if self.kind == "size":
            return "" if value is None else f"{value[0]}x{value[1]}"
        return str(value)


def _spec(default: Any = dataclasses.MISSING, **spec: Any) -> Any:
    return dataclasses.field(default=default, metadata={"spec": Spec(**spec)})


@dataclass(frozen=True)
class Recipe:
    """Everything needed to regenerate one image, bit for bit, on the same environment."""

    prompt: str = _spec(kind="text", high=MAX_PROMPT_CHARS, label="Prompt", link="prompt", cli="--prompt",
                        help="what the image shows")
    seed: int = _spec(0, kind="seed", high=MAX_SEED, label="Seed", link="seed", cli="--seed", a1111="Seed",
                      help="the starting noise: 0 to 18446744073709551615")
    negative_prompt: str = _spec("", kind="text", high=MAX_PROMPT_CHARS, label="Negative prompt", link="neg",
                                 cli="--negative", help="what the image should not show")
    model: str = _spec(DEFAULT_MODEL, kind="name", high=300, label="Model", link="model", cli="--model",
                       a1111="Model", help='"embedded", a local diffusers folder or a hub id')
    scheduler: str = _spec(DEFAULT_SCHEDULER, kind="name", high=300, label="Scheduler", link="sampler",
                           cli="--scheduler", a1111="Sampler", help="a diffusers scheduler class compatible with the model")
    num_inference_steps: int = _spec(20, kind="int", low=1, high=MAX_STEPS, label="Steps", link="steps",
                                     cli="--steps", a1111="Steps", help="denoising steps")
    guidance_scale: float = _spec(7.5, kind="float", high=MAX_GUIDANCE, label="Guidance scale", link="cfg",
                                  cli="--guidance", a1111="CFG scale", help="how strongly the prompt is followed")
    width: int = _spec(64, kind="int", low=MIN_SIZE, high=MAX_SIZE, multiple=SIZE_MULTIPLE, label="Width",
                       link="w", cli="--width", a1111="Size", help="image width in pixels")
    height: int = _spec(64, kind="int", low=MIN_SIZE, high=MAX_SIZE, multiple=SIZE_MULTIPLE, label="Height",
                        link="h", cli="--height", a1111="Size", help="image height in pixels")
    rng: str = _spec("cpu", kind="choice", choices=RNG_SOURCES, label="RNG source", link="rng", cli="--rng",
                     a1111="RNG", help="where the noise comes from: cpu (portable, plain diffusers), device "
                                       "(the GPU's own), numpy-pcg64 (mindone.diffusers on Ascend), "
                                       "cuda-philox (a CUDA GPU's noise on any machine, A1111's NV)")
    variation_seed: int = _spec(0, kind="seed", high=MAX_SEED, label="Variation seed", link="vseed",
                                cli="--variation-seed", a1111="Variation seed", a1111_when="variation_strength",
                                help="a second seed whose noise is blended in (A1111's variation seed)")
    variation_strength: float = _spec(0.0, kind="float", high=1.0, label="Variation strength", link="vstr",
                                      cli="--variation-strength", a1111="Variation seed strength",
                                      a1111_when="variation_strength",
                                      help="0 keeps the seed's own noise exactly, 1 is the variation seed's")
    seed_resize_from: tuple[int, int] | None = _spec(None, kind="size", label="Seed resize from", link="resize",
                                                     cli="--seed-resize-from", a1111="Seed resize from",
                                                     a1111_when="seed_resize_from",
                                                     help="WIDTHxHEIGHT the noise is drawn at, so a seed keeps "
                                                          "its composition at another size (empty: off)")
    deterministic: bool = _spec(False, kind="bool", label="Full determinism", link="det", cli="--deterministic",
                                a1111="Full determinism",
                                help="deterministic kernels for this generation (slower on a GPU)")
    dtype: str = _spec("float32", kind="choice", choices=DTYPES, label="dtype", link="dtype", cli="--dtype", a1111="Dtype",
                       help="the weights' precision")

    def __post_init__(self) -> None:
        values = check_fields({name: getattr(self, name) for name in SPECS_ORDER})
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> Recipe:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as Python values (a seed is an int, a size a tuple)."""
        return {name: getattr(self, name) for name in SPECS_ORDER}

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON values that survive any reader: seeds as decimal text, sizes as "WxH"."""
        return {name: SPECS[name].to_json(getattr(self, name)) for name in SPECS_ORDER}

    @classmethod
    def from_dict(cls, data: Any) -> Recipe:
        """Build a recipe from untrusted data (JSON, an API call): unknown fields are an error."""
        if not isinstance(data, dict):
            raise ValueError(f"a recipe must be a JSON object, got {type(data).__name__}")
        unknown = sorted(str(key)[:40] for key in set(data) - set(SPECS))
        if unknown:
            raise ValueError(f"unknown recipe field(s): {', '.join(unknown)}; allowed: {', '.join(SPECS_ORDER)}")
        if "prompt" not in data:
            raise RecipeError([FieldError("prompt", "is missing")])
        return cls(**{name: SPECS[name].coerce(value) for name, value in data.items()})

    @property
    def noise_is_plain(self) -> bool:
        """True when the starting noise is the seed's own (no variation seed, no seed resize)."""
        return self.variation_strength == 0 and self.seed_resize_from in (None, (self.width, self.height))


SPECS: dict[str, Spec] = {field.name: field.metadata["spec"] for field in dataclasses.fields(Recipe)}
SPECS_ORDER = tuple(SPECS)


def check_fields(values: dict[str, Any]) -> dict[str, Any]:
    """Check every field's value; raise one RecipeError naming every bad field."""
    checked, errors = {}, []
    for name, value in values.items():
        try:
            checked[name] = SPECS[name].check(name, value)
        except FieldError as error:
            errors.append(error)
    if errors:
        raise RecipeError(errors)
    return checked


def join_prompt(base: str, variation: str) -> str:
    """Append a variation to a base prompt: ", artsy" is appended as written, "artsy" after ", "."""
    variation = variation.rstrip()
    if not variation.strip():
        return base
    if variation[0] in ",;.:!? " or not base:
        return base + variation
    return f"{base}, {variation}"


def _check_text(field: str, value: Any, spec: Spec) -> str:
    if not isinstance(value, str):
        raise FieldError(field, f"must be text, got {type(value).__name__}")
    if spec.kind == "name" and not value.strip():
        raise FieldError(field, f"must be {spec.allowed()}, got {_show(value)}")
    if len(value) > spec.high:
        raise FieldError(field, f"must be at most {int(spec.high)} characters, got {len(value)}")
    if "\x00" in value:
        raise FieldError(field, "must not contain NUL characters")
    if any("\ud800" <= char <= "\udfff" for char in value):  # valid in a Python str, not in UTF-8
        raise FieldError(field, "must be valid Unicode text (it holds a lone surrogate)")
    return value


def _show(value: Any) -> str:
    """A value for a message: short, and never Python's own error text (a 5,000-digit int is fine here)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"a {len(str(abs(value))) if abs(value) < 10**4000 else 'huge'}-digit number"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
