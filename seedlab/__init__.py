"""SeedLab: find a seed you like, keep it while the prompt changes, and share it exactly.

The package is layered by concern, each layer importing only those below it (tests/test_layers.py
holds the rule as data):

- `seedlab.engine`: the recipe, the noise, the pipelines and the generation (making pixels);
- `seedlab.files`: PNG text, links, other tools' metadata, contact sheets;
- `seedlab.scale`: worker processes, Ray and seed sweeps;
- `seedlab.serving`: what a server admits, what a request costs, reproduction verdicts;
- `seedlab.explore`: plots, seed travel and the plot viewer;
- `seedlab.cli`: the command line, over all of them.

The public Python API is re-exported here. Modules that used to sit at the top (`seedlab.recipe`,
`seedlab.links`, ...) still import under their old names, as the same module objects.
"""

import importlib as _importlib
import importlib.abc as _abc
import importlib.util as _util
import os as _os
import sys as _sys

from .engine import cpu as _cpu
from .engine.version import __version__  # noqa: F401  (seedlab.__version__)

# The CPU baseline must be in the environment before torch's first operation (see cpu.py); a bad
# SEEDLAB_CPU_ISA is reported by configure_process, which the app and the CLI call at start.
if _os.environ.get(_cpu.ENV_VAR, "").strip().lower() in ("", *_cpu.LEVELS):
    _cpu.apply(_cpu.requested())

# Where each module of the flat layout (SeedLab 0.1 to turn 5) lives now.
MOVED = {
    **dict.fromkeys(("recipe", "seeds", "noise", "philox", "generation", "embeddings", "models", "tracing",
                     "determinism", "cpu", "environment"), "engine"),
    **dict.fromkeys(("metadata", "infotext", "comfyui", "formats", "stealth", "links", "info", "sheets"), "files"),
    **dict.fromkeys(("admission", "budget", "limits", "reproduction"), "serving"),
    **dict.fromkeys(("pool", "workers", "cluster", "sweep", "manifest"), "scale"),
    **dict.fromkeys(("plot", "travel", "render", "viewer"), "explore"),
}


# Where each module that moved into a room of its layer (turn 6) lives now. `seedlab.engine.prompts` and
# `seedlab.files.comfyui` became the rooms themselves: the latter still offers read_comfyui and read_comfyui_workflow.
RENAMED = {
    **{f"engine.{old}": f"engine.samplers.{new}" for old, new in (
        ("ksamplers", "kdiffusion"), ("ksamplers_extra", "kdiffusion_extra"), ("ksampling", "a1111"),
        ("comfy_samplers", "comfyui_samplers"), ("comfy_sampling", "comfyui"), ("sigmas", "sigmas"),
        ("sampler_names", "names"), ("upscale", "upscale"))},
    **{f"engine.{old}": f"engine.prompts.{new}" for old, new in (
        ("prompts_comfyui", "comfyui"), ("prompts_novelai", "novelai"), ("prompts_sdxl", "sdxl"),
        ("embeddings", "embeddings"), ("text_inversion", "text_inversion"))},
    **{f"engine.{name}": f"engine.weights.{name}" for name in (
        "checkpoint_files", "checkpoints", "library", "lora", "lora_names", "model_info", "safetensor_files", "vae",
        "vae_names")},
    **{f"files.comfyui_{name}": f"files.comfyui.{name}" for name in (
        "clip", "graph", "groups", "loras", "passes", "text", "vae", "widgets", "widgets_packs", "workflow")},
}


def _new_path(fullname: str) -> str | None:
    """The module an old path names now: `seedlab.links` -> `seedlab.files.links`, `seedlab.engine.lora` ->
    `seedlab.engine.weights.lora`; None for a path that did not move."""
    package, _, name = fullname.rpartition(".")
    inner = fullname.removeprefix(__name__ + ".")
    if package == __name__ and name in MOVED:
        inner = f"{MOVED[name]}.{name}"
        return f"{__name__}.{RENAMED.get(inner, inner)}"
    return f"{__name__}.{RENAMED[inner]}" if inner in RENAMED else None


class _OldPaths(_abc.MetaPathFinder, _abc.Loader):
    """`import seedlab.links` gives the module `seedlab.files.links` itself (one module, two names)."""

    def find_spec(self, fullname, path=None, target=None):
        return _util.spec_from_loader(fullname, self) if _new_path(fullname) else None

    def create_module(self, spec):
        module = _importlib.import_module(_new_path(spec.name))
        spec.loader_state = module.__spec__  # importlib sets the alias's spec on the module: give its own back
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


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
    """A public name (`seedlab.generate`), or a module by its old path (`seedlab.links`), imported on first use."""
    if name in PUBLIC:
        value = getattr(_importlib.import_module(f"{__name__}.{PUBLIC[name]}"), name)
        globals()[name] = value
        return value
    if name in MOVED:
        return _importlib.import_module(_new_path(f"{__name__}.{name}"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *PUBLIC, *MOVED})


_sys.meta_path.append(_OldPaths())

__all__ = list(PUBLIC)
