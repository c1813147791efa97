"""ComfyUI's UI workflow (nodes and links, no API prompt graph): read as the API graph it stands for.

The workflows here are written by hand in ComfyUI's documented workflow format: "nodes" with "inputs"
(each with the id of the link into it), "outputs" and "widgets_values" in widget order; "links" as
[link id, from node, from slot, to node, to slot, type]. The first is ComfyUI's default text-to-image graph.
"""

import io
import json

import numpy as np
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from seedlab.files.comfyui.reader import read_comfyui, read_comfyui_workflow
from seedlab.files.metadata import read_metadata, recipe_from_reading

POSITIVE = "beautiful scenery nature glass bottle landscape, , purple galaxy bottle,"


def node(node_id, kind, widgets=None, inputs=(), outputs=()):
    return {"id": node_id, "type": kind, "pos": [0, 0], "size": [300, 100], "flags": {}, "order": 0, "mode": 0,
            "inputs": [{"name": name, "type": kind_, "link": link} for name, kind_, link in inputs],
            "outputs": [{"name": name, "type": name, "links": links, "slot_index": 0} for name, links in outputs],
            "properties": {"Node name for S&R": kind}, "widgets_values": widgets if widgets is not None else []}


DEFAULT = {
    "last_node_id": 9, "last_link_id": 9, "version": 0.4, "groups": [], "config": {}, "extra": {},
    "nodes": [
        node(3, "KSampler", [156680208700286, "randomize", 20, 8, "euler", "normal", 1],
             [("model", "MODEL", 1), ("positive", "CONDITIONING", 4), ("negative", "CONDITIONING", 6),
              ("latent_image", "LATENT", 2)], [("LATENT", [7])]),
        node(4, "CheckpointLoaderSimple", ["v1-5-pruned-emaonly.safetensors"], (),
             [("MODEL", [1]), ("CLIP", [3, 5]), ("VAE", [8])]),
        node(5, "EmptyLatentImage", [512, 768, 1], (), [("LATENT", [2])]),
        node(6, "CLIPTextEncode", [POSITIVE], [("clip", "CLIP", 3)], [("CONDITIONING", [4])]),
        node(7, "CLIPTextEncode", ["text, watermark"], [("clip", "CLIP", 5)], [("CONDITIONING", [6])]),
        node(8, "VAEDecode", [], [("samples", "LATENT", 7), ("vae", "VAE", 8)], [("IMAGE", [9])]),
        node(9, "SaveImage", ["ComfyUI"], [("images", "IMAGE", 9)]),
    ],
    "links": [[1, 4, 0, 3, 0, "MODEL"], [2, 5, 0, 3, 3, "LATENT"], [3, 4, 1, 6, 0, "CLIP"],
              [4, 6, 0, 3, 1, "CONDITIONING"], [5, 4, 1, 7, 0, "CLIP"], [6, 7, 0, 3, 2, "CONDITIONING"],
              [7, 3, 0, 8, 0, "LATENT"], [8, 4, 2, 8, 1, "VAE"], [9, 8, 0, 9, 0, "IMAGE"]],
}
# The same graph as ComfyUI's API format (the `prompt` chunk) writes it.
DEFAULT_API = {
    "3": {"class_type": "KSampler", "inputs": {"seed": 156680208700286, "steps": 20, "cfg": 8, "sampler_name": "euler",
                                               "scheduler": "normal", "denoise": 1, "model": ["4", 0],
                                               "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}},
    "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly.safetensors"}},
    "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 768, "batch_size": 1}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"text": POSITIVE, "clip": ["4", 1]}},
    "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "text, watermark", "clip": ["4", 1]}},
    "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
    "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "ComfyUI", "images": ["8", 0]}},
}
EXPECTED = {"seed": 156680208700286, "num_inference_steps": 20, "guidance_scale": 8,
            "scheduler": "euler", "schedule": "normal", "prompt": POSITIVE, "negative_prompt": "text, watermark",
            "width": 512, "height": 768, "model": "v1-5-pruned-emaonly",
            "prompt_syntax": "comfyui",  # CLIPTextEncode reads the prompts as ComfyUI weighs them
            "to_8bit": "truncate"}  # and SaveImage truncates to 8 bits


