"""Single-file checkpoints without their weights: which file a name means, what family it is, which configs fit it.

A checkpoint is one `.safetensors` file of the models folder (library.py): A1111's `Stable-diffusion/`,
ComfyUI's `checkpoints/`. A name finds it by the file's stem (`v1-5-pruned-emaonly`, also written with its
suffix or as A1111's title `NAME [HASH]`) or by A1111's hash: AutoV2 (the first 10 hex digits of the whole
file's SHA-256, "Model hash" in infotexts since 2023) or AutoV1 (8 hex digits of the SHA-256 of 64 KiB at 1 MiB,
the old "Model hash"). A `.ckpt` is listed so that it is refused by name: it would have to be unpickled.

Only the safetensors header is read here (names, dtypes, shapes: no weights). The family comes from the keys,
as A1111's sd_models_config.guess_model_config_from_state_dict decides: SDXL base (`conditioner.embedders.1.model`),
SD 2.x (`cond_stage_model.model`, OpenCLIP), SD 1.x (`cond_stage_model.transformer`, CLIP). Its diffusers configs
ship in seedlab/configs/<family>/. A file whose shapes are not the family's own (a tiny test model, the
embedded one) brings its configs beside it: a folder `NAME/` or `NAME.config/` holding model_index.json and
each component's config (tokenizer files too when its vocabulary is not CLIP's); such a folder always wins.
`NAME.yaml` beside the file (A1111's convention) decides v-prediction (`parameterization: "v"`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import library

CONFIGS = Path(__file__).resolve().parents[2] / "configs"  # seedlab/configs
KIND = "checkpoint"
MAX_BYTES = 20 << 30  # SDXL in float32 with EMA weights is about 14 GB
MAX_HEADER = 64 << 20
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2,
               "I8": 1, "U8": 1, "BOOL": 1}
LABELS = {"sd1": "SD 1.x", "sd2": "SD 2.x", "sdxl": "SDXL"}
PIPELINES = {"sd1": "StableDiffusionPipeline", "sd2": "StableDiffusionPipeline", "sdxl": "StableDiffusionXLPipeline"}
# Weights each family's file must hold (by key prefix): UNet, VAE, text encoder(s).
PARTS = {"sd1": ("model.diffusion_model.", "first_stage_model.", "cond_stage_model.transformer.text_model."),
         "sd2": ("model.diffusion_model.", "first_stage_model.", "cond_stage_model.model."),
         "sdxl": ("model.diffusion_model.", "first_stage_model.", "conditioner.embedders.0.transformer.text_model.",
                  "conditioner.embedders.1.model.")}
_V_DECIDED: dict[tuple[str, int, int], bool] = {}  # SD 2.x files whose UNet was asked (checkpoints.py), by identity


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file and why."""


@dataclass(frozen=True)
class Plan:
    """How a checkpoint file loads: its family, the config folder used and what was decided about it."""

    path: Path
    family: str  # "sd1", "sd2", "sdxl"
    config: Path  # a diffusers config folder: shipped (seedlab/configs/...) or beside the file
    shipped: bool
    prediction: str | None  # "epsilon" / "v_prediction" when decided by NAME.yaml (or A1111's test for SD 2.x)

    @property
    def label(self) -> str:
        return LABELS[self.family]


def read_header(path: Path) -> dict[str, dict]:
    """The tensors a safetensors file declares, checked against its size: refuses oversize, malformed and cut files."""
    name = path.name
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise CheckpointError(f"checkpoint {name} is {size / 2**30:.1f} GiB, "
                              f"over the {MAX_BYTES / 2**30:.0f} GiB limit")
    with open(path, "rb") as file:
        length = int.from_bytes(file.read(8), "little")
        if size < 8 or length > min(MAX_HEADER, size - 8):
            raise CheckpointError(f"checkpoint {name} is not a safetensors file (its header length is {length} bytes, "
                                  f"the file has {size})")
        try:
            header = json.loads(file.read(length))
        except (UnicodeDecodeError, ValueError):
            header = None
    if not isinstance(header, dict):
        raise CheckpointError(f"checkpoint {name} is not a safetensors file (its header is not a JSON object)")
    header.pop("__metadata__", None)
    available = size - 8 - length
    for key, entry in header.items():
        _check_entry(name, key, entry, available)
    return header


