"""Hostile files and texts: every one parses in bounded time and memory or is refused with one line (issue 14)."""

import io
import json
import struct
import time
import zlib

import numpy as np
import pytest
from PIL import Image, PngImagePlugin
from PIL.PngImagePlugin import PngInfo

from seedlab.files.comfyui.reader import read_comfyui
from seedlab.files.infotext import read_infotext
from seedlab.files.metadata import UnreadableImage, read_chunks, read_metadata, recipe_from_reading
from seedlab.serving.reproduction import original_from_png

SMALL = Image.new("RGB", (8, 8), (10, 20, 30))


def png(chunks: dict[str, str], image: Image.Image = SMALL) -> bytes:
    info = PngInfo()
    for key, value in chunks.items():
        info.add_text(key, value)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def one_line_error(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert message and "\n" not in message and "Traceback" not in message and "/tmp" not in message
    return message


def outcome(call):
    """Run `call`: a value or a one-line ValueError, nothing else; returns (seconds, result or message)."""
    start = time.perf_counter()
    try:
        result = call()
    except ValueError as error:
        assert str(error) and "\n" not in str(error)
        result = str(error)
    return time.perf_counter() - start, result


# Long runs of what the old key regex backtracked on; 60 KB is under the text cap, so they are parsed.
RUNS = ["a" + " " * 60_000 + "b", ", " * 30_000, ": " * 30_000, '"' * 60_000, "{" * 60_000, "[" * 60_000,
        "Steps: 1, " * 6_000, "a: " * 20_000 + "b", "x\n" + "Seed: 1, " * 6_000, "<lora:" * 10_000,
        "Steps: 20, Seed: 5, " + "k" * 60_000 + ": v"]


@pytest.mark.parametrize("text", RUNS, ids=range(len(RUNS)))
def test_long_runs_parse_or_are_refused_in_linear_time(text):
    seconds, _ = outcome(lambda: recipe_from_reading(read_chunks({"parameters": text})))
    assert seconds < 1.0  # quadratic work on 60 KB would take minutes (the old regex: 22 s for 345 bytes of PNG)
    seconds, message = outcome(lambda: read_chunks({"parameters": text * 20}))  # over a megabyte
    assert seconds < 0.5 and "characters long" in message


def test_a_png_claiming_100000_by_100000_pixels_is_read_but_never_decoded():
    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    text = b"parameters\0a cat\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 64x64"
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"tEXt", text)
            + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
    assert read_metadata(data).fields["seed"] == 5
    start = time.perf_counter()
    message = one_line_error(lambda: original_from_png(io.BytesIO(data)))
    assert "100000x100000 pixels" in message and time.perf_counter() - start < 1


def test_a_compressed_text_chunk_cannot_inflate_past_the_cap():
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    bomb = b"parameters\0\0" + zlib.compress(b"a" * 50_000_000, 9)  # 50 MB of text in about 50 KB
    data = png({})[:33] + chunk(b"zTXt", bomb) + png({})[33:]
    assert "larger than" in one_line_error(lambda: read_metadata(data))


def test_an_animated_png_is_decoded_one_frame_only(monkeypatch):
    frames = [Image.new("RGB", (64, 64), (i, i, i)) for i in range(120)]
    buffer = io.BytesIO()
    info = PngInfo()
    info.add_text("parameters", "a cat\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 64x64")
    frames[0].save(buffer, format="PNG", save_all=True, append_images=frames[1:], pnginfo=info)
    seen = []
    original_seek = PngImagePlugin.PngImageFile.seek
    monkeypatch.setattr(PngImagePlugin.PngImageFile, "seek",
                        lambda self, frame: (seen.append(frame), original_seek(self, frame))[1])
    original = original_from_png(io.BytesIO(buffer.getvalue()))
    assert original.recipe.seed == 5 and original.pixels.shape == (64, 64, 3)
    assert max(seen, default=0) == 0 and int(original.pixels[0, 0, 0]) == 0


def seedlab_chunk(recipe_json: str) -> bytes:
    return png({"seedlab": '{"version": 1, "recipe": ' + recipe_json + "}"})


def test_deeply_nested_json_is_refused_without_recursion():
    deep = '{"prompt": "x", "seed": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert "nests JSON more than" in one_line_error(lambda: read_metadata(seedlab_chunk(deep)))
    graph = '{"1": ' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "}"
    assert "nests JSON" in one_line_error(lambda: read_comfyui(graph))


def test_lone_surrogates_in_a_seedlab_chunk_are_refused_naming_the_field():
    message = one_line_error(lambda: recipe_from_reading(read_metadata(seedlab_chunk('{"prompt": "a \\ud800 b"}'))))
    assert "prompt must be valid Unicode text (it holds a lone surrogate)" in message


def test_huge_digit_strings_are_refused_without_pythons_int_limit_text():
    message = one_line_error(lambda: read_metadata(seedlab_chunk('{"prompt": "x", "seed": ' + "9" * 5000 + "}")))
    assert "digits" in message and "4300" not in message and "sys.set_int_max_str_digits" not in message
    fields, notes, _ = read_infotext("x\nSteps: 20, Sampler: Euler, Seed: " + "9" * 5000)  # that field, not the file
    assert "seed" not in fields and fields["num_inference_steps"] == 20
    (note,) = [note for note in notes if note.startswith("Seed: 999")]
    assert "could not be read (Seed must be a whole number" in note and "4300" not in note and len(note) < 300


