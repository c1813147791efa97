"""SeedLab: find a seed you like, keep it while the prompt changes, and share it exactly."""

__version__ = "0.1.0"

import os as _os  # noqa: E402

from . import cpu as _cpu  # noqa: E402

# The CPU baseline must be in the environment before torch's first operation (see cpu.py); a bad
# SEEDLAB_CPU_ISA is reported by configure_process, which the app and the CLI call at start.
if _os.environ.get(_cpu.ENV_VAR, "").strip().lower() in ("", *_cpu.LEVELS):
    _cpu.apply(_cpu.requested())

from .determinism import configure_process, full_determinism  # noqa: E402
from .environment import Environment  # noqa: E402
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
from .links import decode_link, encode_link  # noqa: E402
from .metadata import png_info, read_png, save_png  # noqa: E402
from .models import Model, ModelStore, describe, load_model, resolve_device  # noqa: E402
from .noise import randn  # noqa: E402
from .recipe import MAX_SEED, Recipe, join_prompt  # noqa: E402
from .reproduction import (  # noqa: E402
    Original,
    Verdict,
    compare,
    original_from_link,
    original_from_png,
    original_from_text,
)
from .seeds import format_seeds, parse_seeds, random_seeds  # noqa: E402

__all__ = [
    "MAX_SEED", "Cancelled", "Environment", "Model", "ModelStore", "Original", "Progress", "Recipe", "Result",
    "Verdict", "compare", "configure_process", "decode_link", "describe", "encode_link", "fingerprint",
    "format_seeds", "full_determinism", "generate", "generate_grid", "generate_variations", "grid_recipes",
    "iter_generate", "join_prompt", "load_model", "original_from_link", "original_from_png", "original_from_text",
    "parse_seeds", "png_info", "randn", "random_seeds", "read_png", "resolve_device", "save_png", "stream",
    "variation_recipes",
]
