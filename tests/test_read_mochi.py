"""Mochi Diffusion: the caption it hands ImageIO as IPTC Caption/Abstract (Model/SDImage.swift `metadata()`,
Support/MetadataCodec.swift), in the places ImageIO puts it: a JPEG's APP13 IPTC and EXIF ImageDescription, a PNG's
XMP dc:description or eXIf. The files are built here byte by byte, as the other reader tests build theirs."""

import io
import struct
import zlib

import pytest
from PIL import Image

from seedlab.files import mochi
from seedlab.files.info import describe
from seedlab.files.metadata import partial_recipe, read_metadata
from seedlab.files.mochi import read_mochi

# The caption of the issue (the GuernikaKit "6.0" builds of February-March 2024: Model/Scheduler.swift at 82a5bd2).
GUERNIKA = ("Include in Image: a lighthouse on a cliff at dawn, dramatic sky; Exclude from Image: blurry; "
            "Model: stable-diffusion-2-1-base; Steps: 30; Guidance Scale: 7.5; Seed: 1234; Size: 512x768; "
            "Scheduler: DPM++ SDE Karras; ML Compute Unit: CPU & GPU; Generator: Mochi Diffusion 6.0")
# The main line on Apple's pipeline (v3.0 - v5.2 write this layout; Scheduler.swift: PNDM, DPM-Solver++).
APPLE = ("Include in Image: a red fox, ünïcødé; Exclude from Image: ; Model: sdxl-base_split-einsum; Steps: 25; "
         "Guidance Scale: 11.0; Seed: 4294967295; Size: 1024x1024; Scheduler: DPM-Solver++; "
         "ML Compute Unit: CPU & Neural Engine; Generator: Mochi Diffusion 5.2")
WANT = {"prompt": "a lighthouse on a cliff at dawn, dramatic sky", "negative_prompt": "blurry",
        "model": "stable-diffusion-2-1-base", "num_inference_steps": 30, "guidance_scale": 7.5, "seed": 1234,
        "width": 512, "height": 768}


def iptc_segment(caption: str) -> bytes:
    """A JPEG APP13 Photoshop 3.0 segment holding IPTC-IIM as ImageIO writes it for Mochi: UTF-8 (1:90), the record
    version, OriginatingProgram (2:65), ProgramVersion (2:70) and Caption/Abstract (2:120)."""
    def dataset(record: int, number: int, data: bytes) -> bytes:
        return bytes([0x1C, record, number]) + struct.pack(">H", len(data)) + data
    iim = (dataset(1, 90, b"\x1b%G") + dataset(2, 0, b"\0\4") + dataset(2, 65, b"Mochi Diffusion")
           + dataset(2, 70, b"6.0") + dataset(2, 120, caption.encode()))
    resource = b"8BIM" + struct.pack(">HHI", 0x0404, 0, len(iim)) + iim + b"\0" * (len(iim) % 2)  # no name
    body = b"Photoshop 3.0\0" + resource
    return b"\xff\xed" + struct.pack(">H", len(body) + 2) + body


def jpeg(caption: str, description: str | None = None) -> bytes:
    out = io.BytesIO()
    exif = Image.Exif()
    if description is not None:
        exif[0x010E] = description  # ImageIO mirrors the caption into EXIF ImageDescription
    Image.new("RGB", (8, 8)).save(out, format="JPEG", exif=exif)
    data = out.getvalue()
    return data[:2] + iptc_segment(caption) + data[2:]


def png(chunks: list[tuple[bytes, bytes]]) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    return (b"\x89PNG\r\n\x1a\n" + header + b"".join(chunk(kind, data) for kind, data in chunks)
            + chunk(b"IDAT", zlib.compress(b"\0\0\0\0")) + chunk(b"IEND", b""))


def xmp(caption: str) -> bytes:
    escaped = caption.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", "&#xA;")
    return (b"XML:com.adobe.xmp\0\0\0\0\0" + (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="XMP Core 6.0.0"><rdf:RDF '
        'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:photoshop="http://ns.adobe.com/photoshop/1.0/">'
        f'<dc:description><rdf:Alt><rdf:li xml:lang="x-default">{escaped}</rdf:li></rdf:Alt></dc:description>'
        '</rdf:Description></rdf:RDF></x:xmpmeta>').encode())


