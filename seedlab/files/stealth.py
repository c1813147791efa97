"""Stealth PNG info: text hidden in the lowest bit of a PNG's pixels (A1111's stealth-pnginfo extension, NovelAI).

The hidden stream is a signature, a 32-bit big-endian length in bits, then the payload (UTF-8 text, or
gzip for the *comp signatures). Each bit is the least significant bit of one channel value, most
significant bit of each byte first, pixels in column-major order (x outer, y inner):

    stealth_pnginfo / stealth_pngcomp   alpha channel, 1 bit per pixel
    stealth_rgbinfo / stealth_rgbcomp   R, G and B, 3 bits per pixel

It survives sites that strip a PNG's text chunks but keep its pixels. A1111 writes the `parameters`
text; NovelAI writes `stealth_pngcomp` with gzipped JSON of its text chunks (Comment, Description...).

Files are untrusted: the image's size is checked before its pixels are decoded, the stated length
must fit in the pixels, and gzip is inflated only up to MAX_PAYLOAD bytes.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib

import numpy as np
from PIL import Image

SIGNATURES = {  # signature -> (channels, compressed)
    "stealth_pnginfo": ("alpha", False),
    "stealth_pngcomp": ("alpha", True),
    "stealth_rgbinfo": ("rgb", False),
    "stealth_rgbcomp": ("rgb", True),
}
SIGNATURE_BITS = 15 * 8  # every signature has 15 characters
LENGTH_BITS = 32
MAX_PAYLOAD = 16_000_000  # bytes of text once inflated: as the text-chunk reader (formats.MAX_JSON * 4)


def read_stealth(data: bytes, max_pixels: int) -> tuple[str, str] | None:
    """(signature, text) hidden in a PNG's pixels; None when there is none. ValueError for a broken or hostile one."""
    if data[12:16] == b"IHDR":  # refuse a huge image before Pillow decodes it
        width, height = struct.unpack(">II", data[16:24])
        if width * height > max_pixels:
            raise ValueError(f"image is {width}x{height} pixels; stealth info is read from at most "
                             f"{max_pixels:,} pixels")
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.width * image.height > max_pixels:
                raise ValueError(f"image has more than {max_pixels:,} pixels; stealth info is not read")
            has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
            pixels = np.asarray(image.convert("RGBA" if has_alpha else "RGB"))
    except (OSError, SyntaxError, struct.error, Image.DecompressionBombError):
        raise ValueError("file has no text chunks, and its pixels cannot be read to look for stealth info "
                         "(truncated or corrupt image data)") from None
    streams = ([("alpha", pixels[:, :, 3:4])] if has_alpha else []) + [("rgb", pixels[:, :, :3])]
    for channels, values in streams:
        signature = _bytes(values, 0, SIGNATURE_BITS).decode("latin-1")
        if SIGNATURES.get(signature, (None,))[0] == channels:
            return signature, _payload(values, signature)
    return None


def _payload(values: np.ndarray, signature: str) -> str:
    """The text after `signature`: its length checked against the pixels before anything more is read."""
    available = values.size - SIGNATURE_BITS - LENGTH_BITS
    if available < 0:
        raise ValueError(f"{signature}: the image ends before the hidden length")
    (length,) = struct.unpack(">I", _bytes(values, SIGNATURE_BITS, LENGTH_BITS))
    if length % 8 or length > available:
        raise ValueError(f"{signature}: the stated length of {length:,} bits does not fit the image, which holds "
                         f"{max(available, 0):,} bits after the signature")
    body = _bytes(values, SIGNATURE_BITS + LENGTH_BITS, length)
    if SIGNATURES[signature][1]:
        body = _gunzip(body, signature)
    elif len(body) > MAX_PAYLOAD:
        raise ValueError(f"{signature}: the text is {len(body):,} bytes; at most {MAX_PAYLOAD:,} are read")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{signature}: the hidden text is not UTF-8") from None


def _bytes(values: np.ndarray, start: int, count: int) -> bytes:
    """`count` bits from bit `start` of the (height, width, channels) values' low bits, column-major, as bytes."""
    height, _, channels = values.shape
    per_column = height * channels
    first, last = start // per_column, (start + count + per_column - 1) // per_column
    columns = values[:, first:last].transpose(1, 0, 2).reshape(-1)  # only the columns that hold these bits
    offset = start - first * per_column
    return np.packbits(columns[offset:offset + count] & 1).tobytes()


def _gunzip(body: bytes, signature: str) -> bytes:
    """gzip with a ceiling: a few KB that inflate to gigabytes are refused after MAX_PAYLOAD bytes."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, MAX_PAYLOAD + 1)
    except zlib.error:
        raise ValueError(f"{signature}: the hidden data is not valid gzip") from None
    if len(out) > MAX_PAYLOAD or inflater.unconsumed_tail:
        raise ValueError(f"{signature}: the hidden text is larger than {MAX_PAYLOAD:,} bytes once uncompressed")
    if not inflater.eof:
        raise ValueError(f"{signature}: the hidden gzip data is truncated")
    return out


def embed(image: Image.Image, text: str, signature: str = "stealth_pnginfo") -> Image.Image:
    """A copy of `image` with `text` hidden under `signature` (alpha forms make it RGBA; its RGB is unchanged)."""
    if signature not in SIGNATURES:
        raise ValueError(f"signature must be one of {', '.join(SIGNATURES)}, got {signature!r:.40}")
    channels, compressed = SIGNATURES[signature]
    body = text.encode("utf-8")
    if compressed:
        body = gzip.compress(body, mtime=0)  # mtime 0: the same text gives the same pixels
    stream = signature.encode("latin-1") + struct.pack(">I", len(body) * 8) + body
    bits = np.unpackbits(np.frombuffer(stream, dtype=np.uint8))
    pixels = np.array(image.convert("RGBA" if channels == "alpha" else "RGB"))
    values = pixels[:, :, 3:4] if channels == "alpha" else pixels
    if bits.size > values.size:
        raise ValueError(f"{signature}: the text needs {bits.size:,} bits and a {image.width}x{image.height} "
                         f"image holds {values.size:,}")
    if channels == "alpha":
        values[:] = 255  # an opaque image: the hidden bits make alpha 254 or 255
    flat = values.transpose(1, 0, 2).reshape(-1).copy()  # column-major: x outer, y inner
    flat[:bits.size] = (flat[:bits.size] & 0xFE) | bits
    values[:] = flat.reshape(values.shape[1], values.shape[0], values.shape[2]).transpose(1, 0, 2)
    return Image.fromarray(pixels)

