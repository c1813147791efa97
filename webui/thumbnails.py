"""An entry's thumbnail: its first image, at most 64 px a side, as a PNG data URL kept in the entry.

The history lives in the visitor's browser, so a thumbnail read back is hostile input: `checked` admits only a
short PNG data URL that decodes to a small image, and drops anything else (the entry stays, without a picture).
The page's gallery shows thumbnails as files: each is written once, named by its content, into a bounded folder.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import io
from pathlib import Path

from PIL import Image

from webui.files import PngStore

SIDE = 64  # a thumbnail's largest side, in pixels
PREFIX = "data:image/png;base64,"
MAX_CHARS = 12_000  # a thumbnail's data URL: a 64x64 PNG of 256 colours always fits (about 7,000)
MAX_FILES, MAX_BYTES = 4096, 32 * 2**20  # the gallery's thumbnail files, in a folder of their own


def made(path: str | Path | None) -> str | None:
    """The thumbnail of the PNG at `path` (this server's own), or None if it is gone or unreadable."""
    if path is None:
        return None
    try:
        with Image.open(path) as image:
            image = image.convert("RGB")
    except OSError:
        return None
    image.thumbnail((SIDE, SIDE))  # keeps the aspect; never enlarges
    url = data_url(image)
    if len(url) > MAX_CHARS:  # a busy image: 256 colours make it small enough
        url = data_url(image.quantize(256))
    return url if len(url) <= MAX_CHARS else None


def data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return PREFIX + base64.b64encode(buffer.getvalue()).decode("ascii")


@functools.lru_cache(maxsize=512)  # every history handler reads the whole stored history back: check each once
def _decodes(url: str) -> bool:
    try:
        data = base64.b64decode(url[len(PREFIX):], validate=True)
        with Image.open(io.BytesIO(data), formats=["PNG"]) as image:
            if image.width > SIDE or image.height > SIDE:  # the header's size, before any pixel is decoded
                return False
            image.load()
    except (binascii.Error, ValueError, OSError, Image.DecompressionBombError):
        return False
    return True


def checked(value) -> str | None:
    """An untrusted thumbnail if it is a PNG data URL of at most MAX_CHARS that decodes to at most SIDE x SIDE
    pixels; None otherwise."""
    if not isinstance(value, str) or not value.startswith(PREFIX) or len(value) > MAX_CHARS:
        return None
    return value if _decodes(value) else None


def thumbnail_file(url: str, store: PngStore) -> str:
    """The checked thumbnail `url` as a PNG file in `store`'s folder, written the first time it is shown."""
    path = store.folder / f"thumbnail-{hashlib.sha256(url.encode('ascii')).hexdigest()[:24]}.png"
    if not path.exists():  # a new thumbnail, or one the bounded folder pruned: written again from the entry
        path.write_bytes(base64.b64decode(url[len(PREFIX):]))
        store.added(path)
    return str(path)


def thumbnail_store(folder: Path) -> PngStore:
    """The bounded folder of the gallery's thumbnail files (its own, so they never push anyone's images out)."""
    folder.mkdir(parents=True, exist_ok=True)
    return PngStore(folder, max_files=MAX_FILES, max_bytes=MAX_BYTES)
