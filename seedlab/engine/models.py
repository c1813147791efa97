"""Models: load diffusers text-to-image pipelines, pick their device, list their schedulers.

A model is named by a hub id ("stabilityai/sd-turbo"), a local folder, "embedded": the small
checkpoint that ships in seedlab/embedded_model so SeedLab works offline (docs/models.md says
how it is trained), or a single-file checkpoint of the models folder by its name or A1111 hash
(checkpoints.py loads it offline with configs that ship in seedlab/configs). The host decides
which names may be loaded and in which dtype (`ModelStore(allowed=..., dtype=...)`): links and
API calls can only pick among those.

What a model says of itself without its weights (ModelInfo, its defaults) is in model_info.py.
"""

from __future__ import annotations

import copy
import inspect
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import diffusers
import torch
from diffusers import DiffusionPipeline

from . import cpu, wide
from .latents import packs
from .recipe import DEFAULT_MODEL, DTYPES, FieldError
from .tracing import TracedUNet
from .weights.checkpoint_files import find_checkpoint
from .weights.checkpoints import load_single_file
from .weights.model_info import (  # the embedded folders are this module's API too (callers find them here)
    EMBEDDED_MODEL_DIR,  # noqa: F401
    EMBEDDED_MODELS,
    EMBEDDED_V2_DIR,  # noqa: F401
    ModelInfo,
    compatible_schedulers,
    looks_local,
    model_defaults,
    model_source,
    noise_per_pixel,
    read_info,
    reads_a1111_prompts,
    runs_a1111,
    takes_prompt,
)

_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(name: str | None = None) -> torch.device:
    """The device to run on: `name` if given ("cuda", "cuda:1", "mps", "cpu"), else the best available."""
    if name and name != "auto":
        try:
            device = torch.device(name)
        except RuntimeError as error:
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {name!r}") from error
        if device.type not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {name[:40]!r}")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {name!r} was asked for, but CUDA is not available here")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


@dataclass
class Model:
    """A loaded pipeline and what SeedLab needs to know about it. The only long-lived object."""

    name: str
    pipeline: DiffusionPipeline
    device: torch.device
    dtype: str
    info: ModelInfo
    call_parameters: frozenset[str] = field(repr=False)
    lanes: int = 1  # images generated at once (generation.py); more than one only pays on a CPU
    traced: bool = False  # the UNet's plain calls replay traces (tracing.py: CPU only, the same pixels)
    file_hash: str = ""  # the checkpoint file's A1111 hash (AutoV2) when it was loaded from one (models folder)
    _lane_copies: list = field(default_factory=list, repr=False)
    _traced_unet: TracedUNet | None = field(default=None, repr=False)

    @property
    def native_size(self) -> tuple[int, int]:
        return self.info.native_size

    @property
    def default_guidance(self) -> float:
        return self.info.default_guidance

    @property
    def default_scheduler(self) -> str:
        return self.info.default_scheduler

    @property
    def default_steps(self) -> int:
        return self.info.default_steps

    @property
    def schedulers(self) -> dict[str, type]:
        return self.info.schedulers

    def make_scheduler(self, name: str):
        return self.info.make_scheduler(name)

    @property
    def computes_wide(self) -> bool:
        """Whether this model's calls compute in float64 now: the universal CPU baseline, on a CPU (wide.py)."""
        return self.device.type == "cpu" and cpu.is_universal()

    def computing(self) -> DiffusionPipeline:
        """The pipeline whose models compute: `pipeline` itself, or under the universal baseline its float64 twin."""
        if not self.computes_wide:
            return self.pipeline
        wide.check_dtype(self.dtype, self.device)
        return wide.widened(self.pipeline)

    def lane_pipelines(self, count: int) -> list[DiffusionPipeline]:
        """`count` pipelines sharing this one's weights, each with its own scheduler and call state.

        They are shallow copies (modules shared, not copied), so `self.pipeline` itself stays as
        loaded: plain diffusers calls on it are what SeedLab's pixels are checked against. When
        `traced`, the copies call the UNet through one shared TracedUNet. Under the universal
        baseline they are copies of the float64 twin (`computing`), kept apart from the float32 ones.
        """
        base = self.computing()
        copies = self.__dict__.setdefault("_wide_lanes", []) if self.computes_wide else self._lane_copies
        while len(copies) < count:
            lane = copy.copy(base)
            if self.traced:
                # Not the pipeline's own setattr, which would register the stand-in in the copy's config.
                object.__setattr__(lane, "unet", self._traced(base))
            copies.append(lane)
        return copies[:count]

    def _traced(self, base: DiffusionPipeline) -> TracedUNet:
        """The one TracedUNet of `base`'s UNet (float32, or under universal its float64 stand-in's)."""
        if base is self.pipeline:
            if self._traced_unet is None:
                self._traced_unet = TracedUNet(self.pipeline.unet)
            return self._traced_unet
        if "_traced_wide" not in self.__dict__:
            self.__dict__["_traced_wide"] = TracedUNet(base.unet)
        return self.__dict__["_traced_wide"]


