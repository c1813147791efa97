"""SeedLab: find a seed you like, keep it while the prompt changes, and share it exactly."""

__version__ = "0.1.0"

from .determinism import Environment, configure_process, full_determinism  # noqa: E402
from .generation import (  # noqa: E402
    Cancelled,
    Progress,
    Result,
    fingerprint,
    generate,
    generate_grid,
    generate_variations,
    grid_recipes,
    iter_generate,
    stream,
    variation_recipes,
)
from .models import Model, ModelStore, describe, load_model, resolve_device  # noqa: E402
from .recipe import MAX_SEED, Recipe, join_prompt  # noqa: E402
from .seeds import format_seeds, parse_seeds, random_seeds  # noqa: E402

__all__ = [
    "MAX_SEED", "Cancelled", "Environment", "Model", "ModelStore", "Progress", "Recipe", "Result", "configure_process",
    "describe", "fingerprint", "format_seeds", "full_determinism", "generate", "generate_grid",
    "generate_variations", "grid_recipes", "iter_generate", "join_prompt", "load_model", "parse_seeds",
    "random_seeds", "resolve_device", "stream", "variation_recipes",
]
