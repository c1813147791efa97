"""A safetensors file from the models folder, opened only after the checks that cost nothing (LoRA, VAE).

The file's size, its header's length (the first 8 bytes) and its tensor count are bounded before any tensor
is read; whatever goes wrong while reading becomes one ValueError naming the file, for the field's message.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from safetensors import SafetensorError, safe_open

MAX_HEADER_BYTES = 16 << 20


@contextmanager
def checked(path: Path, what: str, max_bytes: int, max_tensors: int) -> Iterator[tuple[object, list[str]]]:
    """(the open file, its tensor names) for `what` ("LoRA", "vae") at `path`; ValueError when the file is too
    large, not a safetensors file, holds too many tensors or cannot be read."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{what} {path.name}: {size / 2**20:.0f} MB is more than the {max_bytes >> 20} MB allowed")
    with open(path, "rb") as file:
        prefix = file.read(8)
    if len(prefix) < 8 or struct.unpack("<Q", prefix)[0] > min(MAX_HEADER_BYTES, size - 8):
        raise ValueError(f"{what} {path.name} is not a safetensors file")
    try:
        with safe_open(str(path), framework="pt") as tensors:
            keys = list(tensors.keys())
            if len(keys) > max_tensors:
                raise ValueError(f"{what} {path.name} has {len(keys)} tensors, more than the {max_tensors} allowed")
            yield tensors, keys
    except (OSError, RuntimeError, SafetensorError, struct.error, json.JSONDecodeError) as error:
        raise ValueError(f"{what} {path.name} cannot be read: {str(error)[:120]}") from None
