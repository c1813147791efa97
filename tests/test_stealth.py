"""Stealth PNG info: the four forms against a writer written here from the format, NovelAI's JSON, hostile images."""

import gzip
import io
import json
import struct
import time
import zlib

import numpy as np
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from seedlab import Recipe, Result, fingerprint, save_png
from seedlab.files.metadata import read_metadata, recipe_from_reading
from seedlab.files.stealth import MAX_PAYLOAD, SIGNATURES, embed, read_stealth
from seedlab.serving.reproduction import original_from_png
from tests.test_links import ENV

RGB = np.random.default_rng(0).integers(0, 256, (48, 40, 3), dtype=np.uint8)  # height 48, width 40
BIG = np.random.default_rng(1).integers(0, 256, (96, 104, 3), dtype=np.uint8)  # room for 1,200 bytes in alpha
A1111 = "a red circle\nNegative prompt: blurry\nSteps: 12, Sampler: Euler, CFG scale: 6, Seed: 77, Size: 64x64, RNG: NV"


def hide(pixels: np.ndarray, signature: str, payload: bytes, stated_bits: int | None = None) -> np.ndarray:
    """The format written out by hand: bits MSB first into the low bit of each channel, x outer, y inner."""
    alpha = signature.startswith("stealth_png")
    stream = signature.encode() + struct.pack(">I", len(payload) * 8 if stated_bits is None else stated_bits) + payload
    bits = [(byte >> (7 - i)) & 1 for byte in stream for i in range(8)]
    out = np.dstack([pixels, np.full(pixels.shape[:2], 255, np.uint8)]) if alpha else pixels.copy()
    channels = [3] if alpha else [0, 1, 2]
    height, width = pixels.shape[:2]
    position = 0
    for x in range(width):
        for y in range(height):
            for channel in channels:
                if position < len(bits):
                    out[y, x, channel] = (out[y, x, channel] & 0xFE) | bits[position]
                    position += 1
    assert position == len(bits), "the test image is too small for the payload"
    return out


def png(pixels: np.ndarray) -> bytes:
    """A PNG with no text chunks at all."""
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def payload(signature: str, text: str) -> bytes:
    return gzip.compress(text.encode()) if signature.endswith("comp") else text.encode()


# --- the four forms ---


@pytest.mark.parametrize("signature", list(SIGNATURES))
def test_each_form_written_by_hand_is_read_and_the_library_writes_the_same_pixels(signature):
    data = png(hide(RGB, signature, payload(signature, A1111)))
    assert read_stealth(data, 10**6) == (signature, A1111)
    reading = read_metadata(data)
    assert reading.format == f"A1111 ({signature})"
    recipe = recipe_from_reading(reading)
    assert (recipe.prompt, recipe.negative_prompt, recipe.seed, recipe.rng) == ("a red circle", "blurry", 77,
                                                                                "cuda-philox")
    if not signature.endswith("comp"):  # gzip output may differ by its header; the plain forms must match bit for bit
        assert np.array_equal(np.asarray(embed(Image.fromarray(RGB), A1111, signature)),
                              hide(RGB, signature, payload(signature, A1111)))


@pytest.mark.parametrize("signature", list(SIGNATURES))
def test_the_library_writer_round_trips_and_alpha_forms_keep_the_rgb_pixels(signature):
    text = "ünïcode prompt 🎲\n" + A1111.split("\n", 1)[1]
    hidden = embed(Image.fromarray(RGB), text, signature)
    assert read_stealth(png(np.asarray(hidden)), 10**6) == (signature, text)
    if SIGNATURES[signature][0] == "alpha":
        assert hidden.mode == "RGBA" and np.array_equal(np.asarray(hidden)[:, :, :3], RGB)
        assert set(np.unique(np.asarray(hidden)[:, :, 3])) == {254, 255}
    else:
        assert hidden.mode == "RGB" and not np.array_equal(np.asarray(hidden), RGB)
        assert np.array_equal(np.asarray(hidden) >> 1, RGB >> 1)  # only the lowest bits changed


def test_novelai_stealth_pngcomp_json_goes_through_the_novelai_reader():
    comment = {"prompt": "1girl, solo", "uc": "lowres", "steps": 28, "scale": 5.0, "seed": 1234567890,
               "width": 832, "height": 1216, "sampler": "k_euler_ancestral", "n_samples": 1}
    for nested in (json.dumps(comment), comment):  # NovelAI writes Comment as JSON text; some tools as an object
        info = {"Title": "NovelAI generated image", "Description": "1girl, solo", "Software": "NovelAI",
                "Source": "NovelAI Diffusion V4 4BDE2A90", "Comment": nested}
        data = png(hide(BIG, "stealth_pngcomp", gzip.compress(json.dumps(info).encode())))
        reading = read_metadata(data)
        assert reading.format == "NovelAI (stealth_pngcomp)"
        assert reading.fields == {"prompt": "1girl, solo", "negative_prompt": "lowres", "seed": 1234567890,
                                  "num_inference_steps": 28, "guidance_scale": 5.0, "width": 832, "height": 1216,
                                  "scheduler": "Euler a", "schedule": "Automatic",
                                  "model": "NovelAI Diffusion V4 4BDE2A90"}


