"""SeedLab: find a seed you like, keep it while the prompt changes, and share it exactly.

The package is layered by concern, each layer importing only those below it (tests/test_layers.py
holds the rule as data):

- `seedlab.engine`: the recipe, the noise, the pipelines and the generation (making pixels);
- `seedlab.files`: PNG text, links, other tools' metadata, contact sheets;
- `seedlab.scale`: worker processes, Ray and seed sweeps;
- `seedlab.serving`: what a server admits, what a request costs, reproduction verdicts;
- `seedlab.explore`: plots, seed travel and the plot viewer;
- `seedlab.cli`: the command line, over all of them.

The public Python API is re-exported here; every other module is imported by its path in its layer
(`seedlab.engine.recipe`, `seedlab.files.links`).
"""

import importlib as _importlib
import os as _os

from .engine import cpu as _cpu
from .engine.version import __version__  # noqa: F401  (seedlab.__version__)

# The CPU baseline must be in the environment before torch's first operation (see cpu.py); a bad
# SEEDLAB_CPU_ISA is reported by configure_process, which the app and the CLI call at start.
if _os.environ.get(_cpu.ENV_VAR, "").strip().lower() in ("", *_cpu.LEVELS):
    _cpu.apply(_cpu.requested())

# The public Python API, each name imported when first used: `python -m seedlab info` and the file readers
# never import torch or diffusers, and importing seedlab costs nothing until a name is asked for.
PUBLIC = {
    **dict.fromkeys(("configure_process", "full_determinism"), "engine.determinism"),
    "Environment": "engine.environment",
    **dict.fromkeys(("Cancelled", "Progress", "generate", "generate_grid", "generate_variations", "grid_recipes",
                     "iter_generate", "stream", "variation_recipes"), "engine.generation"),
    **dict.fromkeys(("Result", "fingerprint"), "engine.image"),
    **dict.fromkeys(("Model", "ModelStore", "describe", "load_model", "resolve_device"), "engine.models"),
    "randn": "engine.noise",
    **dict.fromkeys(("composition", "finish", "preview"), "engine.previews"),
    **dict.fromkeys(("MAX_SEED", "Recipe", "join_prompt"), "engine.recipe"),
    **dict.fromkeys(("format_seeds", "parse_seeds", "random_seeds"), "engine.seeds"),
    **dict.fromkeys(("decode_link", "encode_link"), "files.links"),
    **dict.fromkeys(("png_info", "read_png", "save_png"), "files.metadata"),
    **dict.fromkeys(("Original", "Verdict", "compare", "original_from_link", "original_from_png",
                     "original_from_text"), "serving.reproduction"),
}


def __getattr__(name):
    """A public name (`seedlab.generate`), imported on first use."""
    if name in PUBLIC:
        value = getattr(_importlib.import_module(f"{__name__}.{PUBLIC[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *PUBLIC})


__all__ = list(PUBLIC)
