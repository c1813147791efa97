"""What a model says of itself, without loading its weights: native size, defaults, schedulers offered.

`ModelInfo` is what admission needs to know about a model: read from a loaded model, or from the
checkpoint's config files alone (model_index.json, scheduler, denoiser, VAE), so checking a request
never loads weights. `model_defaults` is where a recipe for a model starts (steps, guidance).
"""

from __future__ import annotations

import copy
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path

import diffusers
from diffusers import DiffusionPipeline

from ..latents import class_packs
from ..recipe import DEFAULT_MODEL, DEFAULT_SCHEDULER, EMBEDDED_FOLDERS, NEW_IMAGE_MODEL, FieldError
from ..samplers.names import A1111_OWN_SAMPLERS, A1111_SAMPLERS, is_ksampler, nearest
from .checkpoint_files import CheckpointError, find_checkpoint, plan

EMBEDDED_MODEL_DIR = EMBEDDED_FOLDERS[DEFAULT_MODEL]  # seedlab/embedded_model
EMBEDDED_GUIDANCE = 2.5  # where the embedded model meets its quality targets (training/evaluate.py, docs/models.md)
EMBEDDED_V2_DIR = EMBEDDED_FOLDERS[NEW_IMAGE_MODEL]  # seedlab/embedded_model_v2
EMBEDDED_V2_GUIDANCE = 2.5  # embedded-v2's default (training/variations.py, docs/models.md)
# The models that ship in the repository, by name: their folders and default guidance. Each keeps its weights
# for good (a link names its model, and one that names none was made with DEFAULT_MODEL).
EMBEDDED_MODELS = {DEFAULT_MODEL: (EMBEDDED_MODEL_DIR, EMBEDDED_GUIDANCE),
                   NEW_IMAGE_MODEL: (EMBEDDED_V2_DIR, EMBEDDED_V2_GUIDANCE)}
STANDARD_GUIDANCE = 7.5  # StableDiffusionPipeline's own default, a fair start for real checkpoints
EXPLORING_STEPS = 20  # the recipe's default: enough for a grid to show compositions, fewer than most pipelines' own
FEW_STEP_WORDS = ("turbo", "lightning", "hyper", "lcm", "schnell")  # model names of step-distilled checkpoints
FEW_STEP_SCHEDULERS = ("LCMScheduler", "TCDScheduler")


def model_source(name: str) -> str:
    """Where `from_pretrained` finds a model name: an embedded model's folder, a local folder or a hub id."""
    return str(EMBEDDED_MODELS[name][0]) if name in EMBEDDED_MODELS else name


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
    a1111: bool = False  # runs A1111's samplers (engine/samplers/a1111.py): a Stable Diffusion 1.x / 2.x UNet pipeline
    # reads A1111's prompt syntax: where its samplers run, and SDXL (engine/prompts/sdxl.py)
    a1111_prompts: bool = False
    # the starting noise's values per image pixel: latent channels / (VAE scale)**2 (the budget prices noise by it)
    noise_per_pixel: float = 3.0  # where unknown: a pixel-space model's 3 channels, the most of any family
    _made: dict = field(default_factory=dict, repr=False, compare=False)  # name -> an untouched instance

    def make_scheduler(self, name: str):
        """A fresh scheduler instance (no state shared between runs) from the checkpoint's config."""
        if is_ksampler(name):
            raise FieldError("scheduler", f"{name[:80]!r} is one of A1111's samplers, run by engine/samplers/a1111.py, "
                                          "not a diffusers scheduler")
        if name == DEFAULT_SCHEDULER:
            name = self.default_scheduler
        if name not in self.schedulers:
            raise FieldError("scheduler", f"must be one of {', '.join(self.offered())} for model "
                                          f"{self.name}, got {name[:80]!r}{nearest(name, self.offered())}")
        # Building one can take a second (KDPM2's take 0.4 to 1 s); a copy of an untouched one takes a
        # millisecond and is the same scheduler, so checking hundreds of recipes costs no more than one.
        if name not in self._made:
            self._made[name] = self.schedulers[name].from_config(self.scheduler_config)
        return copy.deepcopy(self._made[name])


    def reads(self, syntax: str) -> bool:
        """Whether this model reads prompts in `syntax`: A1111's on SD 1.x / 2.x and SDXL, NovelAI's and ComfyUI's
        on SD 1.x / 2.x (one CLIP text encoder), plain on any."""
        return syntax == "plain" or (self.a1111_prompts if syntax == "a1111" else self.a1111)

    def offered(self) -> list[str]:
        """Every scheduler name this model runs: A1111's samplers (where it can) and its diffusers classes."""
        return [*((*A1111_SAMPLERS, *A1111_OWN_SAMPLERS) if self.a1111 else ()), *sorted(self.schedulers)]

    def scheduler_name(self, name: str) -> str:
        """The name a recipe records: an A1111 sampler as named, a diffusers scheduler by its class."""
        if is_ksampler(name):
            if not self.a1111:
                raise FieldError("scheduler", f"must be one of {', '.join(self.offered())} for model {self.name} "
                                              "(A1111's samplers run on Stable Diffusion 1.x and 2.x), "
                                              f"got {name[:80]!r}")
            return name
        return type(self.make_scheduler(name)).__name__