def png_with(size=(8, 8), **chunks) -> bytes:
    info = PngInfo()
    for key, value in chunks.items():
        info.add_text(key, json.dumps(value))
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((size[1], size[0], 3), np.uint8)).save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def test_the_default_workflow_reads_as_its_api_graph_does():
    name, fields, notes = read_comfyui_workflow(json.dumps(DEFAULT))
    assert (name, fields, notes) == ("ComfyUI (workflow)", EXPECTED, [])
    assert read_comfyui(json.dumps(DEFAULT_API)) == ("ComfyUI", fields, notes)


def test_a_png_with_only_a_workflow_is_read_and_a_prompt_graph_wins_over_it():
    reading = read_metadata(png_with(workflow=DEFAULT))
    assert reading.format == "ComfyUI (workflow)" and reading.fields == EXPECTED
    recipe = recipe_from_reading(reading)
    assert (recipe.seed, recipe.width, recipe.height, recipe.rng) == (156680208700286, 512, 768, "cpu")
    other = json.loads(json.dumps(DEFAULT_API))
    other["3"]["inputs"]["seed"] = 5
    both = read_metadata(png_with(prompt=other, workflow=DEFAULT))
    assert both.format == "ComfyUI" and both.fields["seed"] == 5


def test_advanced_sampler_primitive_seed_reroutes_and_notes():
    # KSamplerAdvanced whose noise_seed widget was turned into an input fed by a primitive node; the model and
    # the latent pass through reroutes; no "control after generate" value (older workflows); a note on the canvas.
    workflow = {
        "nodes": [
            node(10, "KSamplerAdvanced", ["enable", 1, 30, 6.5, "dpmpp_2m", "karras", 0, 10000, "disable"],
                 [("model", "MODEL", 21), ("positive", "CONDITIONING", 14), ("negative", "CONDITIONING", 15),
                  ("latent_image", "LATENT", 22), ("noise_seed", "INT", 16)]),
            node(11, "CheckpointLoaderSimple", ["sdxl/juggernaut.safetensors"]),
            node(12, "CLIPTextEncode", ["a lighthouse"], [("clip", "CLIP", 17)]),
            node(13, "CLIPTextEncode", ["blurry"], [("clip", "CLIP", 18)]),
            node(20, "PrimitiveNode", [987654321, "fixed"]),
            node(30, "Reroute", [], [("", "*", 19)]),
            node(31, "Reroute", [], [("", "*", 20)]),
            node(32, "EmptyLatentImage", [1024, 1024, 1]),
            node(33, "Note", ["remember to upscale"]),
            node(34, "SaveImage", ["x"], [("images", "IMAGE", 23)]),
            node(35, "VAEDecode", [], [("samples", "LATENT", 24)]),
        ],
        "links": [[14, 12, 0, 10, 1, "CONDITIONING"], [15, 13, 0, 10, 2, "CONDITIONING"], [16, 20, 0, 10, 4, "INT"],
                  [17, 11, 1, 12, 0, "CLIP"], [18, 11, 1, 13, 0, "CLIP"], [19, 11, 0, 30, 0, "MODEL"],
                  [20, 32, 0, 31, 0, "LATENT"], [21, 30, 0, 10, 0, "MODEL"], [22, 31, 0, 10, 3, "LATENT"],
                  [23, 35, 0, 34, 0, "IMAGE"], [24, 10, 0, 35, 0, "LATENT"]],
    }
    _, fields, notes = read_comfyui_workflow(json.dumps(workflow))
    assert fields == {"seed": 987654321, "num_inference_steps": 30, "guidance_scale": 6.5,
                      "scheduler": "dpmpp_2m", "schedule": "karras", "prompt": "a lighthouse",
                      "negative_prompt": "blurry", "width": 1024, "height": 1024, "model": "sdxl/juggernaut",
                      "prompt_syntax": "comfyui", "to_8bit": "truncate"}
    assert not any("karras" in note for note in notes)  # ComfyUI's sampler and scheduler, run as ComfyUI runs them
    assert not any("Note" in note or "Reroute" in note for note in notes)


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        ({"nodes": "x"}, "not a ComfyUI workflow"),
        ({"nodes": [node(1, "CheckpointLoaderSimple", ["m.safetensors"])], "links": []}, "no sampler node"),
        ({"nodes": [node(i, "Reroute") for i in range(5001)], "links": []}, "at most 5000 and 50000 are read"),
    ],
)
def test_bad_workflows_are_refused_with_one_line(workflow, message):
    with pytest.raises(ValueError, match=message):
        read_comfyui_workflow(json.dumps(workflow))


