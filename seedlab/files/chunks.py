"""The text an image file carries, found without decoding its pixels: PNG text chunks, EXIF, stealth info.

Files are untrusted: a file is read up to MAX_FILE_BYTES, a PNG's chunks are walked by hand (its eXIf chunk,
PNG's EXIF, is read as a JPEG's where no text chunk holds a recipe), JPEG and WebP give their EXIF without
decoding, compressed text is inflated up to a ceiling, and every failure
is a one-line ValueError naming what was found. What the texts mean is metadata.py's business.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path
from typing import IO, Any

from PIL import Image

from . import drawthings, formats, imaginairy, mochi

MAX_FILE_BYTES = 64 * 2**20  # an upload is at most a few MB; a file larger than this is not read
MAX_INFLATED = formats.MAX_JSON * 4  # bytes of compressed text chunks once inflated, all of a file's together
_PNG = b"\x89PNG\r\n\x1a\n"
_RECIPE_CHUNKS = {"seedlab", "parameters", "prompt", "workflow", "invokeai_metadata", "sd-metadata", "Dream", "Comment",
                  imaginairy.CHUNK}


class UnreadableImage(ValueError):
    """The file cannot be read as an image at all (missing, not PNG/JPEG/WebP, truncated, too large).

    Other ValueErrors from reading mean the file was read but its recipe is missing or refused.
    """


def read_bytes(path_or_file: str | Path | IO[bytes]) -> bytes:
    """The file's bytes, at most MAX_FILE_BYTES; UnreadableImage without the path when it cannot be read."""
    try:
        if hasattr(path_or_file, "read"):
            path_or_file.seek(0)
            data = path_or_file.read(MAX_FILE_BYTES + 1)
        else:
            with open(path_or_file, "rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:  # the message would show the path: say only what happened
        raise UnreadableImage(f"file cannot be opened ({error.strerror or type(error).__name__})") from None
    if len(data) > MAX_FILE_BYTES:
        raise UnreadableImage(f"file is larger than {MAX_FILE_BYTES // 2**20} MB")
    return data


def image_kind(data: bytes) -> str:
    """PNG, JPEG or WEBP from the first bytes; UnreadableImage otherwise."""
    if data.startswith(_PNG):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    if not data:
        raise UnreadableImage("file is empty")
    raise UnreadableImage("file is not a PNG, JPEG or WebP image")


def pixel_size(data: bytes, kind: str) -> tuple[int, int] | None:
    """The image's width and height from its header (PNG's IHDR; Pillow's lazy open else), no pixel decoded."""
    if kind == "PNG":
        return struct.unpack(">II", data[16:24]) if data[12:16] == b"IHDR" and len(data) >= 24 else None
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except Exception:  # noqa: BLE001 - a header Pillow cannot read: no size, the chunks are still read
        return None


def stealth_chunks(signature: str, text: str) -> dict[str, str]:
    """Stealth info as text chunks: A1111's text is `parameters`; NovelAI's JSON holds its chunks by name."""
    chunks: dict[str, str] = {}
    stripped = text.strip("\0 \n")
    if stripped.startswith("{"):
        data = formats.loads(stripped, signature)
        if isinstance(data, dict) and isinstance(data.get("Comment"), dict):  # some writers nest it as an object
            stripped = json.dumps({**data, "Comment": json.dumps(data["Comment"])})
    _sort_comment(stripped, chunks)
    return chunks


def stealth_name(name: str, signature: str) -> str:
    """"A1111" -> "A1111 (stealth_pnginfo)", "A1111 (Forge)" -> "A1111 (Forge, stealth_pnginfo)"."""
    return f"{name[:-1]}, {signature})" if name.endswith(")") else f"{name} ({signature})"


def png_chunks(data: bytes) -> dict[str, str]:
    """The text chunks (tEXt, zTXt, iTXt) anywhere in a PNG, by walking its chunks: no pixel is decoded."""
    chunks: dict[str, str] = {}
    inflated = [0]  # bytes inflated so far: all of a file's compressed chunks share one ceiling
    exif = None
    position = len(_PNG)
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if len(body) < length or kind == b"IEND":
            break
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            key, _, rest = body.partition(b"\0")
            name = key.decode("latin-1")[:80]
            if name not in chunks:  # the first of a name wins, as in Pillow
                chunks[name] = _text_chunk(kind, rest, name, inflated)
        elif kind == b"eXIf" and exif is None and length <= formats.MAX_JSON:
            exif = body
    if not chunks and position == len(_PNG):
        raise UnreadableImage("file is not a readable PNG (no chunks)")
    values = _png_exif(exif) if exif is not None else dict.fromkeys((0x010E, 0x010F, 0x0110, 0x0131, 0x9286))
    if exif is not None and not set(chunks) & _RECIPE_CHUNKS:
        _sort_exif(values, chunks)  # imaginAIry's PNGs: their recipe is in EXIF only
    _mochi_caption(chunks, None, values[0x010E] or chunks.get("Description"), chunks.get(drawthings.XMP_CHUNK))
    xmp_comment(chunks)
    return chunks


def _png_exif(body: bytes) -> dict[int, Any]:
    """The tags of a PNG eXIf chunk (a TIFF header and its IFDs, as in a JPEG's APP1); none if it is unreadable."""
    exif = Image.Exif()
    try:
        exif.load(body)
        return _exif_values(exif)
    except (OSError, SyntaxError, ValueError, struct.error, KeyError):
        return dict.fromkeys((0x010E, 0x010F, 0x0110, 0x0131, 0x9286))


def _text_chunk(kind: bytes, body: bytes, name: str, inflated: list[int]) -> str:
    if kind == b"zTXt":
        body = _inflate(body[1:], name, inflated)
    elif kind == b"iTXt":
        compressed = body[:1] == b"\1"
        body = body[2:].split(b"\0", 2)[-1]  # past the language tag and the translated keyword
        if compressed:
            body = _inflate(body, name, inflated)
    try:
        return body.decode("utf-8")  # many tools write UTF-8 even in tEXt, which is meant to be Latin-1
    except UnicodeDecodeError:
        return body.decode("latin-1")


def _inflate(body: bytes, name: str, inflated: list[int]) -> bytes:
    """zlib with a ceiling per file: compressed text cannot blow up past the largest text read, in all."""
    ceiling = MAX_INFLATED - inflated[0]
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, ceiling + 1)
    except zlib.error:
        raise ValueError(f"the {name} chunk is compressed and cannot be read") from None
    if inflater.unconsumed_tail or len(out) > ceiling:
        raise ValueError(f"the file's compressed text chunks, up to the {name} chunk, are larger than "
                         f"{MAX_INFLATED // 2**20} MB once uncompressed")
    inflated[0] += len(out)
    return out