def noise_per_pixel(in_channels: int, scale: int, packed: bool) -> float:
    """The starting noise's values per image pixel: the denoiser's input channels at 1/scale of the image's sides
    (a packed pipeline's 2x2 patches hold 4 latent pixels: Flux's 64 channels are 16 at 1/8)."""
    return in_channels / (4 if packed else 1) / scale ** 2


def runs_a1111(pipeline_class: type | None, denoiser: str, scheduler_config: dict) -> bool:
    """Whether A1111's samplers can run on this model (samplers/a1111.py check_pipeline says the same of a pipeline)."""
    return (pipeline_class is not None and pipeline_class.__name__ == "StableDiffusionPipeline" and denoiser == "unet"
            and scheduler_config.get("prediction_type", "epsilon") in ("epsilon", "v_prediction")
            and scheduler_config.get("beta_schedule", "scaled_linear") in ("scaled_linear", "linear")
            and not scheduler_config.get("rescale_betas_zero_snr"))


def reads_a1111_prompts(pipeline_class: type | None, denoiser: str, scheduler_config: dict) -> bool:
    """Whether A1111's prompt syntax is read for this model: where A1111's samplers run (prompts.py) and on SDXL's
    text-to-image pipeline (engine/prompts/sdxl.py; its samplers stay SD 1.x / 2.x's)."""
    return runs_a1111(pipeline_class, denoiser, scheduler_config) or (
        pipeline_class is not None and pipeline_class.__name__ == "StableDiffusionXLPipeline" and denoiser == "unet")


def model_defaults(name: str, pipeline_class: type | None, scheduler_name: str,
                   scheduler_config: dict) -> tuple[int, float]:
    """(steps, guidance) a recipe for this model starts from, read from what the checkpoint says of itself.

    - an embedded model: 20 steps at its measured best guidance (2.5 for both);
    - any other: its pipeline's own guidance default (SD 1.x/2.x 7.5, SDXL 5, SD3 7, Flux 3.5, PixArt 4.5)
      and the fewer of 20 and its pipeline's own step default (an LCM pipeline's 4);
    - a step-distilled checkpoint (turbo, lightning, LCM, TCD): its scheduler is LCM or TCD, its name
      says so (turbo, lightning, hyper, lcm, schnell), or its scheduler spaces timesteps "trailing"
      without zero terminal SNR (how sd-turbo and sdxl-turbo ship): 4 steps (1 for a turbo, as its card
      says) and guidance 0 (no classifier-free guidance; an LCM pipeline keeps its own guidance embedding).
    """
    if name in EMBEDDED_MODELS:
        return EXPLORING_STEPS, EMBEDDED_MODELS[name][1]
    call = inspect.signature(pipeline_class.__call__).parameters if pipeline_class is not None else {}
    guidance, steps = STANDARD_GUIDANCE, EXPLORING_STEPS
    if "guidance_scale" in call and isinstance(call["guidance_scale"].default, (int, float)):
        guidance = float(call["guidance_scale"].default)
    if "num_inference_steps" in call and isinstance(call["num_inference_steps"].default, int):
        steps = max(1, min(steps, call["num_inference_steps"].default))
    base = name.lower().replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]  # a hub id's name, or a folder's
    trailing = (scheduler_config.get("timestep_spacing") == "trailing"
                and not scheduler_config.get("rescale_betas_zero_snr"))
    if scheduler_name in FEW_STEP_SCHEDULERS or any(word in base for word in FEW_STEP_WORDS) or trailing:
        steps = 1 if "turbo" in base else min(steps, 4)
        guidance = guidance if "negative_prompt" not in call else 0.0  # LCM's pipeline embeds its guidance
    return steps, guidance


