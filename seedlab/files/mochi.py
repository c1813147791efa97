"""Mochi Diffusion (macOS): the caption it writes into every image, as recipe fields.

Mochi Diffusion (MochiDiffusion/MochiDiffusion, first godly-devotion/MochiDiffusion) hands Apple's ImageIO an IPTC
dictionary: CaptionAbstract (the recipe), OriginatingProgram "Mochi Diffusion" and ProgramVersion. ImageIO writes
the caption as IPTC 2:120 in a JPEG's APP13 and mirrors it into EXIF ImageDescription and the XMP's dc:description
(a PNG's iTXt packet). Its layouts (Model/SDImage.swift `metadata()`, Support/MetadataCodec.swift):

    1.0 - 2.0  Prompt: P, Negative: N, Seed: 42, Model: M, Scheduler: dpmSolverMultistepScheduler, Steps: 20,
               Guidance: 7.5, Index: 0
    2.1        Prompt: P; Negative: N; Model: M; Scheduler: ...; Seed: 42; Steps: 20; Guidance: 7.5; Generator: ...
    2.2 - 6.0  Include in Image: P; Exclude from Image: N; Model: M; Steps: 20; Guidance Scale: 7.5; Seed: 42;
               Size: 512x512; [Upscaler: U;] Scheduler: DPM-Solver++; [ML Compute Unit: CPU & GPU;] Generator: Mochi
               Diffusion 4.7 (6.0 writes only the fields its engine has, and Quality, Starting Image, Input Images ...)
    codec 2    "Metadata Version: 2", then one `Key: value` a line, values escaped (\\\\, \\n, \\r); Engine, Model Key

The separator "; " is not escaped before codec 2, so a prompt may hold it: a piece that names no known key is read
as part of the text field before it, or named in a note where that field is a number.

Noise: Mochi runs Apple's ml-stable-diffusion pipeline and never sets its `rngType`, whose default is numpyRNG: rng
numpy-mt19937 (engine/random_sources.py). The "6.0" builds of February and March 2024 ran GuernikaKit instead (its
samplers: "DPM++ 2M Karras", "DPM++ SDE Karras", "Euler Ancestral", ...), which draws with TorchRandomGenerator, a
re-creation of torch's CPU generator: rng cpu. FLUX.2 images of 6.0's Iris engine (no ML Compute Unit, no Guidance
Scale) draw with Iris' own generator, which SeedLab does not have.
"""

from __future__ import annotations

import re
from typing import Any

from .formats import check_text, odd, put_number, put_size

CHUNK = "Mochi Diffusion"  # the caption, once found in IPTC, EXIF or XMP (chunks.py)
NAME = "Mochi Diffusion"
MAX_SEED = 2**32 - 1  # Mochi's seed is a Swift UInt32
# The keys Mochi writes: those that are recipe fields, those read only for the noise, those named in a note.
_FIELDS = {"Include in Image": "prompt", "Prompt": "prompt", "Exclude from Image": "negative_prompt",
           "Negative": "negative_prompt", "Model": "model", "Steps": "num_inference_steps",
           "Guidance Scale": "guidance_scale", "Guidance": "guidance_scale", "Seed": "seed", "Size": "size",
           "Scheduler": "scheduler"}
_SILENT = {"Generator", "ML Compute Unit", "Metadata Version", "Engine", "Model Key", "Index", "Date", "RNG",
           "Random Source"}
_NOTED = {"Upscaler", "Quality", "Starting Image", "ControlNet Image", "Input Images"}
_TEXT = {"prompt", "negative_prompt", "model", "Starting Image", "ControlNet Image", "Input Images", "Quality"}  # free
# Mochi's scheduler labels as SeedLab runs them: Apple's PNDM and DPM-Solver++ as Apple's Swift computes them
# (engine/samplers/apple.py); its flow scheduler and GuernikaKit's as the diffusers classes they re-create.
_APPLE = {"PNDM": "PNDM (Apple)", "pndmScheduler": "PNDM (Apple)", "DPM-Solver++": "DPM-Solver++ (Apple)",
          "dpmSolverMultistepScheduler": "DPM-Solver++ (Apple)",
          "Flow Match Euler Discrete": "FlowMatchEulerDiscreteScheduler",
          "discreteFlowScheduler": "FlowMatchEulerDiscreteScheduler"}
_GUERNIKA = {"DDIM": "DDIMScheduler", "DPM++ 2M": "DPMSolverMultistepScheduler",
             "DPM++ SDE": "DPMSolverSinglestepScheduler", "DPM2": "KDPM2DiscreteScheduler",
             "Euler": "EulerDiscreteScheduler", "Euler Ancestral": "EulerAncestralDiscreteScheduler",
             "Euler Ancenstral": "EulerAncestralDiscreteScheduler", "EulerA": "EulerAncestralDiscreteScheduler",
             "LCM": "LCMScheduler"}