def exif_chunks(data: bytes) -> dict[str, str]:
    """JPEG and WebP: the EXIF UserComment (A1111, Forge, Civitai, SwarmUI, imaginAIry) and the IFD0 tags that
    ComfyUI's savers and imaginAIry write."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            values = _exif_values(image.getexif())
            comment = image.info.get("comment")
            xmp = image.info.get("xmp")  # Draw Things' JPEGs: its XMP packet, as in its PNGs
            photoshop = image.info.get("photoshop")  # a JPEG's APP13: Mochi Diffusion's IPTC caption
    except (OSError, SyntaxError, ValueError, struct.error, Image.DecompressionBombError):
        raise UnreadableImage("file is not a readable JPEG or WebP image") from None
    chunks = _sort_exif(values, {})
    _mochi_caption(chunks, photoshop, values[0x010E], xmp)
    if values[0x9286] is None and isinstance(comment, bytes) and b"Steps: " in comment:  # a JPEG comment: A1111's
        _sort_comment(comment.decode("utf-8", "replace").strip("\0 \n"), chunks)
    if isinstance(xmp, (bytes, str)) and not chunks:
        chunks[drawthings.XMP_CHUNK] = xmp.decode("utf-8", "replace") if isinstance(xmp, bytes) else xmp
        xmp_comment(chunks)
    return chunks


def _mochi_caption(chunks: dict[str, str], photoshop: Any, description: Any, xmp: Any) -> None:
    """Mochi Diffusion's caption (its IPTC Caption/Abstract, which ImageIO mirrors into EXIF and XMP) as a chunk."""
    found = mochi.caption(photoshop, description, xmp)
    if found is not None:
        chunks[mochi.CHUNK] = found


