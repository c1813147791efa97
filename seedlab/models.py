"""Models: load diffusers text-to-image pipelines, pick their device, list their schedulers.

A model is named by a hub id ("stabilityai/sd-turbo"), a local folder, or "embedded": the small
checkpoint that ships in seedlab/embedded_model so SeedLab works offline (README.md, "Models", says
how it is trained). The host decides which names may be loaded and in which dtype
(`ModelStore(allowed=..., dtype=...)`): links and API calls can only pick among those.

`ModelInfo` is what admission needs to know about a model (native size, default guidance, schedulers
offered): read from a loaded model, or from the checkpoint's config files alone, so checking a
request never loads weights.
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

from .recipe import DEFAULT_MODEL, DEFAULT_SCHEDULER, DTYPES, FieldError
from .tracing import TracedUNet

EMBEDDED_MODEL_DIR = Path(__file__).parent / "embedded_model"
EMBEDDED_GUIDANCE = 2.5  # where the embedded model meets its quality targets (training/evaluate.py, README)
STANDARD_GUIDANCE = 7.5  # StableDiffusionPipeline's own default, a fair start for real checkpoints
EXPLORING_STEPS = 20  # the recipe's default: enough for a grid to show compositions, fewer than most pipelines' own
FEW_STEP_WORDS = ("turbo", "lightning", "hyper", "lcm", "schnell")  # model names of step-distilled checkpoints
FEW_STEP_SCHEDULERS = ("LCMScheduler", "TCDScheduler")
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


def model_source(name: str) -> str:
    """Where `from_pretrained` finds a model name: the embedded folder, a local folder or a hub id."""
    return str(EMBEDDED_MODEL_DIR) if name == DEFAULT_MODEL else name


@dataclass(frozen=True)
class ModelInfo:
    """What a request is checked against: known without loading the weights."""

    name: str
    native_size: tuple[int, int]  # (width, height) the checkpoint was trained at
    default_guidance: float
    default_scheduler: str
    schedulers: dict[str, type] = field(repr=False)  # compatible scheduler classes by class name
    scheduler_config: dict = field(repr=False)  # the checkpoint's own scheduler config
    default_steps: int = EXPLORING_STEPS
    unconditional: bool = False  # a pipeline without a prompt (DDIM, DDPM): it makes its native size only

    def make_scheduler(self, name: str):
        """A fresh scheduler instance (no state shared between runs) from the checkpoint's config."""
        if name == DEFAULT_SCHEDULER:
            name = self.default_scheduler
        if name not in self.schedulers:
            raise FieldError("scheduler", f"must be one of {', '.join(sorted(self.schedulers))} for model "
                                          f"{self.name}, got {name[:80]!r}")
        return self.schedulers[name].from_config(self.scheduler_config)


def model_defaults(name: str, pipeline_class: type | None, scheduler_name: str, scheduler_config: dict) -> tuple[int, float]:
    """(steps, guidance) a recipe for this model starts from, read from what the checkpoint says of itself.

    - the embedded model: 20 steps at its measured best guidance (2.5);
    - any other: its pipeline's own guidance default (SD 1.x/2.x 7.5, SDXL 5, SD3 7, Flux 3.5, PixArt 4.5)
      and the fewer of 20 and its pipeline's own step default (an LCM pipeline's 4);
    - a step-distilled checkpoint (turbo, lightning, LCM, TCD): its scheduler is LCM or TCD, its name
      says so (turbo, lightning, hyper, lcm, schnell), or its scheduler spaces timesteps "trailing"
      without zero terminal SNR (how sd-turbo and sdxl-turbo ship): 4 steps (1 for a turbo, as its card
      says) and guidance 0 (no classifier-free guidance; an LCM pipeline keeps its own guidance embedding).
    """
    if name == DEFAULT_MODEL:
        return EXPLORING_STEPS, EMBEDDED_GUIDANCE
    call = inspect.signature(pipeline_class.__call__).parameters if pipeline_class is not None else {}
    guidance, steps = STANDARD_GUIDANCE, EXPLORING_STEPS
    if "guidance_scale" in call and isinstance(call["guidance_scale"].default, (int, float)):
        guidance = float(call["guidance_scale"].default)
    if "num_inference_steps" in call and isinstance(call["num_inference_steps"].default, int):
        steps = max(1, min(steps, call["num_inference_steps"].default))
    base = name.lower().replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]  # a hub id's name, or a folder's
    trailing = scheduler_config.get("timestep_spacing") == "trailing" and not scheduler_config.get("rescale_betas_zero_snr")
    if scheduler_name in FEW_STEP_SCHEDULERS or any(word in base for word in FEW_STEP_WORDS) or trailing:
        steps = 1 if "turbo" in base else min(steps, 4)
        guidance = guidance if "negative_prompt" not in call else 0.0  # LCM's pipeline embeds its guidance
    return steps, guidance