_RNG_WORDS = {"numpy": "numpy-mt19937", "numpyrng": "numpy-mt19937", "torch": "cpu", "torchrng": "cpu",
              "nvidia": "cuda-philox", "nvidiarng": "cuda-philox"}  # Apple's StableDiffusionRNG, if a file names it
_OLD_SEPARATOR = re.compile(r"(, |; )(?=(?:Negative|Seed|Model|Scheduler|Steps|Guidance|Index|Generator): )")
_IPTC_CAPTION = (2, 120)  # IPTC-IIM Caption/Abstract


def is_mochi(text: Any) -> bool:
    """Mochi Diffusion's caption, in any of its layouts."""
    if not isinstance(text, str):
        return False
    if "Generator: Mochi Diffusion" in text or text.lstrip().startswith("Include in Image: "):
        return True
    return text.startswith("Prompt: ") and ", Negative: " in text and ", Guidance: " in text and ", Index: " in text


def caption(photoshop: Any, description: Any, xmp: Any) -> str | None:
    """The caption from a JPEG's APP13 (Pillow's `photoshop` resources), EXIF ImageDescription or an XMP packet."""
    from .drawthings import xmp_texts  # the same scan of an untrusted packet as Draw Things' XMP

    found = iptc_caption(photoshop) if isinstance(photoshop, dict) else None
    if is_mochi(found):
        return found
    if isinstance(description, bytes):
        description = description.decode("utf-8", "replace")
    if isinstance(description, str) and is_mochi(description):
        return _utf8(description)
    if isinstance(xmp, bytes):
        xmp = xmp.decode("utf-8", "replace")
    if isinstance(xmp, str) and "Mochi Diffusion" in xmp:
        try:
            found = xmp_texts(xmp).get("description")
        except ValueError:
            return None
        return found if is_mochi(found) else None
    return None


def _utf8(text: str) -> str:
    """EXIF's ASCII tags hold UTF-8 bytes that a reader may have decoded as Latin-1: undo that where it was so."""
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


def iptc_caption(resources: dict) -> str | None:
    """IPTC-IIM record 2:120 (Caption/Abstract) of Photoshop resource 0x0404, decoded as UTF-8."""
    data = resources.get(0x0404)
    if not isinstance(data, bytes):
        return None
    position, found = 0, {}
    while position + 5 <= len(data) and data[position] == 0x1C:
        record, dataset = data[position + 1], data[position + 2]
        length = int.from_bytes(data[position + 3:position + 5], "big")
        if length & 0x8000:  # an extended length: Mochi's captions never need one
            return None
        found.setdefault((record, dataset), data[position + 5:position + 5 + length])
        position += 5 + length
    text = found.get(_IPTC_CAPTION)
    return None if text is None else text.decode("utf-8", "replace")