def _check_entry(name: str, key: str, entry, available: int) -> None:
    ok = isinstance(entry, dict) and entry.get("dtype") in DTYPE_BYTES and isinstance(entry.get("shape"), list) \
        and all(isinstance(n, int) and n >= 0 for n in entry["shape"]) and isinstance(entry.get("data_offsets"), list) \
        and len(entry["data_offsets"]) == 2 and all(isinstance(n, int) for n in entry["data_offsets"])
    if ok:
        begin, end = entry["data_offsets"]
        ok = 0 <= begin <= end and end - begin == math.prod(entry["shape"]) * DTYPE_BYTES[entry["dtype"]]
    if not ok:
        raise CheckpointError(f"checkpoint {name} is malformed: its header entry {key[:120]!r} is not a tensor")
    if end > available:
        raise CheckpointError(f"checkpoint {name} is truncated: {key[:120]!r} ends at byte {end} of the tensor data, "
                              f"the file holds {available}")


def detect_family(header: dict, name: str) -> str:
    """"sd1", "sd2" or "sdxl" from a checkpoint's keys (A1111's rules), else CheckpointError naming the file."""
    if "conditioner.embedders.1.model.ln_final.weight" in header:
        family = "sdxl"
    elif "conditioner.embedders.0.model.ln_final.weight" in header:
        raise CheckpointError(f"checkpoint {name} is an SDXL refiner: SeedLab runs SD 1.x, SD 2.x and SDXL base files")
    elif "cond_stage_model.model.ln_final.weight" in header:
        family = "sd2"
    elif "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight" in header:
        family = "sd1"
    else:
        sample = ", ".join(sorted(header)[:3]) or "no tensors"
        raise CheckpointError(f"checkpoint {name} has keys of no known family (SD 1.x, SD 2.x, SDXL base in A1111's "
                              f"layout; it has {sample[:200]}, ...)")
    for prefix in PARTS[family]:
        if not any(key.startswith(prefix) for key in header):
            raise CheckpointError(f"checkpoint {name} ({LABELS[family]}) has no {prefix}* weights: SeedLab loads "
                                  "files with their UNet, VAE and text encoders")
    return family


def plan(path: Path, family: str | None = None) -> Plan:
    """What loading `path` takes, from its header and the files beside it: no weights are read."""
    if path.suffix.lower() != ".safetensors":
        raise CheckpointError(f"checkpoint {path.name} is not a .safetensors file: a .ckpt is a pickle, which SeedLab "
                              "never loads (it can run code); convert it to .safetensors")
    found = detect_family(read_header(path), path.name)
    if family is not None and family != found:
        raise CheckpointError(f"checkpoint {path.name} is {LABELS[found]}, not {LABELS.get(family, family)}")
    prediction = _yaml_prediction(path)
    beside = beside_config(path)
    if beside is not None:
        _check_index(beside, found, path.name)
        return Plan(path, found, beside, False, prediction)
    if found == "sd2":
        if prediction is None and _identity(path) in _V_DECIDED:
            prediction = "v_prediction" if _V_DECIDED[_identity(path)] else "epsilon"
        folder = "sd2" if prediction == "epsilon" else "sd2-v"  # undecided: diffusers' own guess (2.1, 768-v)
        return Plan(path, found, CONFIGS / folder, True, prediction)
    return Plan(path, found, CONFIGS / found, True, prediction)


def beside_config(path: Path) -> Path | None:
    """`NAME/` or `NAME.config/` beside the file, holding model_index.json (inside the file's own folder only)."""
    parent = path.parent.resolve()
    for folder in (path.with_name(path.stem), path.with_name(path.stem + ".config")):
        if (folder / "model_index.json").is_file() and folder.resolve().parent == parent:
            return folder
    return None