def read_info(name: str) -> ModelInfo:
    """A model's ModelInfo from its config files (model_index.json, scheduler, denoiser, VAE): no weights."""
    source = model_source(name)
    if _looks_local(source) and not Path(source).expanduser().is_dir():
        raise FieldError("model", f"{name[:200]!r} is not a folder on this machine (a local model is a diffusers folder)")
    try:
        index = DiffusionPipeline.load_config(source)
        scheduler_class = getattr(diffusers, index["scheduler"][1])
        scheduler_config = dict(scheduler_class.load_config(source, subfolder="scheduler"))
        denoiser = "unet" if "unet" in index else "transformer"
        denoiser_config = getattr(diffusers, index[denoiser][1]).load_config(source, subfolder=denoiser)
        # Pixel-space pipelines (DDIM, DDPM) have no VAE: the denoiser's sample size is the image's.
        vae_config = getattr(diffusers, index["vae"][1]).load_config(source, subfolder="vae") if "vae" in index else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise FieldError("model", f"{name[:200]!r} could not be read: {_first_line(error)}") from None
    pipeline_class = getattr(diffusers, str(index.get("_class_name")), None)
    # A transformer config without a sample size: Flux, whose pipeline defaults to 128 latent pixels.
    sample = denoiser_config.get("sample_size", 64 if denoiser == "unet" else 128)
    sample = sample[0] if isinstance(sample, (list, tuple)) else sample
    scale = 2 ** (len(vae_config.get("block_out_channels", [0] * 4)) - 1) if "vae" in index else 1
    size = int(sample) * scale
    steps, guidance = model_defaults(name, pipeline_class, scheduler_class.__name__, scheduler_config)
    return ModelInfo(name, (size, size), guidance, scheduler_class.__name__,
                     compatible_schedulers(scheduler_class, scheduler_config), scheduler_config, steps,
                     unconditional=pipeline_class is not None and not takes_prompt(pipeline_class))


def takes_prompt(pipeline_class: type) -> bool:
    """Does this pipeline take a prompt? Unconditional ones (DDIMPipeline, DDPMPipeline) do not."""
    return "prompt" in inspect.signature(pipeline_class.__call__).parameters


def check_unconditional(info: ModelInfo, prompt: str, negative_prompt: str, width: int, height: int) -> list[FieldError]:
    """What an unconditional pipeline cannot take: a prompt, a negative prompt, a size other than its own."""
    if not info.unconditional:
        return []
    errors = [FieldError(name, f"must be empty for model {info.name}: it is unconditional (it takes no prompt)")
              for name, text in (("prompt", prompt), ("negative_prompt", negative_prompt)) if text]
    native = dict(zip(("width", "height"), info.native_size))
    errors += [FieldError(name, f"must be {native[name]} for model {info.name}: an unconditional pipeline makes "
                                f"its native size only, got {value}")
               for name, value in (("width", width), ("height", height)) if value != native[name]]
    return errors


def compatible_schedulers(scheduler_class: type, config: dict) -> dict[str, type]:
    """The scheduler classes diffusers lists as compatible that accept this config, by name."""
    schedulers = {scheduler_class.__name__: scheduler_class}
    for candidate_name in getattr(scheduler_class, "_compatibles", []):
        candidate = getattr(diffusers, candidate_name, None)
        if candidate is None:
            continue
        try:  # some need optional packages (torchsde, scipy) or reject this config
            candidate.from_config(config)
        except Exception:  # noqa: BLE001 - any failure means "not offered"
            continue
        schedulers[candidate.__name__] = candidate
    return dict(sorted(schedulers.items()))


def _looks_local(source: str) -> bool:
    """A folder path rather than a hub id ("owner/name")."""
    return source.startswith((".", "/", "~")) or "\\" in source or source.count("/") > 1


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


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

    def lane_pipelines(self, count: int) -> list[DiffusionPipeline]:
        """`count` pipelines sharing this one's weights, each with its own scheduler and call state.

        They are shallow copies (modules shared, not copied), so `self.pipeline` itself stays as
        loaded: plain diffusers calls on it are what SeedLab's pixels are checked against. When
        `traced`, the copies call the UNet through one shared TracedUNet.
        """
        while len(self._lane_copies) < count:
            lane = copy.copy(self.pipeline)
            if self.traced:
                if self._traced_unet is None:
                    self._traced_unet = TracedUNet(self.pipeline.unet)
                # Not the pipeline's own setattr, which would register the stand-in in the copy's config.
                object.__setattr__(lane, "unet", self._traced_unet)
            self._lane_copies.append(lane)
        return self._lane_copies[:count]


def default_lanes(device: torch.device, threads: int) -> int:
    """Lanes that keep a CPU's cores busy at `threads` intra-op threads each; one on a GPU (it batches inside)."""
    if device.type != "cpu":
        return 1
    return max(1, min(8, (os.cpu_count() or 1) // max(1, threads)))


def load_model(name: str = DEFAULT_MODEL, device: torch.device | None = None, dtype: str = "float32") -> Model:
    """Load a text-to-image pipeline with `from_pretrained` and describe it."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if name == DEFAULT_MODEL and not (EMBEDDED_MODEL_DIR / "model_index.json").exists():
        raise ValueError(f"the embedded model is missing from {EMBEDDED_MODEL_DIR}; train it (README.md, Models)")
    source = model_source(name)
    if _looks_local(source):
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
    denoiser = getattr(pipeline, "unet", None) or getattr(pipeline, "transformer", None)
    sample = getattr(pipeline, "default_sample_size", None) or getattr(denoiser.config, "sample_size", 64)
    sample = sample[0] if isinstance(sample, (list, tuple)) else sample
    pixel_space = getattr(pipeline, "vae", None) is None  # DDIM, DDPM: the denoiser's sample is the image
    size = int(sample) * (1 if pixel_space else int(getattr(pipeline, "vae_scale_factor", 8)))
    steps, guidance = model_defaults(name, type(pipeline), type(pipeline.scheduler).__name__, config)
    info = ModelInfo(name, (size, size), guidance, type(pipeline.scheduler).__name__,
                     compatible_schedulers(type(pipeline.scheduler), config), config, steps,
                     unconditional=not takes_prompt(type(pipeline)))
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
