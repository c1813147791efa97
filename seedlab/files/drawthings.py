"""Draw Things (iOS / macOS) metadata: the XMP packet it writes and the JSON and text in it, as recipe fields.

Draw Things hands Apple's ImageIO a description and a JSON comment; ImageIO writes them into an XMP packet
(a PNG's iTXt chunk `XML:com.adobe.xmp`, a JPEG's APP1 XMP segment) as dc:description and exif:UserComment,
each an rdf:Alt with one rdf:li:

    {"c": prompt, "uc": negative, "seed": 42, "steps": 20, "scale": 7.5, "size": "512x768",
     "sampler": "DPM++ 2M Karras", "model": "sd_v1.5_f16.ckpt", "strength": 1, "seed_mode": "Scale Alike",
     "lora": [{"file": ..., "weight": ...}], "v2": {... the whole configuration, camelCase ...}}

    prompt
    -negative
    Steps: 20, Sampler: DPM++ 2M Karras, Guidance Scale: 7.5, Seed: 42, Size: 512x768, Model: ..., Strength: 1.0

Draw Things reads back the JSON (its ImageConverter.configuration): so does SeedLab, and the description's
text where there is no JSON. The XMP is untrusted XML: a packet declaring a DOCTYPE or an ENTITY is refused
(no entity is ever expanded), and the two elements are found by a scan, not an XML parser.
"""

from __future__ import annotations

import re
from typing import Any

from .formats import MAX_JSON, check_text, loads, odd, put_number, put_size, sampler_scheduler

XMP_CHUNK = "XML:com.adobe.xmp"
# Draw Things' seed modes (SeedMode; draw-things-community LocalImageGenerator.randomLatentNoise): Torch CPU
# Compatible is torch's CPU randn (its TorchRandomSource), NVIDIA GPU Compatible CUDA's Philox (its NVRandomSource),
# both filled in (1, C, h, w) order as SeedLab draws them; Legacy and Scale Alike are its own. Its v2 JSON numbers them.
_SEED_MODES = {"Torch CPU Compatible": "cpu", "NVIDIA GPU Compatible": "cuda-philox"}
_SEED_MODE_NAMES = ("Legacy", "Torch CPU Compatible", "Scale Alike", "NVIDIA GPU Compatible")
_CLOSE = {"cpu": "its Swift copy of torch's CPU randn computes the Box-Muller step with Apple's float functions",
          "cuda-philox": "its Box-Muller angle takes a float64 pi where curand (A1111, SeedLab) takes float32's 2 pi"}
_OWN_NOISE = {"Legacy": "the GPU's own random generator, which no other machine repeats",
              "Scale Alike": "torch's CPU noise rearranged in nested squares, so that other sizes keep the composition "
                             "(its nestSquares), an arrangement SeedLab does not make"}
_XML_ESCAPES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_SILENT = {"c", "uc", "seed", "steps", "scale", "size", "sampler", "model", "strength", "seed_mode", "v2",
           "profile", "target_size", "original_size", "negative_original_size", "crop_top", "crop_left",
           "aesthetic_score", "negative_aesthetic_score", "zero_negative_prompt"}


# Draw Things' sampler labels (its SamplerType descriptions, DataModels/Sources/Defaults.swift): a base and the
# spacing of its timesteps (Karras, Trailing, AYS, Substep).
_SAMPLERS = {"PLMS": "PNDMScheduler", "DDIM": "DDIMScheduler", "Euler Ancestral": "EulerAncestralDiscreteScheduler",
             "Euler A": "EulerAncestralDiscreteScheduler", "DPM++ 2M": "DPMSolverMultistepScheduler",
             "DPM++ SDE": "DPMSolverSDEScheduler", "UniPC": "UniPCMultistepScheduler", "LCM": "LCMScheduler",
             "TCD": "TCDScheduler"}
_SPACINGS = ("Karras", "Trailing", "AYS", "Substep")


def drawthings_sampler(label: str, notes: list[str]) -> str:
    """"DPM++ 2M Karras", "Euler A Trailing", "TCD" as a diffusers class; the spacing, which SeedLab does not
    apply, named in a note. Another label goes to sampler_scheduler."""
    base, _, spacing = label.strip().rpartition(" ")
    if spacing not in _SPACINGS:
        base, spacing = label.strip(), ""
    if base not in _SAMPLERS:
        return sampler_scheduler(label, None, notes)
    if spacing:
        notes.append(f"Draw Things' {spacing} timestep spacing is not applied: {_SAMPLERS[base]} runs with its "
                     "default timesteps")
    return _SAMPLERS[base]


