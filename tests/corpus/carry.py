"""Rebuild a corpus file: a tiny image that re-carries another image's metadata byte for byte.

    python tests/corpus/carry.py ORIGINAL OUT

PNG: every tEXt, zTXt and iTXt chunk of ORIGINAL, and its eXIf chunk (PNG's EXIF, where imaginAIry writes),
is copied unchanged (type, data and CRC) around a new 1x1 IHDR/IDAT.
JPEG and WebP: the EXIF payload is handed to Pillow unchanged (it writes it as
the APP1 segment or the EXIF chunk), and so is a JPEG comment. The pixels are ours; the metadata is
the original tool's.
"""

import io
import struct
import sys
import zlib

from PIL import Image

PNG = b"\x89PNG\r\n\x1a\n"


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def carry_png(data: bytes) -> bytes:
    texts, position = [], len(PNG)
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        if kind in (b"tEXt", b"zTXt", b"iTXt", b"eXIf"):
            texts.append(data[position:position + 12 + length])  # length, type, data, CRC as they are
        position += 12 + length
        if kind == b"IEND":
            break
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    pixels = chunk(b"IDAT", zlib.compress(b"\x00\x80\x80\x80"))
    return PNG + header + b"".join(texts) + pixels + chunk(b"IEND", b"")


def carry_other(data: bytes) -> bytes:
    with Image.open(io.BytesIO(data)) as image:
        kind, exif, comment = image.format, image.info.get("exif"), image.info.get("comment")
    out = io.BytesIO()
    options = {"exif": exif} if exif else {}
    if comment:
        options["comment"] = comment
    Image.new("RGB", (8, 8), (128, 128, 128)).save(out, format=kind, **options)
    return out.getvalue()


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as file:
        original = file.read()
    carried = carry_png(original) if original.startswith(PNG) else carry_other(original)
    with open(sys.argv[2], "wb") as file:
        file.write(carried)