def read_mochi(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """Mochi Diffusion's caption: every field it states; a value or a piece that cannot be read named in a note."""
    check_text("Mochi Diffusion caption", text)
    fields: dict[str, Any] = {}
    notes: list[str] = []
    pairs = _pairs(text.strip(), notes)
    stated = {key: value for key, value in pairs}
    rest = []
    for key, value in pairs:
        if key in _FIELDS:
            _put(_FIELDS[key], key, value, fields, notes)
        elif not value.strip():
            continue  # an empty value says nothing (no upscaler, no starting image)
        elif key in _NOTED:
            notes.append(_noted(key, value))
        elif key not in _SILENT:
            rest.append(key)
    if rest:
        notes.append(f"{NAME}: {', '.join(key[:40] for key in rest[:12])} have no SeedLab equivalent and are ignored")
    _noise(stated, fields, notes)
    return NAME, fields, notes


def _pairs(text: str, notes: list[str]) -> list[tuple[str, str]]:
    """(key, value) in the caption's order, for each of its layouts; a piece that is no `Key: value` in a note."""
    codec = text.startswith("Metadata Version: ") and "\n" in text
    if codec:  # one `Key: value` a line, escaped
        pieces, separators = text.replace("\r\n", "\n").split("\n"), ["\n"]
    elif text.startswith("Prompt: "):  # 1.0 - 2.1: ", " or "; " before one of its keys
        parts = _OLD_SEPARATOR.split(text)
        pieces, separators = parts[0::2], parts[1::2] or [", "]
    else:
        pieces, separators = text.split("; "), ["; "]
    pairs: list[tuple[str, str]] = []
    for index, piece in enumerate(pieces):
        key, colon, value = piece.partition(": ")
        key = key.strip()
        known = colon and (key in _FIELDS or key in _SILENT or key in _NOTED)
        previous = pairs[-1][0] if pairs else None
        if not known and previous is not None and _FIELDS.get(previous, previous) in _TEXT and not codec:
            separator = separators[min(index - 1, len(separators) - 1)]
            pairs[-1] = (previous, pairs[-1][1] + separator + piece)  # "; " inside a prompt
        elif colon and key and len(key) <= 40 and not key[0].isspace():
            pairs.append((key, _unescape(value) if codec else value))
        elif piece.strip():
            notes.append(f"{NAME}: {piece.strip()[:40]!r} is not a `Key: value` field and was skipped")
    return [(key, value.strip().removesuffix(";").strip()) for key, value in pairs]


def _unescape(value: str) -> str:
    """MetadataCodec's escapes: \\\\, \\n, \\r; any other backslash stays as written."""
    return re.sub(r"\\([\\nr])", lambda match: {"\\": "\\", "n": "\n", "r": "\r"}[match.group(1)], value)


def _put(field: str, key: str, value: str, fields: dict[str, Any], notes: list[str]) -> None:
    """One stated field into `fields`; a value that cannot be read is named in a note and left out."""
    if field == "size":
        put_size(fields, notes, NAME, key, value)
    elif field in ("num_inference_steps", "seed"):
        put_number(fields, notes, NAME, key, value.strip(), field, int)
        if field == "seed" and fields.get("seed") is not None and not 0 <= fields["seed"] <= MAX_SEED:
            odd(notes, NAME, key, fields.pop("seed"), f"outside Mochi's seed range, a UInt32: 0 to {MAX_SEED}")
    elif field == "guidance_scale":
        put_number(fields, notes, NAME, key, value.strip(), field, float)
    elif field == "scheduler":
        fields["scheduler_label"] = value.strip()  # mapped in _noise, which knows the engine
    else:
        fields[field] = value.strip() if field == "model" else value


def _noted(key: str, value: str) -> str:
    if key == "Upscaler":
        return (f"{NAME}: the image was upscaled with {value[:40]} after it was made: Size is the upscaled size, "
                "and the pixels are the upscaler's")
    if key in ("Starting Image", "ControlNet Image", "Input Images"):
        return f"{NAME}: {key} {value[:60]}: the image was made from another image, which the file does not hold"
    return f"{NAME}: {key}: {value[:40]} has no SeedLab equivalent and is ignored"


def _noise(stated: dict[str, str], fields: dict[str, Any], notes: list[str]) -> None:
    """The scheduler and the rng: which engine drew the image follows from the engine key, the sampler's name
    (GuernikaKit's set its own labels) and the fields Iris leaves out."""
    label = fields.pop("scheduler_label", "")
    base = label.removesuffix(" Karras")
    engine = stated.get("Engine", "").strip().lower()
    version = re.match(r"(\d{1,4})", stated.get("Generator", "").rpartition(" ")[2])
    iris = engine == "iris" or (not engine and label == "Flow Match Euler Discrete" and "ML Compute Unit" not in stated
                                and "Guidance Scale" not in stated and version is not None and int(version[1]) >= 6)
    source, rng = ("Iris" if iris else "Apple's Core ML pipeline"), "numpy-mt19937"
    if base in _GUERNIKA and label not in _APPLE:
        fields["scheduler"], source, rng = _GUERNIKA[base], "GuernikaKit", "cpu"
    elif label:
        fields["scheduler"] = _APPLE.get(label, "default")
    if label and fields["scheduler"] == "default":
        notes.append(f"{NAME}: Scheduler {label[:40]} is not one SeedLab knows: the model's default scheduler is used")
    elif fields["scheduler"].endswith(" (Apple)"):
        notes.append(f"{NAME}'s {label} runs as Apple's Swift computes it ({fields['scheduler']}) on Stable Diffusion "
                     "1.x and 2.x models; SDXL ones, whose DPM-Solver++ Mochi spaces as Karras, cannot run it here")
    elif label:
        notes.append(f"{NAME}'s {label} is {source}'s Swift re-creation of diffusers' {fields['scheduler']}: it runs "
                     f"here as diffusers' {fields['scheduler']}" + (" with its default sigmas (not Karras)"
                                                                     if label.endswith(" Karras") else ""))
    if base == "DPM++ SDE":
        notes.append(f"{NAME}'s {label} (GuernikaKit's) is DPM-Solver++ single-step, not A1111's DPM++ SDE")
    named = stated.get("RNG", stated.get("Random Source", "")).strip().lower()
    if named in _RNG_WORDS:
        fields["rng"] = _RNG_WORDS[named]
    elif iris:
        notes.append(f"{NAME}: FLUX.2 images (its Iris engine) start from Iris' own noise, which SeedLab does not "
                     "draw: the image differs")
    else:
        fields["rng"] = rng
        why = "its TorchRandomGenerator, torch's CPU noise" if rng == "cpu" else \
            "numpyRNG, the pipeline's default, which Mochi never changes: NumPy's legacy MT19937 noise"
        notes.append(f"{NAME} does not write its noise source: {source} draws with {why} (rng {rng})")