def test_a_jpeg_with_the_issues_caption_is_read_and_drawn_as_guernikakit_drew_it(tmp_path):
    path = tmp_path / "lighthouse.1234.jpg"
    path.write_bytes(jpeg(GUERNIKA, GUERNIKA))
    reading = read_metadata(path)
    assert reading.format == "Mochi Diffusion" and reading.lossy
    assert {key: reading.fields[key] for key in WANT} == WANT
    assert reading.fields["scheduler"] == "DPMSolverSinglestepScheduler" and reading.fields["rng"] == "cpu"
    assert any("not A1111's DPM++ SDE" in note for note in reading.notes)
    assert any("(not Karras)" in note for note in reading.notes)
    described = describe(path)  # `seedlab info` reads its recipe (not "file has no recipe")
    assert described["format"] == "Mochi Diffusion" and described["recipe"]["seed"] == 1234
    recipe, unusable = partial_recipe(reading)
    assert (recipe.seed, recipe.rng, recipe.width) == (1234, "cpu", 512) and not unusable


def test_the_iptc_caption_wins_over_the_user_comment_json_a_branch_also_wrote():
    # The branch's MetadataHelper.swift also wrote {"c": ..., "uc": ...} into the UserComment (Draw Things' keys).
    out = io.BytesIO()
    exif = Image.Exif()
    exif.get_ifd(0x8769)[0x9286] = b"ASCII\0\0\0" + b'{"c":"other", "uc":"", "seed":9, "sampler":"DDIM", "steps":5}'
    Image.new("RGB", (8, 8)).save(out, format="JPEG", exif=exif)
    data = out.getvalue()
    reading = read_metadata(data[:2] + iptc_segment(GUERNIKA) + data[2:])
    assert reading.format == "Mochi Diffusion" and reading.fields["seed"] == 1234


def test_a_png_with_the_caption_in_its_xmp_draws_apples_numpy_noise():
    reading = read_metadata(png([(b"iTXt", xmp(APPLE))]))
    assert reading.format == "Mochi Diffusion"
    assert reading.fields["prompt"] == "a red fox, ünïcødé" and reading.fields["negative_prompt"] == ""
    assert (reading.fields["seed"], reading.fields["guidance_scale"], reading.fields["width"]) == (4294967295, 11.0,
                                                                                                   1024)
    assert reading.fields["scheduler"] == "DPM-Solver++ (Apple)" and reading.fields["rng"] == "numpy-mt19937"
    assert any("runs as Apple's Swift computes it (DPM-Solver++ (Apple))" in note for note in reading.notes)
    assert any("numpyRNG" in note and "rng numpy-mt19937" in note for note in reading.notes)
    assert partial_recipe(reading)[0].rng == "numpy-mt19937"


def test_a_png_with_the_caption_in_its_exif_image_description():
    exif = Image.Exif()
    exif[0x010E] = APPLE.replace("ünïcødé", "plain")
    reading = read_metadata(png([(b"eXIf", exif.tobytes())]))
    assert reading.format == "Mochi Diffusion" and reading.fields["prompt"] == "a red fox, plain"


@pytest.mark.parametrize("caption, want", [
    # 1.0 - 2.0: the prompt and the negative prompt, then settings, all after ", "
    ("Prompt: a cat, red, Negative: dog, Seed: 7, Model: sd-1.5, Scheduler: pndmScheduler, Steps: 20, "
     "Guidance: 7.5, Index: 0",
     {"prompt": "a cat, red", "negative_prompt": "dog", "seed": 7, "model": "sd-1.5", "scheduler": "PNDM (Apple)",
      "num_inference_steps": 20, "guidance_scale": 7.5}),
    # 2.1
    ("Prompt: a cat; Negative: dog; Model: sd-1.5; Scheduler: dpmSolverMultistepScheduler; Seed: 7; Steps: 20; "
     "Guidance: 7.5; Generator: Mochi Diffusion 2.1",
     {"prompt": "a cat", "negative_prompt": "dog", "seed": 7, "scheduler": "DPM-Solver++ (Apple)"}),
    # 2.3, upscaled
    ("Include in Image: a cat; Exclude from Image: ; Model: sd-1.5; Steps: 20; Guidance Scale: 7.5; Seed: 7; "
     "Size: 2048x2048; Upscaler: RealESRGAN; Scheduler: PNDM; Generator: Mochi Diffusion 2.3",
     {"prompt": "a cat", "negative_prompt": "", "width": 2048, "scheduler": "PNDM (Apple)", "rng": "numpy-mt19937"}),
    # 6.0 (main line, 2026): SD 3 through Core ML, an image-to-image input
    ("Include in Image: a cat; Exclude from Image: dog; Model: sd3-medium; Steps: 28; Guidance Scale: 4.5; "
     "Seed: 7; Size: 512x512; Starting Image: cat.png; Scheduler: Flow Match Euler Discrete; ML Compute Unit: All; "
     "Generator: Mochi Diffusion 6.0",
     {"scheduler": "FlowMatchEulerDiscreteScheduler", "rng": "numpy-mt19937", "seed": 7}),
    # MetadataCodec version 2: one field a line, escaped, "; " inside the prompt
    ("Metadata Version: 2\nInclude in Image: a cat; wearing a hat\\nsecond line\nExclude from Image: back\\\\slash\n"
     "Engine: coreml-sd\nModel Key: sd-1.5\nModel: SD 1.5\nSteps: 8\nGuidance Scale: 4.5\nSeed: 42\nSize: 64x32\n"
     "Input Images: one.png\nInput Images: two, three.png\nScheduler: DPM-Solver++\nGenerator: Mochi Diffusion 6.1",
     {"prompt": "a cat; wearing a hat\nsecond line", "negative_prompt": "back\\slash", "model": "SD 1.5",
      "num_inference_steps": 8, "seed": 42, "width": 64, "height": 32, "rng": "numpy-mt19937"}),
])
def test_every_layout_of_the_caption(caption, want):
    assert mochi.is_mochi(caption)
    name, fields, _ = read_mochi(caption)
    assert name == "Mochi Diffusion" and {key: fields.get(key) for key in want} == want