def test_cyclic_reroutes_and_dangling_links_end():
    workflow = json.loads(json.dumps(DEFAULT))
    workflow["nodes"] += [node(40, "Reroute", [], [("", "*", 41)]), node(41, "Reroute", [], [("", "*", 40)])]
    workflow["links"] += [[40, 40, 0, 41, 0, "*"], [41, 41, 0, 40, 0, "*"]]
    workflow["nodes"][0]["inputs"][0]["link"] = 40  # the model through a reroute loop
    workflow["nodes"][0]["inputs"][3]["link"] = 999  # the latent through a link that is not there
    _, fields, _ = read_comfyui_workflow(json.dumps(workflow))
    assert "model" not in fields and "width" not in fields and fields["seed"] == 156680208700286


def test_a_basic_guider_passes_its_conditioning_as_the_prompt():
    # Flux's usual graph: SamplerCustomAdvanced guided by BasicGuider(conditioning) through FluxGuidance.
    graph = {
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": POSITIVE, "clip": ["11", 0]}},
        "13": {"class_type": "SamplerCustomAdvanced", "inputs": {"noise": ["25", 0], "guider": ["22", 0],
                                                                 "sampler": ["16", 0], "sigmas": ["17", 0],
                                                                 "latent_image": ["27", 0]}},
        "16": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
        "17": {"class_type": "BasicScheduler", "inputs": {"scheduler": "simple", "steps": 20, "denoise": 1.0,
                                                          "model": ["12", 0]}},
        "22": {"class_type": "BasicGuider", "inputs": {"model": ["12", 0], "conditioning": ["26", 0]}},
        "25": {"class_type": "RandomNoise", "inputs": {"noise_seed": 219670278747233}},
        "26": {"class_type": "FluxGuidance", "inputs": {"guidance": 3.5, "conditioning": ["6", 0]}},
        "27": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 1024, "height": 768, "batch_size": 1}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["13", 0], "vae": ["10", 0]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "ComfyUI", "images": ["8", 0]}},
    }
    _, fields, _ = read_comfyui(json.dumps(graph))
    assert fields["prompt"] == POSITIVE and "negative_prompt" not in fields and "guidance_scale" not in fields
    assert (fields["seed"], fields["num_inference_steps"], fields["width"], fields["height"]) == (219670278747233, 20,
                                                                                                   1024, 768)


def test_an_sd3_empty_latent_in_a_workflow_gives_the_size():
    workflow = json.loads(json.dumps(DEFAULT))
    workflow["nodes"][2] = node(5, "EmptySD3LatentImage", [1024, 1024, 1], (), [("LATENT", [2])])
    _, fields, _ = read_comfyui_workflow(json.dumps(workflow))
    assert (fields["width"], fields["height"]) == (1024, 1024)


@pytest.mark.parametrize("kind, widgets, size", [
    ("EmptyLatentImageFromPresetsSDXL", [" 832 x 1216", 1], (832, 1216)),  # Inspire Pack
    ("EmptyLatentImageFromPresetsSD15", ["512 x 768", 1], (512, 768)),
    ("SDXLEmptyLatentSizePicker+", ["1024x1024 (1.0)", 1, 0, 0], (1024, 1024)),  # Essentials: 0 keeps the preset
    ("SDXLEmptyLatentSizePicker+", ["1024x1024 (1.0)", 1, 640, 896], (640, 896)),  # ... its overrides win
])
def test_a_size_preset_node_gives_the_size(kind, widgets, size):
    workflow = json.loads(json.dumps(DEFAULT))
    workflow["nodes"][2] = node(5, kind, widgets, (), [("LATENT", [2])])
    _, fields, _ = read_comfyui_workflow(json.dumps(workflow))
    assert (fields["width"], fields["height"]) == size
    graph = json.loads(json.dumps(DEFAULT_API))  # the API graph names the preset input
    graph["5"] = {"class_type": kind, "inputs": {"preset": widgets[0], "batch_size": 1}}
    _, fields, _ = read_comfyui(json.dumps(graph))
    assert (fields["width"], fields["height"]) == (size if kind != "SDXLEmptyLatentSizePicker+" or not widgets[2]
                                                   else (1024, 1024))


def test_a_preset_that_is_not_a_size_gives_none():
    graph = json.loads(json.dumps(DEFAULT_API))
    graph["5"] = {"class_type": "EmptyLatentImageFromPresetsSDXL", "inputs": {"preset": "Custom", "batch_size": 1}}
    _, fields, _ = read_comfyui(json.dumps(graph))
    assert "width" not in fields and "height" not in fields