def xmp_texts(xmp: str) -> dict[str, str]:
    """The UserComment, description and CreatorTool of an XMP packet, unescaped; ValueError for a DOCTYPE."""
    check_text("XMP packet", xmp, MAX_JSON)
    upper = xmp.upper()
    if "<!DOCTYPE" in upper or "<!ENTITY" in upper:
        raise ValueError("the XMP packet declares a DOCTYPE or ENTITY, which SeedLab does not read")
    texts = {}
    for name in ("UserComment", "description", "CreatorTool"):
        found = _element_text(xmp, name)
        if found is not None:
            texts[name] = _unescape(found)
    return texts


def _element_text(xmp: str, name: str) -> str | None:
    """The text of the first element whose local name is `name` (its rdf:li's where it holds an rdf:Alt), or
    of an attribute of that name (XMP's short form); found with str.find, each character looked at a few times."""
    position = 0
    while (at := xmp.find(f":{name}", position)) >= 0:
        position, after = at + 1, at + len(name) + 1
        mark = xmp[after:after + 1]
        if mark == "=" and xmp[after + 1:after + 2] in ("'", '"'):  # exif:UserComment="..."
            end = xmp.find(xmp[after + 1], after + 2)
            return xmp[after + 2:end] if end > 0 else None
        opening = xmp.rfind("<", max(0, at - 40), at)
        prefix = xmp[opening + 1:at] if opening >= 0 else ""
        if not mark or mark not in "> \t\r\n/" or not prefix.replace("_", "").replace("-", "").isalnum():
            continue
        tag_end = xmp.find(">", after)
        if tag_end < 0 or xmp[tag_end - 1] == "/":
            return "" if tag_end >= 0 else None
        end = xmp.find(f"</{prefix}:{name}>", tag_end)
        return None if end < 0 else _item(xmp[tag_end + 1:end])
    return None


def _item(body: str) -> str | None:
    """An element's text, or its first rdf:li's where it holds an rdf:Alt, rdf:Seq or rdf:Bag."""
    item = body.find("<rdf:li")
    if item < 0:
        return body.strip()
    item_start, item_end = body.find(">", item), body.find("</rdf:li>", item)
    return body[item_start + 1:item_end] if 0 <= item_start < item_end else None


def _unescape(text: str) -> str:
    """XML's five named escapes and numeric character references; any other &name; stays as written."""
    out, position = [], 0
    while (amp := text.find("&", position)) >= 0:
        semicolon = text.find(";", amp, amp + 12)
        name = text[amp + 1:semicolon] if semicolon > 0 else ""
        out.append(text[position:amp])
        if name in _XML_ESCAPES:
            out.append(_XML_ESCAPES[name])
        elif name[:2] in ("#x", "#X") and 2 < len(name) <= 8 and all(c in "0123456789abcdefABCDEF" for c in name[2:]):
            out.append(chr(min(int(name[2:], 16), 0x10FFFF)))
        elif name[:1] == "#" and 1 < len(name) <= 8 and name[1:].isdigit():
            out.append(chr(min(int(name[1:]), 0x10FFFF)))
        else:
            out.append("&")
            position = amp + 1
            continue
        position = semicolon + 1
    out.append(text[position:])
    return "".join(out)


def is_drawthings(data: dict[str, Any]) -> bool:
    """Draw Things' JSON: the prompt under "c" with its settings ("scale", "size" or "uc")."""
    return "c" in data and any(key in data for key in ("scale", "size", "uc", "seed_mode"))


def read_drawthings(data: dict[str, Any]) -> tuple[str, dict[str, Any], list[str]]:
    """Draw Things' JSON comment: every field it states; a value that cannot be read is named in a note."""
    source = "Draw Things"
    fields: dict[str, Any] = {}
    notes: list[str] = []
    second = data.get("v2") if isinstance(data.get("v2"), dict) else {}  # the full configuration, for what is missing
    for key, field in (("c", "prompt"), ("uc", "negative_prompt"), ("model", "model")):
        value = data.get(key, second.get({"c": "prompt", "uc": "negativePrompt"}.get(key, key)))
        if isinstance(value, str):
            fields[field] = value.strip()
        elif value is not None:
            odd(notes, source, key, value, "not text")
    for key, alternative, field, kind in (("seed", "seed", "seed", int), ("steps", "steps", "num_inference_steps", int),
                                          ("scale", "guidanceScale", "guidance_scale", float)):
        value = data.get(key, second.get(alternative))
        if value is not None:
            put_number(fields, notes, source, key, value, field, kind)
    if data.get("size") is not None:
        put_size(fields, notes, source, "size", data["size"])
    elif second.get("width") is not None and second.get("height") is not None:
        put_number(fields, notes, source, "width", second["width"], "width", int)
        put_number(fields, notes, source, "height", second["height"], "height", int)
    if isinstance(data.get("sampler"), str) and data["sampler"]:
        fields["scheduler"] = drawthings_sampler(data["sampler"], notes)
    _notes(data, fields, notes)
    return source, fields, notes