def read_info(name: str) -> ModelInfo:
    """A model's ModelInfo from its config files (model_index.json, scheduler, denoiser, VAE): no weights.

    A single-file checkpoint of the models folder answers from the configs it loads with (checkpoint_files.py).
    """
    source, overrides = _checkpoint_source(name) or (model_source(name), {})
    if looks_local(source) and not Path(source).expanduser().is_dir():
        raise FieldError("model", f"{name[:200]!r} is not a folder on this machine "
                                  "(a local model is a diffusers folder)")
    try:
        index = DiffusionPipeline.load_config(source)
        scheduler_class = getattr(diffusers, index["scheduler"][1])
        scheduler_config = {**scheduler_class.load_config(source, subfolder="scheduler"), **overrides}
        denoiser = "unet" if "unet" in index else "transformer"
        denoiser_config = getattr(diffusers, index[denoiser][1]).load_config(source, subfolder=denoiser)
        # Pixel-space pipelines (DDIM, DDPM) have no VAE: the denoiser's sample size is the image's.
        vae_config = getattr(diffusers, index["vae"][1]).load_config(source, subfolder="vae") if "vae" in index else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise FieldError("model", f"{name[:200]!r} could not be read: {first_line(error)}") from None
    pipeline_class = getattr(diffusers, str(index.get("_class_name")), None)
    # A transformer config without a sample size: Flux, whose pipeline defaults to 128 latent pixels.
    sample = denoiser_config.get("sample_size", 64 if denoiser == "unet" else 128)
    sample = sample[0] if isinstance(sample, (list, tuple)) else sample
    scale = 2 ** (len(vae_config.get("block_out_channels", [0] * 4)) - 1) if "vae" in index else 1
    size = int(sample) * scale
    steps, guidance = model_defaults(name, pipeline_class, scheduler_class.__name__, scheduler_config)
    return ModelInfo(name, (size, size), guidance, scheduler_class.__name__,
                     compatible_schedulers(scheduler_class, scheduler_config), scheduler_config, steps,
                     unconditional=pipeline_class is not None and not takes_prompt(pipeline_class),
                     a1111=runs_a1111(pipeline_class, denoiser, scheduler_config),
                     a1111_prompts=reads_a1111_prompts(pipeline_class, denoiser, scheduler_config),
                     noise_per_pixel=noise_per_pixel(int(denoiser_config.get("in_channels", 4)), scale,
                                                     pipeline_class is not None and class_packs(pipeline_class)))


def _checkpoint_source(name: str) -> tuple[str, dict] | None:
    """(config folder, scheduler overrides) for a checkpoint of the models folder; None for any other name."""
    found = find_checkpoint(name) if name not in EMBEDDED_MODELS and not looks_local(name) else None
    if found is None:
        return None
    try:
        steps = plan(found.path)
    except (CheckpointError, OSError) as error:
        raise FieldError("model", f"{name[:200]!r} could not be read: {first_line(error)}") from None
    # NAME.yaml's parameterization on SD 1.x / SDXL (on SD 2.x it picked the config folder)
    overrides = {"prediction_type": steps.prediction} if steps.prediction and steps.shipped else {}
    return str(steps.config.resolve()), overrides


def takes_prompt(pipeline_class: type) -> bool:
    """Does this pipeline take a prompt? Unconditional ones (DDIMPipeline, DDPMPipeline) do not."""
    return "prompt" in inspect.signature(pipeline_class.__call__).parameters


def check_unconditional(info: ModelInfo, prompt: str, negative_prompt: str, width: int,
                        height: int) -> list[FieldError]:
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
    """The scheduler classes diffusers lists as compatible that accept this config, by name.

    Trying one builds it (each KDPM2 takes 0.17 s: 0.39 s of the embedded model's 0.7 s load), so the answer is kept
    for the process, per class and config: loading the same model again (a second store, a test) builds none.
    """
    key = (scheduler_class, json.dumps(config, sort_keys=True, default=repr))
    if key not in _COMPATIBLE:
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
        if len(_COMPATIBLE) >= 64:  # a long-lived process meeting many configs: bounded
            _COMPATIBLE.pop(next(iter(_COMPATIBLE)))
        _COMPATIBLE[key] = dict(sorted(schedulers.items()))
    return dict(_COMPATIBLE[key])


_COMPATIBLE: dict[tuple[type, str], dict[str, type]] = {}


def looks_local(source: str) -> bool:
    """A folder path rather than a hub id ("owner/name")."""
    return source.startswith((".", "/", "~")) or "\\" in source or source.count("/") > 1


def first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__
