"""Load a single-file checkpoint (A1111's and ComfyUI's `.safetensors` of SD 1.x, SD 2.x, SDXL) as a diffusers
pipeline, offline.

diffusers' `from_single_file` converts the LDM key layout; left to itself it fetches the diffusers configs
of the detected model type from the Hugging Face Hub, even with `local_files_only=True` (it retries online
when they are not cached). Given `config=` a local folder with model_index.json and each component's config,
and `local_files_only=True`, it reads nothing else and makes no network call. That folder is seedlab/configs/
<family>/ (or the one beside the file: checkpoint_files.py says how it is chosen).

Tokenizers: SD 1.x, SD 2.x and both SDXL encoders use CLIP's byte-level BPE vocabulary (49,408 tokens: the 512
byte characters, 48,894 merges, two special tokens). Only the merges ship (seedlab/configs/clip_merges.txt.gz,
the first 48,894 lines of CLIP's bpe_simple_vocab_16e6.txt, MIT licensed by OpenAI); the vocabulary is rebuilt
from them in CLIP's order. SD 1.x's tokenizer pads with <|endoftext|>; OpenCLIP's (SD 2.x, SDXL's second) with
"!" (id 0), as the diffusers folders of those models do.

SD 2.x: whether a file predicts v (2.x 768-v) or noise (2.x base) is not in its keys; as A1111 does
(sd_models_config.is_using_v_parameterization_for_sd2), the UNet is run once on a constant input and a mean
output below -1 means v-prediction. A `NAME.yaml` beside the file decides instead.
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

import diffusers
import torch
from diffusers import UNet2DConditionModel
from diffusers.loaders.single_file_utils import SingleFileComponentError
from transformers import CLIPTokenizer

from .checkpoint_files import CONFIGS, CheckpointError, Plan, plan, remember_v

PADS = {"sd1": ("<|endoftext|>",), "sd2": ("!",), "sdxl": ("<|endoftext|>", "!")}  # tokenizer, tokenizer_2
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def load_single_file(path: str | Path, family: str | None = None, dtype: torch.dtype | str = torch.float32,
                     device: torch.device | str | None = None) -> diffusers.DiffusionPipeline:
    """A pipeline from one `.safetensors` checkpoint; `family` ("sd1", "sd2", "sdxl") checks what the keys say.

    Raises CheckpointError, naming the file, for a .ckpt, an oversize, malformed or cut file, keys of no known
    family, or weights that do not fit the configs used.
    """
    path = Path(path)
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    device = torch.device(device) if device is not None else torch.device("cpu")
    steps = plan(path, family)
    components = _tokenizers(steps)
    if steps.family == "sd2" and steps.shipped and steps.prediction is None:
        steps, components["unet"] = _decide_sd2(steps, dtype, device)
    if steps.prediction is not None and steps.shipped and steps.family != "sd2":  # NAME.yaml: v on SD 1.x / SDXL
        components["scheduler"] = _scheduler(steps.config, prediction_type=steps.prediction)
    pipeline_class = getattr(diffusers, json.loads((steps.config / "model_index.json").read_text())["_class_name"])
    try:
        pipeline = pipeline_class.from_single_file(str(path), config=str(steps.config), local_files_only=True,
                                                   dtype=dtype, **components)
    except (ValueError, RuntimeError, KeyError, OSError, TypeError, SingleFileComponentError) as error:
        raise CheckpointError(_misfit(steps, error)) from error
    _check_complete(pipeline, steps)
    pipeline.to(device)
    pipeline.set_progress_bar_config(disable=True)
    return pipeline


def _misfit(steps: Plan, error: Exception) -> str:
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    reason = reason.split(". If you want")[0].replace("Cannot load  because ", "")[:300]  # diffusers' shape message
    where = f"the config folder {steps.config.name}/ beside it" if not steps.shipped else \
        f"SeedLab's {steps.label} config; a checkpoint of another shape loads with its diffusers config folder " \
        f"beside it ({steps.path.stem}/ or {steps.path.stem}.config/ with model_index.json, docs/models.md)"
    return f"checkpoint {steps.path.name} does not fit {where}: {reason}"


def _check_complete(pipeline, steps: Plan) -> None:
    """diffusers leaves weights the file lacks on the meta device; refuse rather than fail at the first call."""
    for name, module in pipeline.components.items():
        missing = [key for key, value in getattr(module, "named_parameters", list)() if value.is_meta]
        if missing:
            raise CheckpointError(_misfit(steps, ValueError(f"no weights for {name} {missing[0]} "
                                                            f"({len(missing)} missing)")))


def _tokenizers(steps: Plan) -> dict[str, CLIPTokenizer]:
    """CLIP tokenizers for the slots whose folder has none (every shipped config; a folder beside may bring its own)."""
    slots = ("tokenizer", "tokenizer_2")
    return {slot: clip_tokenizer(pad) for slot, pad in zip(slots, PADS[steps.family])
            if not (steps.config / slot).is_dir()}


@lru_cache(maxsize=1)
def _vocabulary() -> tuple[dict[str, int], tuple[tuple[str, str], ...]]:
    with gzip.open(CONFIGS / "clip_merges.txt.gz", "rt", encoding="utf-8") as file:
        merges = tuple(tuple(line.split()) for line in file.read().splitlines())
    characters = _byte_characters()
    tokens = characters + [c + "</w>" for c in characters] + ["".join(m) for m in merges]
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    return {token: index for index, token in enumerate(tokens)}, merges


def clip_tokenizer(pad_token: str = "<|endoftext|>") -> CLIPTokenizer:
    """A fresh CLIP tokenizer (49,408 tokens, 77 positions) padding with `pad_token`."""
    vocab, merges = _vocabulary()
    return CLIPTokenizer(vocab=dict(vocab), merges=list(merges), pad_token=pad_token, model_max_length=77)


def _byte_characters() -> list[str]:
    """The characters byte-level BPE writes bytes 0..255 as, in CLIP's order (printable ones first)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [byte for byte in range(256) if byte not in printable]
    return [chr(code) for code in printable] + [chr(256 + index) for index in range(len(others))]


