"""Draw Things: its XMP packet (PNG iTXt, JPEG APP1) with the JSON comment and the description, as its
ImageConverter writes them (draw-things-community, Libraries/LocalImageGenerator/Sources/ImageConverter.swift)."""

import io
import json
import struct
import zlib

import pytest
from PIL import Image

from seedlab.files.drawthings import read_description, read_xmp, xmp_texts
from seedlab.files.metadata import read_metadata

# The real comment of a Draw Things PNG, as exiftool showed it (cocktailpeanut/breadmachine issue 2), in the
# key order and spelling its writer uses.
COMMENT = {"c": "a picture of a guitar (floating on a lake) [near the beach]",
           "uc": "ocean, (sunny), [sad], <bad_prompt>", "steps": 10, "sampler": "DDIM", "scale": 10,
           "seed": 1177739245, "size": "1152x768", "model": "sd_v1.4_f16.ckpt", "strength": 1,
           "seed_mode": "Legacy", "hires_fix": True, "first_stage_size": "768x512", "second_stage_strength": 0.7}
DESCRIPTION = ("a picture of a guitar (floating on a lake) [near the beach]\n-ocean, (sunny), [sad], <bad_prompt>\n"
               "Steps: 10, Sampler: DDIM, Guidance Scale: 10.0, Seed: 1177739245, Size: 1152x768, Model: "
               "sd_v1.4_f16.ckpt, Strength: 1.0, Hires Fix: true, First Stage Size: 768x512, "
               "Second Stage Strength: 0.7")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def packet(comment: str, description: str = DESCRIPTION) -> str:
    """The packet as Apple's ImageIO writes it for Draw Things."""
    return ('<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="XMP Core 6.0.0">\n'
            '   <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
            '      <rdf:Description rdf:about=""\n            xmlns:dc="http://purl.org/dc/elements/1.1/"\n'
            '            xmlns:xmp="http://ns.adobe.com/xap/1.0/"\n'
            '            xmlns:exif="http://ns.adobe.com/exif/1.0/">\n'
            f'         <dc:description>\n            <rdf:Alt>\n               <rdf:li xml:lang="x-default">'
            f'{escape(description).replace(chr(10), "&#xA;")}</rdf:li>\n            </rdf:Alt>\n'
            '         </dc:description>\n'
            '         <xmp:CreatorTool>Draw Things</xmp:CreatorTool>\n'
            f'         <exif:UserComment>\n            <rdf:Alt>\n               <rdf:li xml:lang="x-default">'
            f'{escape(comment)}</rdf:li>\n            </rdf:Alt>\n         </exif:UserComment>\n'
            '      </rdf:Description>\n   </rdf:RDF>\n</x:xmpmeta>\n')


def png_with_xmp(xmp: str) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    itxt = chunk(b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + xmp.encode())
    return (b"\x89PNG\r\n\x1a\n" + header + itxt + chunk(b"IDAT", zlib.compress(b"\0\0\0\0"))
            + chunk(b"IEND", b""))


def test_a_draw_things_png_gives_every_field_of_its_comment():
    reading = read_metadata(png_with_xmp(packet(json.dumps(COMMENT))))
    assert reading.format == "Draw Things"
    assert reading.fields["prompt"] == COMMENT["c"] and reading.fields["negative_prompt"] == COMMENT["uc"]
    assert (reading.fields["seed"], reading.fields["num_inference_steps"], reading.fields["guidance_scale"]) == \
        (1177739245, 10, 10.0)
    assert (reading.fields["width"], reading.fields["height"], reading.fields["model"]) == (1152, 768,
                                                                                              "sd_v1.4_f16.ckpt")
    assert reading.fields["scheduler"] == "DDIMScheduler"
    assert any("hires_fix" in note for note in reading.notes) and any("Legacy" in note for note in reading.notes)


def test_a_jpeg_carries_the_same_packet():
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, format="JPEG", xmp=packet(json.dumps(COMMENT)).encode())
    reading = read_metadata(out.getvalue())
    assert reading.format == "Draw Things" and reading.fields["seed"] == 1177739245 and reading.lossy


def test_the_description_is_read_where_there_is_no_json():
    name, fields, notes = read_xmp(packet("", DESCRIPTION))
    assert name == "Draw Things"
    assert fields["prompt"] == COMMENT["c"] and fields["negative_prompt"] == COMMENT["uc"]
    assert (fields["seed"], fields["num_inference_steps"], fields["guidance_scale"]) == (1177739245, 10, 10.0)
    assert (fields["width"], fields["height"], fields["model"]) == (1152, 768, "sd_v1.4_f16.ckpt")
    assert any("Strength" in note and "Hires Fix" in note for note in notes)


def test_a_description_without_negative_prompt():
    _, fields, _ = read_description("a fox\nSteps: 8, Sampler: UniPC Trailing, Guidance Scale: 1.0, Seed: 3, "
                                    "Size: 1024x1024, Model: z_image_turbo_1.0_q6p.ckpt")
    assert fields["prompt"] == "a fox" and fields["negative_prompt"] == "" and fields["seed"] == 3


