"""The recipe: one immutable, validated value that describes an image completely.

Field names follow diffusers' call arguments. Every layer (UI, links, PNG metadata, CLI, API)
builds a Recipe at its edge and passes it on; a bad value raises ValueError naming the field,
the value and the allowed range.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

MAX_SEED = 2**32 - 1  # the range A1111 and InvokeAI use; larger values lose precision in a browser
DEFAULT_MODEL = "embedded"  # the checkpoint that ships in seedlab/embedded_model (see models.py)
DEFAULT_SCHEDULER = "default"  # the model's own scheduler; resolved to a class name at generation
RNG_SOURCES = ("cpu", "device")
DTYPES = ("float32", "float16", "bfloat16")
MAX_PROMPT_CHARS = 2000
MAX_STEPS = 200
MAX_GUIDANCE = 50.0
MIN_SIZE, MAX_SIZE, SIZE_MULTIPLE = 32, 4096, 8


@dataclass(frozen=True)
class Recipe:
    """Everything needed to regenerate one image, bit for bit, on the same environment."""

    prompt: str
    seed: int = 0
    negative_prompt: str = ""
    model: str = DEFAULT_MODEL
    scheduler: str = DEFAULT_SCHEDULER
    num_inference_steps: int = 20
    guidance_scale: float = 7.5
    width: int = 64
    height: int = 64
    rng: str = "cpu"  # where the starting noise is drawn: "cpu" (portable) or "device"
    deterministic: bool = False  # the full-determinism switches, see determinism.py
    dtype: str = "float32"

    def __post_init__(self) -> None:
        _check_text("prompt", self.prompt)
        _check_text("negative_prompt", self.negative_prompt)
        _check_name("model", self.model)
        _check_name("scheduler", self.scheduler)
        _check_int("seed", self.seed, 0, MAX_SEED)
        _check_int("num_inference_steps", self.num_inference_steps, 1, MAX_STEPS)
        _check_int("width", self.width, MIN_SIZE, MAX_SIZE, SIZE_MULTIPLE)
        _check_int("height", self.height, MIN_SIZE, MAX_SIZE, SIZE_MULTIPLE)
        _check_choice("rng", self.rng, RNG_SOURCES)
        _check_choice("dtype", self.dtype, DTYPES)
        if not isinstance(self.deterministic, bool):
            raise ValueError(f"deterministic must be true or false, got {self.deterministic!r}")
        guidance = self.guidance_scale
        if isinstance(guidance, bool) or not isinstance(guidance, (int, float)) or not math.isfinite(guidance):
            raise ValueError(f"guidance_scale must be a number from 0 to {MAX_GUIDANCE:g}, got {guidance!r}")
        if not 0 <= guidance <= MAX_GUIDANCE:
            raise ValueError(f"guidance_scale must be from 0 to {MAX_GUIDANCE:g}, got {guidance:g}")
        object.__setattr__(self, "guidance_scale", float(guidance))

    def replace(self, **changes: Any) -> Recipe:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """Build a recipe from untrusted data (JSON, a link): unknown fields are an error."""
        if not isinstance(data, dict):
            raise ValueError(f"a recipe must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown recipe field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        if "prompt" not in data:
            raise ValueError("prompt is missing")
        return cls(**data)


def join_prompt(base: str, variation: str) -> str:
    """Append a variation to a base prompt: ", artsy" is appended as written, "artsy" after ", "."""
    variation = variation.rstrip()
    if not variation.strip():
        return base
    if variation[0] in ",;.:!? " or not base:
        return base + variation
    return f"{base}, {variation}"


def _check_int(field: str, value: Any, low: int, high: int, multiple: int = 1) -> None:
    allowed = f"an integer from {low} to {high}" + (f" and a multiple of {multiple}" if multiple > 1 else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be {allowed}, got {value!r}")
    if not low <= value <= high or value % multiple:
        raise ValueError(f"{field} must be {allowed}, got {value}")


def _check_text(field: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be text, got {type(value).__name__}")
    if len(value) > MAX_PROMPT_CHARS:
        raise ValueError(f"{field} must be at most {MAX_PROMPT_CHARS} characters, got {len(value)}")
    if "\x00" in value:
        raise ValueError(f"{field} must not contain NUL characters")


def _check_name(field: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip() or len(value) > 300:
        raise ValueError(f"{field} must be a non-empty name of at most 300 characters, got {value!r}")


def _check_choice(field: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{field} must be one of {', '.join(allowed)}, got {value!r}")
