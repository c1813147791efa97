"""A recipe field's definition (`Spec`): its type, range, label, link key, A1111 key and CLI option.

recipe.py defines every field with one; validation, the UI controls, links, PNG text and the CLI
options are derived from them. A bad value raises FieldError, a recipe's bad values one RecipeError.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

MAX_SAFE_JS_INT = 2**53 - 1  # beyond this a JavaScript number loses digits: seeds travel as text
MIN_SIZE, MAX_SIZE, SIZE_MULTIPLE = 32, 4096, 8
_SIZE_TEXT = re.compile(r"^\s*([0-9]{1,5})\s*[xX×]\s*([0-9]{1,5})\s*$")
_INT_TEXT = re.compile(r"^\s*-?[0-9]{1,20}\s*$")  # a minus for the few fields that take -1 (hires_seed: "the same")
A1111_HASH = re.compile(r"[0-9a-fA-F]{8,64}")  # a checkpoint's or VAE's A1111 hash: AutoV1 (8), AutoV2 (10), SHA-256


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
            return (f"WIDTHxHEIGHT with each from {MIN_SIZE} to {MAX_SIZE} and a multiple of {SIZE_MULTIPLE} "
                    "(or empty: off)")
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