def test_lora_loaders_on_the_model_chain_become_the_loras_field_in_the_order_comfyui_applies_them():
    graph = json.loads(json.dumps(DEFAULT_API))
    graph["10"] = {"class_type": "LoraLoader", "inputs": {"model": ["4", 0], "clip": ["4", 1], "strength_model": 0.8,
                                                          "lora_name": "styles\\ink.safetensors", "strength_clip": 1}}
    graph["11"] = {"class_type": "ModelSamplingDiscrete", "inputs": {"model": ["10", 0], "sampling": "eps"}}
    graph["12"] = {"class_type": "LoraLoaderModelOnly", "inputs": {"model": ["11", 0],
                                                                   "lora_name": "detail.safetensors",
                                                                   "strength_model": -0.5}}
    graph["13"] = {"class_type": "LoraLoader", "inputs": {"model": ["12", 0], "clip": ["10", 1], "strength_model": 0,
                                                          "lora_name": "off.safetensors", "strength_clip": 0}}
    graph["3"]["inputs"]["model"] = ["13", 0]
    _, fields, notes = read_comfyui(json.dumps(graph))
    assert fields["loras"] == "<lora:ink:1:0.8> <lora:detail:0:-0.5>"  # <lora:NAME:CLIP:MODEL>; strength 0 left out
    assert not any("Lora" in note for note in notes)
    graph["12"]["inputs"].update(lora_name="a<b>:c.safetensors", strength_model=200)
    _, fields, notes = read_comfyui(json.dumps(graph))
    assert fields["loras"] == "<lora:ink:1:0.8>"
    assert any(note.startswith("LoRA loader 'a<b>:c.safetensors' with strengths (0.0, 200) cannot be restored")
               for note in notes)


def two_pass(upscale: dict, second: dict | None = None) -> dict:
    """ComfyUI's hires fix graph: the default graph's KSampler, a latent upscale, a second KSampler, then decode."""
    graph, upscale = json.loads(json.dumps(DEFAULT_API)), dict(upscale)
    graph["10"] = {"class_type": upscale.pop("class_type", "LatentUpscaleBy"),
                   "inputs": {"samples": ["3", 0], **upscale}}
    graph["11"] = {"class_type": "KSampler", "inputs": {**graph["3"]["inputs"], "latent_image": ["10", 0],
                                                        "denoise": 0.5, **(second or {})}}
    graph["8"]["inputs"]["samples"] = ["11", 0]
    return graph


@pytest.mark.parametrize("upscale, second, hires", [
    ({"upscale_method": "nearest-exact", "scale_by": 1.5}, {},
     {"hires_scale": 1.5, "hires_upscaler": "nearest-exact", "denoising_strength": 0.5, "hires_steps": 0,
      "hires_sampler": "", "hires_schedule": "", "hires_cfg": 0.0, "hires_seed": -1}),
    ({"class_type": "LatentUpscale", "upscale_method": "bicubic", "width": 1024, "height": 1536, "crop": "disabled"},
     {"seed": 7, "steps": 12, "cfg": 5.5, "sampler_name": "dpmpp_2m", "scheduler": "karras", "denoise": 0.45},
     {"hires_scale": 2.0, "hires_upscaler": "bicubic", "denoising_strength": 0.45, "hires_steps": 12,
      "hires_sampler": "dpmpp_2m", "hires_schedule": "karras", "hires_cfg": 5.5, "hires_seed": 7}),
    ({"upscale_method": "bislerp", "scale_by": 2}, {},
     {"hires_scale": 2.0, "hires_upscaler": "bislerp", "denoising_strength": 0.5, "hires_steps": 0,
      "hires_sampler": "", "hires_schedule": "", "hires_cfg": 0.0, "hires_seed": -1}),
])
def test_a_two_pass_graph_reads_as_hires_fix(upscale, second, hires):
    _, fields, notes = read_comfyui(json.dumps(two_pass(upscale, second)))
    assert {name: fields[name] for name in hires} == hires
    assert {name: fields[name] for name in EXPECTED} == EXPECTED  # the first pass as before
    assert not any("pass" in note for note in notes), notes
    recipe = recipe_from_reading(read_metadata(png_with(prompt=two_pass(upscale, second))))
    assert recipe.hires_size == (int(512 * hires["hires_scale"]), int(768 * hires["hires_scale"]))