def test_v2_fills_what_the_short_keys_leave_out():
    comment = {"c": "a fox", "uc": "", "v2": {"seed": 7, "steps": 12, "guidanceScale": 4.5, "width": 640,
                                               "height": 512}}
    _, fields, _ = read_xmp(packet(json.dumps(comment)))
    assert (fields["seed"], fields["num_inference_steps"], fields["guidance_scale"], fields["width"],
            fields["height"]) == (7, 12, 4.5, 640, 512)


def test_seed_modes_that_seedlab_draws_become_the_rng():
    for mode, rng in (("Torch CPU Compatible", "cpu"), ("NVIDIA GPU Compatible", "cuda-philox")):
        _, fields, notes = read_xmp(packet(json.dumps({**COMMENT, "seed_mode": mode})))
        assert fields["rng"] == rng and any(f"seed mode {mode} is rng {rng}" in note for note in notes)


@pytest.mark.parametrize("mode, words", [("Legacy", "the GPU's own random generator"),
                                         ("Scale Alike", "nested squares")])
def test_seed_modes_of_its_own_are_named_and_the_rest_is_read(mode, words):
    _, fields, notes = read_xmp(packet(json.dumps({**COMMENT, "seed_mode": mode})))
    assert "rng" not in fields and fields["seed"] == COMMENT["seed"]
    assert any(f"seed mode {mode} draws" in note and words in note and "rng cpu is used" in note for note in notes)


def test_the_v2_configurations_number_an_unknown_mode_and_none_at_all():
    comment = {key: value for key, value in COMMENT.items() if key != "seed_mode"}
    _, fields, _ = read_xmp(packet(json.dumps({**comment, "v2": {"seedMode": 3}})))  # SeedMode.nvidiaGpuCompatible
    assert fields["rng"] == "cuda-philox"
    _, fields, notes = read_xmp(packet(json.dumps({**comment, "seed_mode": "Quantum"})))
    assert "rng" not in fields and fields["num_inference_steps"] == 10
    assert any("seed_mode 'Quantum' is not one of its seed modes (Legacy, Torch CPU Compatible" in note
               for note in notes)
    _, fields, notes = read_xmp(packet(json.dumps(comment)))
    assert "rng" not in fields and any("names no seed mode" in note for note in notes)


def test_the_descriptions_seed_mode():
    text = DESCRIPTION.replace("Strength: 1.0,", "Strength: 1.0, Seed Mode: NVIDIA GPU Compatible,")
    _, fields, notes = read_description(text)
    assert fields["rng"] == "cuda-philox" and fields["seed"] == 1177739245
    assert not any("Seed Mode" in note and "no SeedLab equivalent" in note for note in notes)


def test_one_odd_value_loses_that_field_only():
    _, fields, notes = read_xmp(packet(json.dumps({**COMMENT, "size": "huge", "scale": "ten"})))
    assert "width" not in fields and "guidance_scale" not in fields
    assert fields["seed"] == 1177739245 and fields["prompt"] == COMMENT["c"]
    assert any("size: huge could not be read" in note for note in notes)
    assert any("scale: ten could not be read" in note for note in notes)


def test_entities_are_never_expanded():
    hostile = '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">]>' + packet(json.dumps(COMMENT))
    with pytest.raises(ValueError, match="DOCTYPE or ENTITY") as error:
        read_metadata(png_with_xmp(hostile))
    assert "\n" not in str(error.value)
    assert xmp_texts("<exif:UserComment>&a;&amp;&#x41;&#66;&bogus</exif:UserComment>")["UserComment"] == \
        "&a;&AB&bogus"


def test_huge_and_deep_packets_are_refused_with_one_line():
    with pytest.raises(ValueError, match="at most"):
        xmp_texts("<x>" * 2_000_000)
    deep = "[" * 100 + "]" * 100
    with pytest.raises(ValueError, match="nests JSON"):
        read_xmp(packet(json.dumps(COMMENT)[:-1] + f', "x": {deep}}}'))


def test_a_packet_without_a_recipe_is_refused_naming_its_tool():
    with pytest.raises(ValueError, match="written by Photoshop"):
        read_xmp("<x:xmpmeta><xmp:CreatorTool>Photoshop</xmp:CreatorTool></x:xmpmeta>")


def test_a1111_text_that_an_editor_moved_into_the_xmp_is_read_as_a1111():
    text = "a cat\nNegative prompt: dog\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 512x512"
    xmp = f'<x:xmpmeta><rdf:Description exif:UserComment="{escape(text)}"/></x:xmpmeta>'
    reading = read_metadata(png_with_xmp(xmp))
    assert reading.format == "A1111" and reading.fields["seed"] == 5 and reading.fields["negative_prompt"] == "dog"