def _check_index(folder: Path, family: str, name: str) -> None:
    """A config folder beside a file names the family's pipeline and only diffusers and transformers classes."""
    try:
        index = json.loads((folder / "model_index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"the config folder beside checkpoint {name} is unreadable: {error}") from None
    index = index if isinstance(index, dict) else {}
    # A hub folder's safety_checker (library "stable_diffusion") is never loaded from a single file: not counted.
    libraries = {value[0] for key, value in index.items()
                 if key != "safety_checker" and isinstance(value, list) and value and value[0] is not None}
    if index.get("_class_name") != PIPELINES[family] or not libraries <= {"diffusers", "transformers"}:
        raise CheckpointError(f"the config folder {folder.name}/ beside checkpoint {name} must describe a "
                              f"{PIPELINES[family]} of diffusers and transformers classes ({LABELS[family]})")


def _yaml_prediction(path: Path) -> str | None:
    """A1111's NAME.yaml beside the file: `parameterization: "v"` means v-prediction; a yaml without it, epsilon."""
    config = path.with_suffix(".yaml")
    if not config.is_file():
        return None
    try:
        loaded = yaml.safe_load(config.read_text(encoding="utf-8")[:1 << 20])
        params = loaded["model"]["params"]
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError):
        raise CheckpointError(f"{config.name} beside checkpoint {path.name} is not an LDM config "
                              "(model.params)") from None
    return "v_prediction" if isinstance(params, dict) and params.get("parameterization") == "v" else "epsilon"


def remember_v(path: Path, v_prediction: bool) -> None:
    """Keep what A1111's test said of an SD 2.x file, so its info before the next load says the same."""
    _V_DECIDED[_identity(path)] = v_prediction


def _identity(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


def find_checkpoint(name: str, hash_: str = "") -> library.Found | None:
    """The checkpoint of the models folder `name` names (stem, `stem.safetensors`, `stem [HASH]`) or `hash_` does.

    None when there is no models folder or nothing matches (then the name may be a hub id). Names are only compared
    with the listed files' stems, so no text from outside reaches the file system.
    """
    name, hash_ = _split_title(name.strip(), hash_.strip().lower())
    if library.models_dir() is None or not (name or hash_) or "/" in name or "\\" in name:
        return None
    listed = library.files(KIND)
    if not hash_ and name not in listed and not any(stem.lower() == name.lower() for stem in listed):
        if not re.fullmatch(r"[0-9a-f]{8}|[0-9a-f]{10}|[0-9a-f]{64}", name.lower()):
            return None
        name, hash_ = "", name.lower()  # a bare hash
    if len(hash_) == 8:  # an old "Model hash" (AutoV1)
        for stem, paths in listed.items():
            for path in paths:
                if library.autov1_hash(path) == hash_:
                    return library.Found(stem, path, library.short_hash(KIND, path))
    try:
        found = library.find(KIND, name, hash_)
    except library.NotFound:
        return None
    safe = [path for path in listed.get(found.name, []) if path.suffix.lower() == ".safetensors"]
    if found.path.suffix.lower() != ".safetensors" and safe and (not hash_ or found.name == name):
        return library.Found(found.name, safe[0], library.short_hash(KIND, safe[0]))
    return found


def _split_title(name: str, hash_: str) -> tuple[str, str]:
    """A1111's checkpoint title "NAME.safetensors [abcdef1234]" -> ("NAME", "abcdef1234")."""
    if match := re.fullmatch(r"(.*?)\s*\[([0-9a-fA-F]{8,64})\]", name):
        name, hash_ = match[1], hash_ or match[2].lower()
    for suffix in library.SUFFIXES[KIND]:
        if name.lower().endswith(suffix):
            name = name[:-len(suffix)]
    return name, hash_


def checkpoint_names() -> list[str]:
    """The checkpoints of the models folder a model menu lists, by name (stem): safetensors of a known family
    (their headers are read: a LoRA in a folder of mixed files is left out)."""
    return sorted(stem for stem, paths in library.files(KIND).items() if any(_known(path) for path in paths))


def _known(path: Path) -> bool:
    try:
        return path.suffix.lower() == ".safetensors" and bool(detect_family(read_header(path), path.name))
    except (CheckpointError, OSError):
        return False


def hash_matches(found: library.Found, wanted: str) -> bool:
    """Whether the file `found` is the one A1111's hash `wanted` names (AutoV2, its full SHA-256, or AutoV1)."""
    wanted = wanted.lower()
    if len(wanted) == 8:
        return library.autov1_hash(found.path) == wanted
    return wanted.startswith(found.hash) or found.hash.startswith(wanted)


def hash_problem(model: str, wanted: str) -> str | None:
    """Why `model` is not the checkpoint file `wanted` names, in words for a model_hash FieldError; None if it is."""
    found = find_checkpoint(model)
    if found is None:
        return (f"names a checkpoint file by its hash; {model[:60]} is not a checkpoint of the models folder, so leave "
                "model_hash empty")
    if not hash_matches(found, wanted):
        return f"is {wanted[:64]}, but checkpoint {found.name} here has hash {found.hash}: another file"
    return None


def resolve_hash(recipe) -> tuple[object, list[str]]:
    """A recipe from another tool whose checkpoint is found by its hash (whatever its name here), and notes: a
    checkpoint of the same name with another hash is used and said to differ; a model that is no checkpoint file
    here keeps no hash."""
    if not recipe.model_hash:
        return recipe, []
    by_hash = find_checkpoint("", recipe.model_hash)
    if by_hash is not None:
        if by_hash.name == recipe.model:
            return recipe, []
        return recipe.replace(model=by_hash.name), [f"checkpoint {recipe.model[:60]} is found by its hash "
                                                    f"{recipe.model_hash} as {by_hash.name}"]
    by_name = find_checkpoint(recipe.model)
    if by_name is None:
        return recipe, []  # not here at all: the server's model is used, with its own note
    return recipe.replace(model_hash=by_name.hash), [
        f"checkpoint {by_name.name} here has hash {by_name.hash}, the image was made with {recipe.model_hash}: "
        "another checkpoint, so the image differs"]