@pytest.mark.parametrize("upscale, second, why", [
    ({"upscale_method": "lanczos", "scale_by": 1.5}, {}, "upscale method lanczos is not one SeedLab runs"),
    ({"upscale_method": "bilinear", "scale_by": 1.3}, {}, "no one factor from 1 to 4 turns 512x768 into"),
    ({"class_type": "LatentUpscale", "upscale_method": "area", "width": 1024, "height": 1024, "crop": "disabled"}, {},
     "no one factor"),
    ({"upscale_method": "bilinear", "scale_by": 2}, {"positive": ["7", 0]}, "its own prompt"),
    ({"upscale_method": "bilinear", "scale_by": 2}, {"sampler_name": "a_custom_nodes_sampler"}, "not one of ComfyUI's"),
])
def test_a_second_pass_that_is_not_hires_fix_keeps_its_note_and_says_why(upscale, second, why):
    _, fields, notes = read_comfyui(json.dumps(two_pass(upscale, second)))
    assert "hires_scale" not in fields
    assert any(note.startswith("the graph's second pass (node 11) is not restored as hires fix: ") and why in note
               for note in notes), notes
    assert any(note.startswith("the graph has 2 sampling passes") for note in notes)


@pytest.mark.parametrize("advanced, steps_run, said", [
    ({"start_at_step": 0, "end_at_step": 10000}, {}, []),
    ({"start_at_step": 3, "end_at_step": 15}, {"start_step": 3, "end_step": 15}, []),
    ({"start_at_step": 0, "end_at_step": 15, "return_with_leftover_noise": "enable"}, {"end_step": 15},
     ["stops at step 15 of 20 with its leftover noise"]),
    ({"add_noise": "disable", "start_at_step": 12}, {"start_step": 12}, ["adds no noise"]),
    ({"start_at_step": "3"}, {}, ["are not both numbers"]),
])
def test_ksampler_advanced_reads_its_start_and_end_steps(advanced, steps_run, said):
    graph = json.loads(json.dumps(DEFAULT_API))
    inputs = {key: value for key, value in graph["3"]["inputs"].items() if key not in ("seed", "denoise")}
    graph["3"] = {"class_type": "KSamplerAdvanced",
                  "inputs": {**inputs, "noise_seed": 8, "steps": 20, "add_noise": "enable", "start_at_step": 0,
                             "end_at_step": 10000, "return_with_leftover_noise": "disable", **advanced}}
    _, fields, notes = read_comfyui(json.dumps(graph))
    assert {name: fields[name] for name in ("start_step", "end_step") if name in fields} == steps_run
    assert fields["seed"] == 8 and fields["num_inference_steps"] == 20
    for text in said:
        assert any(text in note for note in notes), notes
    assert not [note for note in notes if "KSamplerAdvanced" in note or "noise" in note][len(said):], notes
    recipe = recipe_from_reading(read_metadata(png_with(prompt=graph)))
    assert (recipe.start_step, recipe.end_step) == (steps_run.get("start_step", 0), steps_run.get("end_step", 0))


def test_of_a_graph_saving_both_passes_the_file_s_own_size_picks_the_pass():
    graph = two_pass({"upscale_method": "bilinear", "scale_by": 2})
    graph["20"] = {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}}
    graph["21"] = {"class_type": "SaveImage", "inputs": {"images": ["20", 0], "filename_prefix": "first"}}
    saved_first = {"21": graph["21"], **{key: node for key, node in graph.items() if key != "21"}}  # listed first
    for order in (graph, saved_first):
        hires = read_metadata(png_with(size=(1024, 1536), prompt=order))
        assert hires.fields["hires_scale"] == 2.0 and hires.fields["seed"] == EXPECTED["seed"]
        assert any("saves images from 2 different sampling passes: the one of this file's size (1024x1536)" in note
                   for note in hires.notes), hires.notes
        first = read_metadata(png_with(size=(512, 768), prompt=order))
        assert "hires_scale" not in first.fields and first.fields["width"] == 512
        assert not any("is not restored" in note or "later passes" in note for note in first.notes), first.notes
    other = read_metadata(png_with(size=(64, 64), prompt=saved_first))  # neither: the first saved image, said so
    assert "hires_scale" not in other.fields
    assert any("the first one saved (none is this file's size, 64x64)" in note for note in other.notes), other.notes