def _exif_values(exif: Image.Exif) -> dict[int, Any]:
    """The tags read: UserComment (of the Exif sub-IFD, or of IFD0 where imaginAIry and Fooocus put it),
    ImageDescription, Make, Model, Software."""
    values: dict[int, Any] = {tag: exif.get(tag) for tag in (0x010E, 0x010F, 0x0110, 0x0131)}
    try:
        values[0x9286] = exif.get_ifd(0x8769).get(0x9286, exif.get(0x9286))
    except (OSError, SyntaxError, ValueError, struct.error, KeyError):
        values[0x9286] = exif.get(0x9286)
    return values


def _sort_exif(values: dict[int, Any], chunks: dict[str, str]) -> dict[str, str]:
    """The UserComment sorted (_sort_comment); ComfyUI savers' "Prompt: {...}" / "Workflow: {...}" in
    ImageDescription, Make or Model; imaginAIry's Software and ImageDescription (its summary of the recipe)."""
    for tag in (0x010E, 0x010F, 0x0110):  # ComfyUI savers: "Prompt: {...}", "Workflow: {...}"
        value = values[tag]
        if isinstance(value, str) and value[:9].lower().startswith(("prompt:", "workflow:")):
            name, _, text = value.partition(":")
            chunks[name.strip().lower()] = text.strip()
    software = values[0x0131] if isinstance(values[0x0131], str) else ""
    text = user_comment_text(values[0x9286]) if values[0x9286] is not None else None
    if text:
        _sort_comment(text.strip("\0 \n"), chunks, software)
    if imaginairy.CHUNK in chunks or imaginairy.is_software(software):
        chunks["Software"] = software[:200]
        if isinstance(values[0x010E], str):
            chunks[imaginairy.DESCRIPTION] = values[0x010E]
    return chunks


def xmp_comment(chunks: dict[str, str]) -> None:
    """An XMP packet's exif:UserComment, where no other chunk holds a recipe, sorted as an EXIF UserComment is
    (Draw Things' JSON; A1111 text that photo editors copy there); the packet itself stays for its description."""
    if drawthings.XMP_CHUNK not in chunks or set(chunks) & _RECIPE_CHUNKS:
        return
    comment = drawthings.xmp_texts(chunks[drawthings.XMP_CHUNK]).get("UserComment", "").strip("\0 \n")
    if comment:
        _sort_comment(comment, chunks)


def user_comment_text(value: bytes | str) -> str:
    """EXIF UserComment: an 8-byte charset prefix (UNICODE as UTF-16 in either byte order, ASCII, none)."""
    if isinstance(value, str):
        return value
    prefix, body = value[:8], value[8:]
    if prefix == b"UNICODE\0":
        if body[:2] in (b"\xfe\xff", b"\xff\xfe"):
            return body.decode("utf-16", "replace")
        # ASCII-heavy text: the zero bytes sit at even offsets in big-endian UTF-16, at odd ones in little-endian
        big = body[0::2].count(0) > body[1::2].count(0)
        return body.decode("utf-16-be" if big else "utf-16-le", "replace")
    if prefix in (b"ASCII\0\0\0", b"\0" * 8):
        return body.decode("utf-8", "replace")
    return value.decode("utf-8", "replace")


def _sort_comment(text: str, chunks: dict[str, str], software: str = "") -> None:
    """A UserComment holds A1111 text, a ComfyUI graph, {"prompt": graph, ...}, imaginAIry's {"prompt": recipe},
    or NovelAI's chunks as JSON."""
    if not text.startswith("{"):
        chunks.setdefault("parameters", text)
        return
    data = formats.loads(text, "UserComment")
    if isinstance(data, dict) and imaginairy.is_imaginairy(data.get("prompt"), software):
        chunks.setdefault(imaginairy.CHUNK, json.dumps(data["prompt"]))
    elif isinstance(data, dict) and isinstance(data.get("prompt"), dict):
        chunks.setdefault("prompt", json.dumps(data["prompt"]))
    elif isinstance(data, dict) and isinstance(data.get("Comment"), str):
        chunks.update({key: value for key, value in data.items() if isinstance(value, str)})
    elif isinstance(data, dict) and any(isinstance(node, dict) and "class_type" in node for node in data.values()):
        chunks.setdefault("prompt", text)
    else:
        chunks.setdefault("parameters", text)
