"""Textual inversion embeddings, used as A1111 1.10 uses them in an A1111-syntax prompt (SD 1.x / 2.x, SDXL).

An embedding is a file in the models folder's embeddings (library.py, kind "embedding"): n vectors as wide as
the text encoder's token embeddings, which take the place of its name's tokens in the prompt and in the
negative prompt alike (prompts.py places them). As A1111's EmbeddingDatabase
(modules/textual_inversion/textual_inversion.py):

- its name is the file's stem (load_from_file; only PNG embeddings carry a name of their own, not read here),
  and a prompt names it by the token ids of that name, so case and spacing fold as CLIP's tokenizer folds them;
- the layouts of create_embedding_from_data, one term per file: A1111's `.pt` ({"string_to_param": {"*":
  vectors}, "name", "step", ...}) and a dict of one tensor, {token: vectors} (diffusers' learned_embeds.bin,
  a `.safetensors` with `emb_params`), a single vector read as one; on SDXL, {"clip_l": [n, 768], "clip_g":
  [n, 1280]} (sd_hijack.py's EmbeddingsWithFixes puts clip_l's vectors in CLIP-L, clip_g's in OpenCLIP-G:
  engine/prompts/sdxl.py);
- "TI hashes": "name: first 12 hex digits of the file's SHA-256, ..." (sd_hijack_clip.py's forward), the
  prompt's embeddings then the negative prompt's (processing.py encodes the negative prompt first and
  forward appends the earlier value).

Files are never unpickled as code: `.safetensors` is read with safetensors, `.pt` / `.bin` only in torch.save's
zip format, uncompressed, with torch's weights-only loader: a pickle naming anything but tensors, plain
containers and torch's ParameterDict (which A1111's modules/safe.py also allows) is refused before it runs.
A file over MAX_FILE_BYTES, of another layout, or whose width is not the text encoder's is refused with a
message naming it (A1111 would skip it and read its name as words).
"""

from __future__ import annotations

import re
import threading
import zipfile
from collections import OrderedDict
from pathlib import Path

import torch
from safetensors.torch import load_file

from ..spec import FieldError
from ..weights import library, lora_names
from . import a1111 as prompts

MAX_FILE_BYTES = 16 << 20  # an SD embedding of 75 vectors is ~0.2 MB; SDXL's pair ~0.6 MB
MAX_VECTORS = 75  # A1111's chunk: an embedding longer than one cannot be placed
MAX_WIDTH = 8192
KEPT = 64  # embeddings kept in memory, by file and version
SAFE_GLOBALS = [torch.nn.ParameterDict]  # the one class beyond tensors A1111's modules/safe.py lets an embedding name
Vectors = torch.Tensor | dict[str, torch.Tensor]  # one encoder's [n, width], or SDXL's {"clip_l", "clip_g"}
_kept: OrderedDict[tuple, Vectors] = OrderedDict()
_lock = threading.Lock()


class EmbeddingError(ValueError):
    """An embedding file that cannot be used; the message names the file."""


def read(path: Path) -> Vectors:
    """The vectors of an embedding file, [n, width] float32 (SDXL's: {"clip_l": ..., "clip_g": ...}), refused with
    EmbeddingError when not usable."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise EmbeddingError(f"embedding {path.name}: {size / 2**20:.1f} MB is more than the "
                             f"{MAX_FILE_BYTES >> 20} MB allowed")
    try:
        if path.suffix.lower() == ".safetensors":
            data = load_file(path, device="cpu")
        else:
            _check_zip(path)
            with torch.serialization.safe_globals(SAFE_GLOBALS):
                data = torch.load(path, map_location="cpu", weights_only=True)
    except EmbeddingError:
        raise
    except Exception as error:  # noqa: BLE001 - any failure to read a user's file is that file's: one message
        raise EmbeddingError(f"embedding {path.name} cannot be read safely: {_reason(error)}") from None
    return _vectors(data, path.name)


def _reason(error: Exception) -> str:
    """One line: what the weights-only loader refused to import, else the error's first line."""
    text = str(error)
    named = re.search(r"GLOBAL ([\w.]+)", text)
    if named:
        return f"it names {named.group(1)}, which is not a tensor: refused without running it"
    return text.strip().splitlines()[0][:160] if text.strip() else type(error).__name__