def _scheduler(folder: Path, **overrides):
    config = json.loads((folder / "scheduler" / "scheduler_config.json").read_text())
    return getattr(diffusers, config["_class_name"]).from_config({**config, **overrides})


def _decide_sd2(steps: Plan, dtype: torch.dtype, device: torch.device) -> tuple[Plan, UNet2DConditionModel]:
    """Load the UNet, ask it as A1111 does whether it predicts v, and pick the SD 2.x config folder that says so."""
    try:
        unet = UNet2DConditionModel.from_single_file(str(steps.path), config=str(CONFIGS / "sd2-v"), subfolder="unet",
                                                     local_files_only=True, dtype=dtype)
    except (ValueError, RuntimeError, KeyError, OSError, SingleFileComponentError) as error:
        raise CheckpointError(_misfit(steps, error)) from error
    unet.to(device)
    v_prediction = predicts_v(unet)
    remember_v(steps.path, v_prediction)
    folder = CONFIGS / ("sd2-v" if v_prediction else "sd2")
    size = json.loads((folder / "unet" / "config.json").read_text())["sample_size"]
    unet.register_to_config(sample_size=size)
    return Plan(steps.path, steps.family, folder, True, "v_prediction" if v_prediction else "epsilon"), unet


@torch.no_grad()
def predicts_v(unet) -> bool:
    """A1111's test: at t=999 on a constant latent, a v-predicting SD 2.x UNet's mean output minus the input is
    below -1."""
    parameter = next(unet.parameters())
    latent = torch.full((1, 4, 8, 8), 0.5, dtype=parameter.dtype, device=parameter.device)
    context = torch.full((1, 2, unet.config.cross_attention_dim), 0.5, dtype=parameter.dtype, device=parameter.device)
    timestep = torch.tensor([999], device=parameter.device)
    out = unet(latent, timestep, encoder_hidden_states=context).sample
    return (out.float() - latent.float()).mean().item() < -1
