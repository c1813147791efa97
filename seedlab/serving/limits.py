"""Limits: what one request may ask of this server, set by the host, enforced on every path.

A public Space is hostile ground: the widgets' ranges mean nothing to an API client or a crafted
link. The app checks every recipe it is about to run against these limits, whichever endpoint it
came from, and a refusal names the limit in a visitor's words ("at most 50 on this server"). The settings
that raise them (SEEDLAB_MAX_STEPS, ...) are the host's: docs/hosting.md lists them, and the server prints
the limits in force with their settings when it starts (`Limits.describe`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from ..engine.recipe import MAX_PROMPT_CHARS, MAX_SIZE, MAX_STEPS, SPECS, FieldError, Recipe, RecipeError
from ..engine.seeds import MAX_SEEDS

# What a Recipe (or a seed list) accepts at all: a host limit above it would silently never apply.
_CEILINGS = {"max_images": MAX_SEEDS, "max_steps": MAX_STEPS, "max_size": MAX_SIZE,
             "max_prompt_chars": MAX_PROMPT_CHARS}

_ENV_PREFIX = "SEEDLAB_"


@dataclass(frozen=True)
class Limits:
    """Per-request ceilings and queue settings; the defaults suit a public Space on one GPU."""

    max_images: int = 16  # images in one grid
    max_variations: int = 8  # variation lines in one request (the base prompt comes on top)
    max_steps: int = 50  # num_inference_steps
    max_size: int = 1024  # width and height, each
    max_prompt_chars: int = 500  # prompt and negative prompt, each
    queue_size: int = 32  # requests waiting in the queue before new ones are turned away
    concurrency: int = 1  # generations running at once (one device: one at a time)
    max_request_seconds: int = 120  # estimated generation time of one request (see budget.py)
    visitor_seconds: int = 300  # estimated generation time one visitor may use in any 10 minutes
    visitor_uploads: int = 20  # files one visitor may upload in any 10 minutes (the app's upload route)
    visitor_queued: int = 8  # requests one visitor may have waiting in the queue (webui/queue_cap.py)
    sessions: int = 512  # browser/API sessions whose state the app keeps (~430 KB each on the embedded model's
    # page, bench_soak: ~220 MB when full); the least recent go first

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{self.setting(field.name)} must be a positive integer, got {value!r}")
            ceiling = _CEILINGS.get(field.name)
            if ceiling is not None and value > ceiling:
                raise ValueError(f"{self.setting(field.name)} must be at most {ceiling} (SeedLab's own ceiling), "
                                 f"got {value}")

    @staticmethod
    def setting(name: str) -> str:
        """The environment variable that sets a limit: max_steps -> SEEDLAB_MAX_STEPS."""
        return _ENV_PREFIX + name.upper()

    def describe(self) -> str:
        """The limits in force with the settings that change them, for the host's log: "SEEDLAB_MAX_STEPS=50 ..."."""
        return " ".join(f"{self.setting(field.name)}={getattr(self, field.name)}" for field in fields(self))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        """Limits from SEEDLAB_MAX_IMAGES, SEEDLAB_MAX_STEPS, ... (unset ones keep their defaults)."""
        values: dict[str, int] = {}
        for field in fields(cls):
            raw = environ.get(cls.setting(field.name))
            if raw is None or not raw.strip():
                continue
            try:
                values[field.name] = int(raw)
            except ValueError:
                raise ValueError(f"{cls.setting(field.name)} must be a positive integer, got {raw!r}") from None
        return cls(**values)

    def check_count(self, count: int, what: str) -> None:
        """Refuse more than the allowed number of images ("seeds") or variations ("variations")."""
        limit, name = (self.max_images, "max_images") if what == "seeds" else (self.max_variations, "max_variations")
        unit = "images per grid" if what == "seeds" else "variations per request"
        if count > limit:
            raise ValueError(f"{what}: this server makes at most {limit} {unit}, got {count}")

    def narrowed(self, error: RecipeError) -> RecipeError:
        """A recipe's own range refusal with this server's narrower limit beside it: "width must be a whole number
        from 32 to 4096 ..., got 5000 (this server: at most 1024, SEEDLAB_MAX_SIZE)"."""
        ours = {"width": ("max_size", self.max_size), "height": ("max_size", self.max_size),
                "num_inference_steps": ("max_steps", self.max_steps), "hires_steps": ("max_steps", self.max_steps)}
        errors = [FieldError(e.field, f"{e.problem} (this server: at most {ours[e.field][1]})")
                  if e.field in ours and ours[e.field][1] < SPECS[e.field].high else e for e in error.errors]
        return RecipeError(errors)

    def check_recipe(self, recipe: Recipe) -> None:
        """Refuse a recipe that asks for more steps, pixels or prompt than this server allows (every field at once)."""
        errors = []
        if recipe.num_inference_steps > self.max_steps:
            errors.append(FieldError("num_inference_steps", f"must be at most {self.max_steps} on this server, "
                                                            f"got {recipe.num_inference_steps}"))
        # Not seed_resize_from: only the starting noise is drawn at that size (4 MB at the recipe's own 4096
        # ceiling), so an image too large for this server can be made smaller with its composition kept.
        sizes = {"width": recipe.width, "height": recipe.height}
        for name, value in sizes.items():
            if value > self.max_size:
                errors.append(FieldError(name, f"must be at most {self.max_size} pixels a side on this server, "
                                               f"got {value}"))
        if recipe.hires_scale:  # hires fix's second pass is made at its own size and steps
            hires = recipe.hires_size
            if max(hires) > self.max_size:
                errors.append(FieldError("hires_scale", f"makes a {hires[0]}x{hires[1]} image, more than "
                                                        f"{self.max_size} pixels a side on this server; "
                                                        f"got {recipe.hires_scale:g}"))
            if recipe.hires_steps > self.max_steps:
                errors.append(FieldError("hires_steps", f"must be at most {self.max_steps} on this server, "
                                                        f"got {recipe.hires_steps}"))
        for name in ("prompt", "negative_prompt"):
            length = len(getattr(recipe, name))
            if length > self.max_prompt_chars:
                errors.append(FieldError(name, f"must be at most {self.max_prompt_chars} characters on this server, "
                                               f"got {length}"))
        if errors:
            raise RecipeError(errors)