def _check_zip(path: Path) -> None:
    """torch.save's zip format, stored uncompressed and no larger unpacked than the file limit."""
    if not zipfile.is_zipfile(path):
        raise EmbeddingError(f"embedding {path.name} is not in torch.save's zip format (PyTorch 1.6 and later)")
    with zipfile.ZipFile(path) as archive:
        entries = archive.infolist()
    if any(entry.compress_type != zipfile.ZIP_STORED for entry in entries) \
            or sum(entry.file_size for entry in entries) > MAX_FILE_BYTES:
        raise EmbeddingError(f"embedding {path.name} is a compressed or oversized archive, not a torch.save file")


def _vectors(data, filename: str) -> Vectors:
    """create_embedding_from_data's layouts: the one term's vectors, [n, width] float32."""
    if not isinstance(data, dict) or not data:
        raise EmbeddingError(f"embedding {filename} is not a dict of tensors (A1111's string_to_param or {{token: "
                             "vectors}})")
    if "string_to_param" in data:
        terms = data["string_to_param"]
        if isinstance(terms, torch.nn.ParameterDict):  # original textual inversion's files, as A1111 reads them
            terms = terms._parameters
        if not isinstance(terms, dict) or len(terms) != 1:
            raise EmbeddingError(f"embedding {filename} must have one term in string_to_param, has "
                                 f"{len(terms) if isinstance(terms, dict) else type(terms).__name__}")
        vectors = next(iter(terms.values()))
        ndims = (2,)
    elif "clip_g" in data and "clip_l" in data:  # SDXL's pair: each [n, width], one n (A1111 counts clip_g's)
        pair = {key: _checked(data[key], f"{filename}'s {key}", (2,)) for key in ("clip_l", "clip_g")}
        if pair["clip_l"].shape[0] != pair["clip_g"].shape[0]:
            raise EmbeddingError(f"embedding {filename} has {pair['clip_l'].shape[0]} clip_l vectors and "
                                 f"{pair['clip_g'].shape[0]} clip_g vectors: they must be as many")
        return pair
    elif len(data) == 1 and isinstance(next(iter(data.values())), torch.Tensor):
        vectors, ndims = next(iter(data.values())), (1, 2)
    else:
        raise EmbeddingError(f"embedding {filename} is neither A1111's (string_to_param) nor diffusers' ({{token: "
                             f"vectors}}, one term): it holds {', '.join(map(str, list(data)[:4]))[:100]}")
    return _checked(vectors, filename, ndims)


def _checked(vectors, filename: str, ndims: tuple) -> torch.Tensor:
    """One term's vectors, [n, width] float32, within the limits."""
    if not isinstance(vectors, torch.Tensor) or vectors.dim() not in ndims or not vectors.is_floating_point():
        raise EmbeddingError(f"embedding {filename}'s vectors must be a float tensor [n, width], got "
                             f"{tuple(vectors.shape) if isinstance(vectors, torch.Tensor) else type(vectors).__name__}")
    vectors = vectors.reshape(1, -1) if vectors.dim() == 1 else vectors
    if not 1 <= vectors.shape[0] <= MAX_VECTORS or not 1 <= vectors.shape[1] <= MAX_WIDTH:
        raise EmbeddingError(f"embedding {filename} has {vectors.shape[0]} vectors of width {vectors.shape[1]}: "
                             f"1 to {MAX_VECTORS} vectors are allowed")
    return vectors.detach().to(torch.float32).contiguous().clone()