def default_lanes(device: torch.device, threads: int) -> int:
    """Lanes that keep a CPU's cores busy at `threads` intra-op threads each; one on a GPU (it batches inside)."""
    if device.type != "cpu":
        return 1
    return max(1, min(8, (os.cpu_count() or 1) // max(1, threads)))


def load_model(name: str = DEFAULT_MODEL, device: torch.device | None = None, dtype: str = "float32") -> Model:
    """Load a text-to-image pipeline (`from_pretrained`, or `load_single_file` for a checkpoint) and describe it."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if cpu.is_universal():
        wide.check_dtype(dtype, device or resolve_device())
    if name in EMBEDDED_MODELS and not (EMBEDDED_MODELS[name][0] / "model_index.json").exists():
        raise ValueError(f"the embedded model {name} is missing from {EMBEDDED_MODELS[name][0]}; "
                         "train it (docs/models.md, The embedded model)")
    source = model_source(name)
    checkpoint = find_checkpoint(name) if source == name and not looks_local(name) else None
    if looks_local(source) and not Path(source).expanduser().is_dir():
        raise ValueError(f"model {name!r} is not a folder on this machine (a local model is a diffusers folder)")
    device = device or resolve_device()
    try:
        if checkpoint is not None:
            pipeline = load_single_file(checkpoint.path, dtype=_TORCH_DTYPES[dtype], device=device)
        else:
            pipeline = DiffusionPipeline.from_pretrained(source, dtype=_TORCH_DTYPES[dtype])
    except (OSError, ValueError) as error:  # not found, offline, not a pipeline, a checkpoint refused (CheckpointError)
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        # diffusers names the model again and points at a stack trace nobody sees: said once, without it
        reason = reason.removeprefix(f"Cannot load model {source}: ").replace(
            " Please check out the root cause in the stacktrace above.", "")
        raise ValueError(f"model {name!r} could not be loaded: {reason}") from error
    pipeline.to(device)
    pipeline.set_progress_bar_config(disable=True)
    model = describe(name, pipeline, device, dtype)
    model.file_hash = checkpoint.hash if checkpoint is not None else ""
    return model


def describe(name: str, pipeline: DiffusionPipeline, device: torch.device, dtype: str = "float32") -> Model:
    """Wrap an already built pipeline (tests build tiny ones from configs) as a Model."""
    config = dict(pipeline.scheduler.config)
    denoiser = getattr(pipeline, "unet", None) or getattr(pipeline, "transformer", None)
    sample = getattr(pipeline, "default_sample_size", None) or getattr(denoiser.config, "sample_size", 64)
    sample = sample[0] if isinstance(sample, (list, tuple)) else sample
    pixel_space = getattr(pipeline, "vae", None) is None  # DDIM, DDPM: the denoiser's sample is the image
    scale = 1 if pixel_space else int(getattr(pipeline, "vae_scale_factor", 8))
    size = int(sample) * scale
    steps, guidance = model_defaults(name, type(pipeline), type(pipeline.scheduler).__name__, config)
    denoiser_name = "unet" if hasattr(pipeline, "unet") else "transformer"
    info = ModelInfo(name, (size, size), guidance, type(pipeline.scheduler).__name__,
                     compatible_schedulers(type(pipeline.scheduler), config), config, steps,
                     unconditional=not takes_prompt(type(pipeline)),
                     a1111=runs_a1111(type(pipeline), denoiser_name, config),
                     a1111_prompts=reads_a1111_prompts(type(pipeline), denoiser_name, config),
                     noise_per_pixel=noise_per_pixel(int(getattr(denoiser.config, "in_channels", 4)), scale,
                                                     packs(pipeline)))
    traced = device.type == "cpu" and isinstance(getattr(pipeline, "unet", None), diffusers.UNet2DConditionModel)
    return Model(name=name, pipeline=pipeline, device=device, dtype=dtype, info=info,
                 call_parameters=frozenset(inspect.signature(pipeline.__call__).parameters), traced=traced)


class ModelStore:
    """The models a server may use, each in the host's dtype, loaded on first use and kept.

    `allowed[0]` is the default, loaded at start-up and never evicted; others are kept up to
    `max_loaded` in all. Names outside `allowed` are refused: links and API calls are untrusted and
    must not make the server load arbitrary paths or hub ids. `info` answers from config files.
    """

    def __init__(self, allowed: list[str], device: torch.device | None = None, max_loaded: int = 2,
                 dtype: str = "float32", lanes: int = 1):
        if not allowed:
            raise ValueError("at least one model must be allowed")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if cpu.is_universal():
            wide.check_dtype(dtype, device or resolve_device())
        self.allowed = list(dict.fromkeys(allowed))
        self.device = device or resolve_device()
        self.max_loaded = max(1, max_loaded)
        self.dtype = dtype
        self.lanes = max(1, lanes)  # images each model generates at once (generation.py)
        self._loaded: OrderedDict[str, Model] = OrderedDict()
        self._infos: dict[str, ModelInfo] = {}
        self._lock = threading.Lock()

    @property
    def default(self) -> str:
        return self.allowed[0]

    def check(self, name: str) -> str:
        """Return `name` if this server allows it, else raise a FieldError naming the allowed ones."""
        if name not in self.allowed:
            raise FieldError("model", f"must be one of the models on this server ({', '.join(self.allowed)}), "
                                      f"got {str(name)[:80]!r}")
        return name

    def check_dtype(self, dtype: str) -> str:
        """Every model here runs in the host's dtype: another would mean a second copy in memory."""
        if dtype != self.dtype:
            raise FieldError("dtype", f"must be {self.dtype} on this server (its models are loaded in {self.dtype}), "
                                      f"got {str(dtype)[:40]!r}")
        return dtype

    def add(self, model: Model) -> None:
        """Register an already loaded model (tests, or a pipeline built in code)."""
        with self._lock:
            if model.dtype != self.dtype:
                raise ValueError(f"model {model.name} is loaded in {model.dtype}, this store serves {self.dtype}")
            if model.name not in self.allowed:
                self.allowed.append(model.name)
            model.lanes = self.lanes
            self._loaded[model.name] = model
            self._infos[model.name] = model.info

    def info(self, name: str) -> ModelInfo:
        """What a request for `name` is checked against, without loading its weights."""
        self.check(name)
        with self._lock:
            if name not in self._infos:
                loaded = self._loaded.get(name)
                self._infos[name] = loaded.info if loaded is not None else read_info(name)
            return self._infos[name]

    def get(self, name: str, dtype: str | None = None) -> Model:
        """The loaded model for `name`, loading it (and evicting the oldest non-default one) if needed."""
        self.check(name)
        self.check_dtype(dtype or self.dtype)
        with self._lock:
            if name not in self._loaded:
                evictable = [key for key in self._loaded if key != self.default]
                while evictable and len(self._loaded) >= self.max_loaded:
                    self._loaded.pop(evictable.pop(0))
                self._loaded[name] = load_model(name, self.device, self.dtype)
                self._loaded[name].lanes = self.lanes
                self._infos[name] = self._loaded[name].info
            self._loaded.move_to_end(name)
            return self._loaded[name]
