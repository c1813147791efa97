"""The user's models folder: LoRA, embedding, checkpoint and VAE files found by name or by hash, never by a path.

`--models-dir` (or `SEEDLAB_MODELS_DIR`) names a folder laid out as A1111's `models/` (`Lora/`,
`LyCORIS/`) or ComfyUI's `models/` (`loras/`). A recipe, a link or a PNG names a LoRA by its name (the
file's stem, as A1111's `<lora:NAME:W>` does) and may give its hash; both are only ever compared with
the files listed under that folder, so no text from outside reaches the file system.

Textual inversion embeddings live in `embeddings/` inside that folder (ComfyUI's `models/embeddings`) or
beside it (A1111's `embeddings/` next to `models/`: `../embeddings`, taken only when it really is a folder
called "embeddings" in the models folder's parent); their name is the file's stem, as in A1111's
EmbeddingDatabase.load_from_file. Their hash is the first 12 hex digits of the whole file's SHA-256
(A1111's `Embedding.shorthash`, written as "TI hashes").

Hashes are A1111's: a LoRA's "Lora hashes" value is the first 12 hex digits of the SHA-256 of the
safetensors file after its header (`modules/hashes.py`, addnet_hash_safetensors), or of the hash its
metadata gives (`sshs_model_hash`, extensions-builtin/Lora/network.py); a checkpoint's AutoV2
is the first 10 of the whole file's SHA-256, and so is a VAE's "VAE hash" (modules/sd_vae.py,
get_loaded_vae_hash). VAEs live in A1111's `VAE/` or ComfyUI's `vae/` only (never the folder itself).
Hashes are computed once per file and kept in a cache file
SeedLab owns (`~/.cache/seedlab/hashes.json`, or `$SEEDLAB_CACHE_DIR`), keyed by path, size and time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

ENV = "SEEDLAB_MODELS_DIR"
# The sub-folders each kind lives in, in A1111's and ComfyUI's layouts (the folder itself also counts).
FOLDERS = {"lora": ("Lora", "LyCORIS", "loras", "lora"), "embedding": ("embeddings",),
           "checkpoint": ("Stable-diffusion", "checkpoints"), "vae": ("VAE", "vae")}
LABELS = {"lora": "LoRA", "embedding": "embedding", "checkpoint": "checkpoint", "vae": "VAE"}
# LoRA: .pt / .ckpt would need unpickling, never; embeddings' .pt / .bin are read with torch's weights-only loader
SUFFIXES = {"lora": (".safetensors",), "embedding": (".safetensors", ".pt", ".bin"),
            # a .ckpt checkpoint, a .pt / .ckpt VAE: listed only to be refused by name (checkpoint_files, vae_names)
            "checkpoint": (".safetensors", ".ckpt"), "vae": (".safetensors", ".pt", ".ckpt")}
BESIDE = {"embedding": "embeddings"}  # a kind's folder next to the models folder (A1111's webui/embeddings)
OWN_FOLDERS_ONLY = ("vae",)  # never looked for in the models folder itself (its checkpoints are no VAEs)
MAX_FILES = 20_000  # a folder walk stops here: a models folder, not a disk
_configured: Path | None = None


def configure(path: str | os.PathLike | None) -> None:
    """Use `path` as the models folder for this process (the CLI's and the app's --models-dir)."""
    global _configured
    _configured = Path(path).expanduser() if path else None
    if _configured is not None:
        os.environ[ENV] = str(_configured)  # worker processes (the app's --workers, sweeps) read it too


def models_dir() -> Path | None:
    """The models folder: --models-dir, else $SEEDLAB_MODELS_DIR, else none."""
    if _configured is not None:
        return _configured
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else None


@dataclass(frozen=True)
class Found:
    """A file of the models folder: its name (stem), path and A1111 hash."""

    name: str
    path: Path
    hash: str


class NotFound(LookupError):
    """A named file is not in the models folder (the message names it, its hash and the folder)."""


def files(kind: str, root: Path | None = None) -> dict[str, list[Path]]:
    """The files of `kind` under the models folder, by name (stem), in a stable order."""
    root = root or models_dir()
    found: dict[str, list[Path]] = {}
    if root is None or not root.is_dir():
        return found
    count = 0
    for folder, real_root in _folders(kind, root):
        for directory, subdirectories, names in os.walk(folder):
            subdirectories.sort()
            for name in sorted(names):
                path = Path(directory) / name
                if path.suffix.lower() not in SUFFIXES[kind]:
                    continue
                count += 1
                if count > MAX_FILES:
                    return found
                if not path.resolve().is_relative_to(real_root):  # a link out of the folder
                    continue
                found.setdefault(path.stem, []).append(path)
    return found


def folders(kind: str, root: Path | None = None) -> list[Path]:
    """The folders `kind` is looked for in, as `files` walks them (none without a models folder)."""
    root = root or models_dir()
    return [] if root is None or not root.is_dir() else [folder for folder, _ in _folders(kind, root)]


def _folders(kind: str, root: Path) -> list[tuple[Path, Path]]:
    """(folder, the real folder its files must stay in) for each folder of `kind`; LoRAs fall back to the root."""
    real_root = root.resolve()
    folders: list[tuple[Path, Path]] = []
    for sub in FOLDERS[kind]:  # "VAE" and "vae" are one folder on a case-insensitive disk: listed once
        if (root / sub).is_dir() and all((root / sub).resolve() != folder.resolve() for folder, _ in folders):
            folders.append((root / sub, real_root))
    if kind in BESIDE:
        beside = (root / os.pardir / BESIDE[kind]).resolve()
        if beside.is_dir() and beside.name == BESIDE[kind] and beside.is_relative_to(real_root.parent) \
                and beside != real_root and all(beside != folder.resolve() for folder, _ in folders):
            folders.append((beside, beside))
        return folders
    return folders or ([] if kind in OWN_FOLDERS_ONLY else [(root, real_root)])


def find(kind: str, name: str, hash_: str = "") -> Found:
    """The file of `kind` called `name`, or the one whose hash is `hash_` (the hash wins, as in A1111's paste).

    Raises NotFound naming the file, its hash and where it was looked for.
    """
    root = models_dir()
    listed = files(kind, root)
    hash_ = hash_.strip().lower()

    def matches(path: Path) -> bool:
        try:
            mine = short_hash(kind, path)
        except (OSError, ValueError):  # a malformed file is no match: it must not fail the lookup of any other
            return False
        return mine.startswith(hash_) or hash_.startswith(mine)

    if hash_:  # the file of that name first, then any other
        same_name = listed.get(name, [])
        others = [(stem, path) for stem, paths in listed.items() for path in paths if path not in same_name]
        for stem, path in [(name, path) for path in same_name] + others:
            if matches(path):
                return Found(stem, path, short_hash(kind, path))
    paths = listed.get(name) or [paths[0] for stem, paths in listed.items() if stem.lower() == name.lower()]
    if paths:
        return Found(name, paths[0], short_hash(kind, paths[0]))
    raise not_found(kind, name, hash_)


def not_found(kind: str, name: str, hash_: str = "") -> NotFound:
    """The NotFound for a file of `kind` named `name` (and `hash_`), saying where it was looked for."""
    root = models_dir()
    # Where on the server's disk the folder is stays the host's business: a visitor sees "the models folder".
    where = " in the models folder" if root is not None else f": no models folder is set (--models-dir or {ENV})"
    what = (f"{name!r}" + (f" (hash {hash_})" if hash_ else "")) if name else f"with hash {hash_}"
    return NotFound(f"{LABELS[kind]} {what} is not found{where}")


def short_hash(kind: str, path: Path) -> str:
    """A1111's short hash: a LoRA's 12 hex digits over the tensors (addnet), an embedding's 12 over the whole
    file, a checkpoint's AutoV2 (10), a VAE's the same 10 (sd_vae.get_loaded_vae_hash)."""
    if kind == "lora":  # A1111's NetworkOnDisk: the hash the file's metadata gives (sshs_model_hash), else addnet
        return (_given_hash(path) or _HASHES.get(path, "addnet"))[:12]
    if kind == "embedding":  # textual_inversion.py: Embedding.set_hash(hashes.sha256(path, ...)), shorthash [0:12]
        return _HASHES.get(path, "sha256")[:12]
    return _HASHES.get(path, "sha256")[:10]


def _given_hash(path: Path) -> str:
    """The `sshs_model_hash` a safetensors header holds (written by the kohya tools), if any."""
    try:
        with open(path, "rb") as file:
            length = int.from_bytes(file.read(8), "little")
            if length > 16 << 20:
                return ""
            header = json.loads(file.read(length))
    except (OSError, ValueError):
        return ""
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    given = metadata.get("sshs_model_hash") if isinstance(metadata, dict) else None
    return given.strip().lower() if isinstance(given, str) and re.fullmatch(r"\s*[0-9a-fA-F]{12,64}\s*", given) else ""


def addnet_hash(path: Path) -> str:
    """SHA-256 of a safetensors file after its header: A1111's LoRA hash, the same for any metadata."""
    size = path.stat().st_size
    with open(path, "rb") as file:
        header = int.from_bytes(file.read(8), "little")
        if size < 8 or header > size - 8:
            raise ValueError(f"{path.name} is not a safetensors file")
        file.seek(8 + header)
        return _sha256(file)


def file_hash(path: Path) -> str:
    """SHA-256 of the whole file (a checkpoint's AutoV2 is its first 10 hex digits)."""
    with open(path, "rb") as file:
        return _sha256(file)


def autov1_hash(path: Path) -> str:
    """A1111's old checkpoint "Model hash" (AutoV1): SHA-256 of the 64 KiB at 1 MiB, first 8 hex digits."""
    with open(path, "rb") as file:
        file.seek(0x100000)
        return hashlib.sha256(file.read(0x10000)).hexdigest()[:8]


def _sha256(file) -> str:
    digest = hashlib.sha256()
    while chunk := file.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


class _HashCache:
    """Hashes by (path, size, mtime), kept in one JSON file SeedLab owns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, str] | None = None

    @staticmethod
    def location() -> Path:
        base = os.environ.get("SEEDLAB_CACHE_DIR", "").strip()
        return (Path(base).expanduser() if base else Path.home() / ".cache" / "seedlab") / "hashes.json"

    def get(self, path: Path, kind: str) -> str:
        stat = path.stat()
        key = f"{kind}:{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
        with self._lock:
            entries = self._load()
            if key not in entries:
                entries[key] = _HASH_FUNCTIONS[kind](path)
                self._save(entries)
            return entries[key]

    def _load(self) -> dict[str, str]:
        if self._entries is None:
            try:
                loaded = json.loads(self.location().read_text(encoding="utf-8"))
                self._entries = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._entries = {}
        return self._entries

    def _save(self, entries: dict[str, str]) -> None:
        location = self.location()
        try:
            location.parent.mkdir(parents=True, exist_ok=True)
            temporary = location.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(entries, indent=0, sort_keys=True), encoding="utf-8")
            temporary.replace(location)
        except OSError:
            pass  # a read-only home: the hashes are kept in memory only


_HASH_FUNCTIONS = {"addnet": addnet_hash, "sha256": file_hash}
_HASHES = _HashCache()