def seed_mode(mode: Any, fields: dict[str, Any], notes: list[str]) -> None:
    """Draw Things' seed mode (its name, or the v2 JSON's number) as the rng where SeedLab draws that noise; the
    others, an unknown one and none at all named in a note (the rng is then left at its default, cpu)."""
    if isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode < len(_SEED_MODE_NAMES):
        mode = _SEED_MODE_NAMES[mode]
    if mode in _SEED_MODES:
        fields["rng"] = _SEED_MODES[mode]
        notes.append(f"Draw Things' seed mode {mode} is rng {fields['rng']}, the same generator and layout; "
                     f"{_CLOSE[fields['rng']]}, so a value may differ in its last float32 step")
    elif mode in _OWN_NOISE:
        notes.append(f"Draw Things' seed mode {mode} draws {_OWN_NOISE[mode]}: rng cpu is used, so the image differs")
    elif mode is None:
        notes.append("Draw Things: the file names no seed mode (Draw Things' default is Scale Alike, its own "
                     "arrangement of torch's CPU noise): rng cpu is used, so the image may differ")
    else:
        notes.append(f"Draw Things: seed_mode {str(mode)[:40]!r} is not one of its seed modes "
                     f"({', '.join(_SEED_MODE_NAMES)}): the rng is left at its default, cpu")


def _notes(data: dict[str, Any], fields: dict[str, Any], notes: list[str]) -> None:
    """Seed mode as the RNG where SeedLab has it; img2img strength, LoRAs and the rest named."""
    second = data.get("v2") if isinstance(data.get("v2"), dict) else {}
    seed_mode(data.get("seed_mode", second.get("seedMode")), fields, notes)
    strength = data.get("strength")
    if isinstance(strength, (int, float)) and not isinstance(strength, bool) and strength < 1:
        notes.append(f"strength {strength}: the image was made from another image (img2img); only the settings "
                     "are restored")
    rest = [key for key, value in data.items() if key not in _SILENT and value not in (None, "", [], {}, False)]
    if rest:
        notes.append(f"Draw Things: {', '.join(str(key)[:40] for key in rest[:12])} have no SeedLab equivalent "
                     "and are ignored")


def read_xmp(xmp: str) -> tuple[str, dict[str, Any], list[str]]:
    """A Draw Things XMP packet: its JSON comment, else its description's text; ValueError without either."""
    texts = xmp_texts(xmp)
    comment = texts.get("UserComment", "").strip()
    if comment.startswith("{"):
        data = loads(comment, "XMP UserComment")
        if isinstance(data, dict) and is_drawthings(data):
            return read_drawthings(data)
    description = texts.get("description", "")
    if "Steps:" in description and texts.get("CreatorTool", "").startswith("Draw Things"):
        return read_description(description)
    raise ValueError(f"the XMP packet holds no recipe SeedLab reads (written by "
                     f"{texts.get('CreatorTool', 'an unnamed tool')[:40]})")


def read_description(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """Draw Things' description: the prompt, "-" and the negative prompt, then one line of `Key: value, ...`."""
    from .keyvalue import read_pairs  # keyvalue.py reads the settings line (it spells Draw Things' keys too)
    check_text("XMP description", text)
    lines = text.strip().replace("\r\n", "\n").split("\n")
    settings = lines.pop() if len(lines) > 1 else ""
    negative = [index for index, line in enumerate(lines) if line.startswith("-")]
    cut = negative[0] if negative else len(lines)
    mode = re.search(r"(?:^|, )Seed Mode: ([^,]{1,40})", settings)  # written since 2023, last or before Upscaler
    if mode is not None:
        settings = settings[:mode.start()] + settings[mode.end():]
    fields, notes = read_pairs(settings, "Draw Things")
    seed_mode(mode[1].strip() if mode else None, fields, notes)
    fields["prompt"] = "\n".join(lines[:cut]).strip()
    fields["negative_prompt"] = "\n".join([lines[cut][1:], *lines[cut + 1:]]).strip() if negative else ""
    return "Draw Things", fields, notes