def test_a_comfyui_graph_with_cycles_and_dangling_links_ends():
    graph = {"1": {"class_type": "KSampler", "inputs": {"seed": ["2", 0], "steps": 20, "cfg": 7,
                                                        "sampler_name": "euler", "scheduler": "normal",
                                                        "positive": ["3", 0], "negative": ["9", 0],
                                                        "latent_image": ["1", 0]}},
             "2": {"class_type": "Reroute", "inputs": {"x": ["2", 0]}},
             "3": {"class_type": "ConditioningCombine", "inputs": {"conditioning_1": ["3", 0]}}}
    _, fields, _ = read_comfyui(json.dumps(graph))
    assert fields["num_inference_steps"] == 20 and "prompt" not in fields


@pytest.mark.parametrize("data", [b"", b"GIF89a" + b"\0" * 20, b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff" + b"\0" * 10,
                                  b"RIFF\0\0\0\0WEBPVP8 ", np.random.default_rng(0).bytes(3000)])
def test_garbage_files_are_unreadable_with_one_line(data):
    with pytest.raises(UnreadableImage) as error:
        original_from_png(io.BytesIO(data))
    assert "\n" not in str(error.value)


def test_a_non_image_upload_does_not_show_the_servers_path(tmp_path):
    path = tmp_path / "gradio" / "cache" / "upload.png"
    path.parent.mkdir(parents=True)
    path.write_text("<html>not an image</html>")
    message = one_line_error(lambda: original_from_png(path))
    assert str(tmp_path) not in message and "not a PNG, JPEG or WebP" in message


# -- round 2 (issue 34): bounded however the file is built -------------------------------------------------

def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def test_many_compressed_text_chunks_share_one_ceiling_in_time_and_memory():
    import tracemalloc

    body = zlib.compress(b"a" * 15_000_000, 9)  # 15 MB each, under the per-file ceiling alone
    bombs = b"".join(_chunk(b"zTXt", f"k{i}".encode() + b"\0\0" + body) for i in range(12))
    bombs += b"".join(_chunk(b"iTXt", f"i{i}".encode() + b"\0\1\0\0\0" + body) for i in range(12))
    data = png({})[:33] + bombs + png({})[33:]
    tracemalloc.start()
    try:
        seconds, message = outcome(lambda: read_metadata(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # before: every chunk inflated and kept (24 x 15 MB = 360 MB here; 4.7 GB for 265 chunks of 16 MB)
    assert "once uncompressed" in message and seconds < 5
    assert peak < 100 * 2**20, f"{peak / 2**20:.0f} MB"


def _hub_graph(inputs: int, saves: int) -> dict:
    """A sampler, a hub node with `inputs` links to it, and `saves` SaveImage nodes on the hub (issue 34's attack)."""
    graph = {"1": {"class_type": "KSampler", "inputs": {"seed": 5, "steps": 20, "cfg": 7.0, "sampler_name": "euler",
                                                         "scheduler": "normal"}},
             "2": {"class_type": "Hub", "inputs": {f"in{i}": ["1", 0] for i in range(inputs)}}}
    graph.update({str(3 + i): {"class_type": "SaveImage", "inputs": {"images": ["2", 0]}} for i in range(saves)})
    return graph


def test_a_comfyui_hub_under_a_thousand_save_nodes_is_answered_at_once():
    text = json.dumps(_hub_graph(100_000, 1_000))  # before: 194 s of CPU for this graph
    seconds, message = outcome(lambda: read_metadata(png({"prompt": text})))
    assert seconds < 5 and "100000 inputs" in message, (seconds, message)
    workflow = {"nodes": [{"id": 1, "type": "KSampler", "widgets_values": [5, "fixed", 20, 7, "euler", "normal", 1]},
                          {"id": 2, "type": "Hub", "inputs": [{"name": f"in{i}", "link": 1} for i in range(100_000)]},
                          *({"id": 3 + i, "type": "SaveImage", "inputs": [{"name": "images", "link": 2}]}
                            for i in range(1_000))],
                "links": [[1, 1, 0, 2, 0, "LATENT"], [2, 2, 0, 3, 0, "IMAGE"]]}
    seconds, message = outcome(lambda: read_metadata(png({"workflow": json.dumps(workflow)})))
    assert seconds < 5 and "100000 inputs" in message, (seconds, message)


def test_every_walk_of_a_graph_shares_one_budget():
    # Under the per-node limit, but 4,000 saved images each walking a wide hub that leads to no sampler: each
    # walk looks at 1,999 links (8 million in all before, several seconds); now one budget refuses it at once.
    graph = _hub_graph(1_999, 4_000)
    graph["2"]["inputs"] = {f"in{i}": ["0", 0] for i in range(1_999)}
    graph["0"] = {"class_type": "LoadLatent", "inputs": {"latent": "x.latent"}}
    seconds, message = outcome(lambda: read_comfyui(json.dumps(graph)))
    assert seconds < 1 and "too large to follow" in message, (seconds, message)
    _, fields, _ = read_comfyui(json.dumps(_hub_graph(10, 3)))  # a plain graph still reads
    assert fields["seed"] == 5 and fields["num_inference_steps"] == 20


def test_seedlab_info_answers_a_hostile_file_without_importing_torch(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "hub.png"
    path.write_bytes(png({"prompt": json.dumps(_hub_graph(100_000, 1_000))}))
    probe = ("import runpy, sys\nsys.argv = ['seedlab', 'info', sys.argv[1]]\n"
             "try:\n    runpy.run_module('seedlab', run_name='__main__')\nexcept SystemExit as done:\n"
             "    print('exit', done.code, 'torch' in sys.modules, 'diffusers' in sys.modules)\n")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=120)
    seconds = time.perf_counter() - start
    assert done.stdout.strip() == "exit 2 False False", done.stdout + done.stderr  # before: torch and diffusers
    assert done.stderr.count("\n") == 1 and "100000 inputs" in done.stderr and seconds < 15
