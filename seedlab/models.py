"""Models: load diffusers text-to-image pipelines, pick their device, list their schedulers.

A model is named by a hub id ("stabilityai/sd-turbo"), a local folder, or "embedded": the small
checkpoint that ships in seedlab/embedded_model so SeedLab works offline. The host decides which
names may be loaded (`ModelStore(allowed=...)`): links and API calls can only pick among those.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch
from diffusers import DiffusionPipeline

from .recipe import DEFAULT_MODEL, DTYPES

EMBEDDED_MODEL_DIR = Path(__file__).parent / "embedded_model"
EMBEDDED_GUIDANCE = 2.5  # where the embedded model meets its quality targets (training/evaluate.py, README)
STANDARD_GUIDANCE = 7.5  # StableDiffusionPipeline's own default, a fair start for real checkpoints
_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(name: str | None = None) -> torch.device:
    """The device to run on: `name` if given ("cuda", "cuda:1", "mps", "cpu"), else the best available."""
    if name and name != "auto":
        try:
            device = torch.device(name)
        except RuntimeError as error:
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {name!r}") from error
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {name!r} was asked for, but CUDA is not available here")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def model_source(name: str) -> str:
    """Where `from_pretrained` finds a model name: the embedded folder, a local folder or a hub id."""
    return str(EMBEDDED_MODEL_DIR) if name == DEFAULT_MODEL else name


@dataclass
class Model:
    """A loaded pipeline and what SeedLab needs to know about it. The only long-lived object."""

    name: str
    pipeline: DiffusionPipeline
    device: torch.device
    dtype: str
    schedulers: dict[str, type] = field(repr=False)  # compatible scheduler classes by class name
    default_scheduler: str
    scheduler_config: dict = field(repr=False)  # the checkpoint's own scheduler config
    call_parameters: frozenset[str] = field(repr=False)

    @property
    def native_size(self) -> tuple[int, int]:
        """(width, height) the checkpoint was trained at."""
        pipe = self.pipeline
        denoiser = getattr(pipe, "unet", None) or getattr(pipe, "transformer", None)
        sample = getattr(pipe, "default_sample_size", None) or getattr(denoiser.config, "sample_size", 64)
        if isinstance(sample, (list, tuple)):
            sample = sample[0]
        size = int(sample) * int(getattr(pipe, "vae_scale_factor", 8))
        return size, size

    @property
    def default_guidance(self) -> float:
        """The guidance scale a recipe starts from: the embedded model's measured best, else SD's usual 7.5."""
        return EMBEDDED_GUIDANCE if self.name == DEFAULT_MODEL else STANDARD_GUIDANCE

    def make_scheduler(self, name: str):
        """A fresh scheduler instance (no state shared between runs) from the checkpoint's config."""
        if name == "default":
            name = self.default_scheduler
        if name not in self.schedulers:
            raise ValueError(f"scheduler must be one of {', '.join(sorted(self.schedulers))}, got {name!r}")
        return self.schedulers[name].from_config(self.scheduler_config)


def load_model(name: str = DEFAULT_MODEL, device: torch.device | None = None, dtype: str = "float32") -> Model:
    """Load a text-to-image pipeline with `from_pretrained` and describe it."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if name == DEFAULT_MODEL and not (EMBEDDED_MODEL_DIR / "model_index.json").exists():
        raise ValueError(f"the embedded model is missing from {EMBEDDED_MODEL_DIR}; train it (training/README.md)")
    source = model_source(name)
    if source.startswith((".", "/", "~")) or "\\" in source or source.count("/") > 1:
        if not Path(source).expanduser().is_dir():
            raise ValueError(f"model {name!r} is not a folder on this machine (a local model is a diffusers folder)")
    device = device or resolve_device()
    try:
        pipeline = DiffusionPipeline.from_pretrained(source, dtype=_TORCH_DTYPES[dtype])
    except (OSError, ValueError) as error:  # not found, offline, not a pipeline
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"model {name!r} could not be loaded: {reason}") from error
    pipeline.to(device)
    pipeline.set_progress_bar_config(disable=True)
    return describe(name, pipeline, device, dtype)


def describe(name: str, pipeline: DiffusionPipeline, device: torch.device, dtype: str = "float32") -> Model:
    """Wrap an already built pipeline (tests build tiny ones from configs) as a Model."""
    config = dict(pipeline.scheduler.config)
    schedulers = {type(pipeline.scheduler).__name__: type(pipeline.scheduler)}
    for scheduler_class in pipeline.scheduler.compatibles:
        try:  # some need optional packages (torchsde, scipy) or reject this config
            scheduler_class.from_config(config)
        except Exception:  # noqa: BLE001 - any failure means "not offered"
            continue
        schedulers[scheduler_class.__name__] = scheduler_class
    return Model(
        name=name,
        pipeline=pipeline,
        device=device,
        dtype=dtype,
        schedulers=dict(sorted(schedulers.items())),
        default_scheduler=type(pipeline.scheduler).__name__,
        scheduler_config=config,
        call_parameters=frozenset(inspect.signature(pipeline.__call__).parameters),
    )


class ModelStore:
    """The models a server may use, loaded on first use and kept (at most `max_loaded` at once).

    `allowed[0]` is the default. Names outside `allowed` are refused: links and API calls are
    untrusted and must not make the server load arbitrary paths or hub ids.
    """

    def __init__(self, allowed: list[str], device: torch.device | None = None, max_loaded: int = 2):
        if not allowed:
            raise ValueError("at least one model must be allowed")
        self.allowed = list(dict.fromkeys(allowed))
        self.device = device or resolve_device()
        self.max_loaded = max_loaded
        self._loaded: OrderedDict[tuple[str, str], Model] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def default(self) -> str:
        return self.allowed[0]

    def check(self, name: str) -> str:
        """Return `name` if this server allows it, else raise a ValueError naming the allowed ones."""
        if name not in self.allowed:
            raise ValueError(f"model {name!r} is not available on this server; allowed: {', '.join(self.allowed)}")
        return name

    def add(self, model: Model) -> None:
        """Register an already loaded model (tests, or a pipeline built in code)."""
        with self._lock:
            if model.name not in self.allowed:
                self.allowed.append(model.name)
            self._loaded[(model.name, model.dtype)] = model

    def get(self, name: str, dtype: str = "float32") -> Model:
        """The loaded model for `name` in `dtype`, loading it (and evicting the oldest) if needed."""
        self.check(name)
        key = (name, dtype)
        with self._lock:
            if key not in self._loaded:
                while len(self._loaded) >= self.max_loaded:
                    self._loaded.popitem(last=False)
                self._loaded[key] = load_model(name, self.device, dtype)
            self._loaded.move_to_end(key)
            return self._loaded[key]