def test_text_chunks_win_and_a_plain_png_still_has_no_recipe():
    hidden = png(hide(RGB, "stealth_pnginfo", A1111.replace("Seed: 77", "Seed: 1").encode()))
    chunk = PngInfo()
    chunk.add_text("parameters", A1111)
    buffer = io.BytesIO()
    with Image.open(io.BytesIO(hidden)) as image:
        image.save(buffer, format="PNG", pnginfo=chunk)
    assert read_metadata(buffer.getvalue()).fields["seed"] == 77  # the text chunk, not the pixels
    with pytest.raises(ValueError, match="no recipe"):
        read_metadata(png(RGB))
    with pytest.raises(ValueError, match="no recipe"):
        read_metadata(png(np.dstack([RGB, np.full(RGB.shape[:2], 255, np.uint8)])))


# --- save_png(stealth=True): the recipe survives stripped text chunks ---


def test_save_png_with_stealth_survives_a_site_that_strips_text_chunks(tmp_path):
    image = Image.fromarray(BIG)
    recipe = Recipe(prompt="a red circle", seed=5, rng="cuda-philox", width=104, height=96)
    result = Result(recipe, image, fingerprint(image), ENV)
    path = save_png(result, tmp_path / "x.png", stealth=True)
    with Image.open(path) as saved:
        assert saved.mode == "RGBA" and np.array_equal(np.asarray(saved)[:, :, :3], BIG)
        assert fingerprint(saved) == result.fingerprint  # the fingerprint is of the RGB pixels
        stripped = png(np.asarray(saved))  # what a site that drops text chunks serves
    assert read_metadata(path.read_bytes()).format == "SeedLab"
    reading = read_metadata(stripped)
    assert reading.format == "A1111 (stealth_pnginfo)" and reading.fingerprint == result.fingerprint
    original = original_from_png(io.BytesIO(stripped))
    assert original.recipe == recipe and original.fingerprint == result.fingerprint
    assert not any("do not match" in note for note in original.notes)


def test_stealth_falls_back_to_gzip_and_refuses_an_image_too_small(tmp_path):
    recipe = Recipe(prompt="a long prompt " * 20, seed=5)
    small = Image.fromarray(BIG[:56, :48])  # 2688 bits: too few for the plain text, enough for gzip
    result = Result(recipe, small, fingerprint(small), ENV)
    with Image.open(save_png(result, tmp_path / "small.png", stealth=True)) as saved:
        signature, text = read_stealth(png(np.asarray(saved)), 10**6)
    assert signature == "stealth_pngcomp" and text.startswith(recipe.prompt)
    tiny = Image.fromarray(RGB[:8, :8])
    with pytest.raises(ValueError, match="stealth_pngcomp: the text needs .* bits and a 8x8 image holds 64"):
        save_png(Result(recipe, tiny, fingerprint(tiny), ENV), tmp_path / "tiny.png", stealth=True)


# --- hostile images: refused quickly, with one line ---


def refused(data: bytes, message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError, match=message) as error:
        read_metadata(data)
    assert time.perf_counter() - start < 2.0
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("signature", list(SIGNATURES))
def test_a_stated_length_past_the_pixels_is_refused(signature):
    refused(png(hide(RGB, signature, b"", stated_bits=2**32 - 8)), f"{signature}: the stated length of "
                                                                   "4,294,967,288 bits does not fit the image")
    truncated = hide(RGB, signature, b"", stated_bits=RGB.shape[0] * RGB.shape[1] * 3 * 8)  # a payload cut short
    refused(png(truncated), "does not fit the image")
    refused(png(hide(RGB, signature, b"abc", stated_bits=23)), "stated length of 23 bits")


def test_a_gzip_bomb_is_refused_after_the_ceiling():
    bomb = gzip.compress(b"\0" * (MAX_PAYLOAD + 4096), compresslevel=9)  # about 16 KB that inflate to 16 MB
    side = int((len(bomb) * 8 + 200) ** 0.5 / 3 ** 0.5) + 2
    pixels = np.zeros((side, side, 3), np.uint8)
    refused(png(hide(pixels, "stealth_rgbcomp", bomb)), "larger than 16,000,000 bytes once uncompressed")


def test_broken_gzip_bad_utf8_and_huge_images_are_refused():
    refused(png(hide(RGB, "stealth_pngcomp", b"not gzip at all")), "stealth_pngcomp: the hidden data is not valid gzip")
    refused(png(hide(RGB, "stealth_pngcomp", gzip.compress(A1111.encode())[:-12])), "gzip data is truncated")
    refused(png(hide(RGB, "stealth_pnginfo", b"\xff\xfe bad")), "stealth_pnginfo: the hidden text is not UTF-8")
    # A PNG whose header claims 20000x20000 pixels and has no text chunk: refused before any decoding.
    header = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(header)) + b"IHDR" + header + struct.pack(">I", zlib.crc32(b"IHDR" + header))
    refused(b"\x89PNG\r\n\x1a\n" + chunk + b"\0\0\0\0IEND\xaeB`\x82", "image is 20000x20000 pixels")
    refused(png(RGB)[:-40], "pixels cannot be read")