def test_a_prompt_holding_the_separator_stays_whole_before_codec_2():
    _, fields, notes = read_mochi(GUERNIKA.replace("dramatic sky", "dramatic sky; 4k; Mood: calm"))
    assert fields["prompt"] == "a lighthouse on a cliff at dawn, dramatic sky; 4k; Mood: calm"
    assert fields["negative_prompt"] == "blurry" and not any("Mood" in note for note in notes)


def test_flux_images_of_the_iris_engine_keep_the_default_noise_with_a_note():
    caption = ("Include in Image: a cat; Model: flux-2-klein-4b; Steps: 4; Seed: 3; Size: 1024x1024; "
               "Scheduler: Flow Match Euler Discrete; Generator: Mochi Diffusion 6.0")
    _, fields, notes = read_mochi(caption)
    assert "rng" not in fields and fields["seed"] == 3
    assert any("Iris' own noise" in note for note in notes)


def test_bad_values_are_named_and_the_rest_is_read():
    caption = GUERNIKA.replace("Seed: 1234", "Seed: 5000000000").replace("Steps: 30", "Steps: thirty")
    caption = caption.replace("; Size:", "; ???; Refiner: base; Size:")
    _, fields, notes = read_mochi(caption)
    assert "seed" not in fields and "num_inference_steps" not in fields
    assert any("Seed: 5000000000 could not be read (outside Mochi's seed range, a UInt32: 0 to 4294967295)" in note
               for note in notes)
    assert any("Steps: thirty could not be read" in note for note in notes)
    assert any("'???' is not a `Key: value` field" in note for note in notes)
    assert any("Refiner have no SeedLab equivalent" in note for note in notes)
    assert (fields["width"], fields["guidance_scale"], fields["prompt"]) == (512, 7.5, WANT["prompt"])


def test_an_unknown_scheduler_is_named():
    _, fields, notes = read_mochi(GUERNIKA.replace("DPM++ SDE Karras", "Heun++"))
    assert fields["scheduler"] == "default" and any("Scheduler Heun++ is not one SeedLab knows" in note
                                                     for note in notes)


def test_a_hostile_xmp_is_not_read_as_mochi():
    packet = xmp(APPLE).replace(b"<x:xmpmeta", b'<!DOCTYPE x [<!ENTITY a "b">]><x:xmpmeta', 1)
    with pytest.raises(ValueError):
        read_metadata(png([(b"iTXt", packet)]))
    assert mochi.iptc_caption({0x0404: b"\x1c\x02\x78\x80\x04abcd"}) is None  # an extended length: refused
    assert mochi.iptc_caption({0x0404: b"\x1c\x02\x78\x00\x10ab"}) == "ab"  # a truncated dataset: what is there


def test_an_empty_value_is_no_note():
    """Issue 54: a key a tool writes empty ("Upscaler: ", no upscaler) says nothing, as Fooocus's empty raw negative
    prompt says nothing."""
    from seedlab.files.mochi import read_mochi

    _, fields, notes = read_mochi("Include in Image: a cat; Exclude from Image: ; Model: sd15; Seed: 5; Steps: 3; "
                                  "Guidance Scale: 7; Upscaler: ; Starting Image: ; Scheduler: DPM-Solver++; "
                                  "Size: 512 x 512")
    assert fields["prompt"] == "a cat" and not any("upscaled" in note or "Starting Image" in note for note in notes)