def load(path: Path, width: int | tuple[int, int]) -> Vectors:
    """`read`, checked against the text encoder's width (A1111's expected_shape; SDXL's: the pair of widths), kept
    by file and version."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _lock:
        vectors = _kept.get(key)
        if vectors is not None:
            _kept.move_to_end(key)
    if vectors is None:
        vectors = read(path)
        with _lock:
            _kept[key] = vectors
            while len(_kept) > KEPT:
                _kept.popitem(last=False)
    _check_width(vectors, width, path.name)
    return vectors


def _check_width(vectors: Vectors, width: int | tuple[int, int], filename: str) -> None:
    """One encoder's width (SD 1.x / 2.x) or SDXL's pair (clip_l, clip_g): the file's must be the model's."""
    if isinstance(vectors, dict) and not isinstance(width, tuple):
        widths = vectors["clip_l"].shape[1], vectors["clip_g"].shape[1]
        raise EmbeddingError(f"embedding {filename} is an SDXL embedding (clip_l and clip_g, {widths[0]} + {widths[1]} "
                             "wide): it needs an SDXL model")
    if isinstance(width, tuple) and not isinstance(vectors, dict):
        raise EmbeddingError(f"embedding {filename} is one text encoder's ({vectors.shape[1]} wide, SD 1.x / 2.x): "
                             "SDXL's embeddings have clip_l and clip_g vectors (A1111 would skip it and read its "
                             "name as words)")
    if isinstance(width, tuple) and (vectors["clip_l"].shape[1], vectors["clip_g"].shape[1]) != width:
        widths = vectors["clip_l"].shape[1], vectors["clip_g"].shape[1]
        raise EmbeddingError(f"embedding {filename} is {widths[0]} + {widths[1]} wide (clip_l + clip_g), but this "
                             f"model's text encoders are {width[0]} + {width[1]} wide: it was made for another model")
    if not isinstance(width, tuple) and vectors.shape[1] != width:
        raise EmbeddingError(f"embedding {filename} is {vectors.shape[1]} wide, but this model's text encoder is "
                             f"{width} wide: it was made for another model")


def listed(root: Path | None = None) -> dict[str, Path]:
    """The embeddings of the models folder, name -> file (the first of a name; empty files are left out, as
    A1111's load_from_dir leaves them out)."""
    found = {}
    for name, paths in library.files("embedding", root).items():
        usable = [path for path in paths if _size(path) > 0]
        if usable:
            found[name] = usable[0]
    return found


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # a link to nothing
        return 0


def for_prompts(tokenizer, text_encoder, texts: dict[str, str], emphasis: str = "Original",
                root: Path | None = None, text_encoder_2=None) -> dict[str, Vectors]:
    """The vectors of every embedding the texts use ({field: text}, e.g. prompt and negative_prompt), by name;
    with SDXL's `text_encoder_2`, each a {"clip_l", "clip_g"} pair (names found with CLIP-L's tokenizer, as A1111's
    GeneralConditioner.tokenize finds them).

    Only the files a text names are read; a file that cannot be used raises FieldError naming the field.
    """
    files = listed(root)
    if not files:
        return {}
    names = prompts.lookup(tokenizer, files)
    width = prompts.token_embedding(text_encoder).embedding_dim
    if text_encoder_2 is not None:
        width = (width, prompts.token_embedding(text_encoder_2).embedding_dim)
    found: dict[str, Vectors] = {}
    for field, text in texts.items():
        for name in prompts.names_used(tokenizer, text or "", names, emphasis):
            if name not in found:
                try:
                    found[name] = load(files[name], width)
                except (EmbeddingError, OSError) as error:
                    raise FieldError(field, f"uses the embedding {name!r}: {error}") from None
    return found


def ti_hashes(recipe_prompt: str, negative: str, tokenizer, *, emphasis: str = "Original",
              root: Path | None = None) -> str:
    """A1111's "TI hashes" of an A1111-syntax recipe: "name: hash, ..." for the embeddings the prompt (its
    <lora:...> tags taken out) uses, then those the negative prompt uses ("" when none)."""
    files = listed(root)
    if not files:
        return ""
    names = prompts.lookup(tokenizer, files)
    used = prompts.names_used(tokenizer, lora_names.extract(recipe_prompt)[0], names, emphasis)
    used_negative = prompts.names_used(tokenizer, negative or "", names, emphasis)
    return ", ".join(f"{name.replace(':', '').replace(',', '')}: {library.short_hash('embedding', files[name])}"
                     for name in used + used_negative)


def missing_notes(ti_hashes: str) -> list[str]:
    """Notes on the embeddings a recipe's TI hashes name that the models folder lacks or holds in another version."""
    try:
        wanted = lora_names.parse_hashes(ti_hashes, "ti_hashes") if ti_hashes else {}
    except ValueError:
        return []  # the recipe's own check names it
    files, notes = listed() if wanted else {}, []
    for name, hash_ in wanted.items():
        if name not in files:
            notes.append(f"embedding {name} (hash {hash_}) is not in the models folder: its name is read as words, "
                         "so the image differs")
        elif not library.short_hash("embedding", files[name]).startswith(hash_[:12]):
            notes.append(f"embedding {name}'s file here has hash {library.short_hash('embedding', files[name])}, the "
                         f"image was made with {hash_}: another version of it, so the image may differ")
    return notes


def with_ti_hashes(model, recipe, memo: dict | None = None):
    """An A1111-syntax recipe with the hashes of the textual-inversion embeddings its prompts use (A1111's TI
    hashes)."""
    if recipe.prompt_syntax != "a1111" or not model.info.a1111_prompts:
        return recipe
    memo = {} if memo is None else memo
    key = ("ti", recipe.prompt, recipe.negative_prompt, recipe.emphasis)
    if key not in memo:
        memo[key] = ti_hashes(recipe.prompt, recipe.negative_prompt, model.pipeline.tokenizer,
                              emphasis=recipe.emphasis)
    return recipe.replace(ti_hashes=memo[key]) if memo[key] != recipe.ti_hashes else recipe
