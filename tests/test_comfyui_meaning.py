"""ComfyUI graphs read by meaning: custom loaders, pipes, concatenation, group nodes and unknown node packs.

Each graph is an API `prompt` graph in the shape the node pack writes (input names from the packs' own node
definitions: Efficiency Nodes, tinyterra, Impact Pack, Easy-Use, WAS, Comfyroll). The last ones use class names no
pack has, with ComfyUI's standard input names: what a node pack never seen before gives.
"""

import json

import pytest

from seedlab.files.comfyui.reader import read_comfyui

POS, NEG = "a lighthouse on a cliff, storm", "blurry, lowres"


def read(graph, size=None):
    return read_comfyui(json.dumps(graph), size)


def save(images):
    return {"90": {"class_type": "VAEDecode", "inputs": {"samples": images, "vae": ["1", 2]}},
            "91": {"class_type": "SaveImage", "inputs": {"images": ["90", 0], "filename_prefix": "x"}}}


EFFICIENT = {  # Efficiency Nodes: the loader encodes its own prompts and makes the latent; outputs 1, 2 are +/-
    "1": {"class_type": "Efficient Loader", "inputs": {
        "ckpt_name": "dreamshaper_8.safetensors", "vae_name": "Baked VAE", "clip_skip": -2, "lora_name": "None",
        "lora_model_strength": 1, "lora_clip_strength": 1, "positive": POS, "negative": NEG,
        "token_normalization": "none", "weight_interpretation": "comfy", "empty_latent_width": 512,
        "empty_latent_height": 768, "batch_size": 1}},
    "2": {"class_type": "KSampler (Efficient)", "inputs": {
        "seed": 1234, "steps": 25, "cfg": 6.5, "sampler_name": "dpmpp_2m", "scheduler": "karras", "denoise": 1,
        "preview_method": "auto", "vae_decode": "true", "model": ["1", 0], "positive": ["1", 1],
        "negative": ["1", 2], "latent_image": ["1", 3], "optional_vae": ["1", 4]}},
    "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 5], "filename_prefix": "eff"}},
}
TINYTERRA = {  # tinyterra: the loader holds prompts, size and seed; the sampler takes the pipe
    "1": {"class_type": "ttN pipeLoader", "inputs": {
        "ckpt_name": "sd15.safetensors", "config_name": "Default", "vae_name": "Baked VAE", "clip_skip": -1,
        "lora1_name": "None", "positive": POS, "positive_token_normalization": "none",
        "positive_weight_interpretation": "comfy", "negative": NEG, "negative_token_normalization": "none",
        "negative_weight_interpretation": "comfy", "empty_latent_width": 640, "empty_latent_height": 448,
        "batch_size": 1, "seed": 777}},
    "2": {"class_type": "ttN pipeKSampler", "inputs": {
        "pipe": ["1", 0], "lora_name": "None", "upscale_method": "None", "factor": 2, "crop": "disabled",
        "sampler_state": "Sample", "steps": 30, "cfg": 7, "sampler_name": "euler_ancestral", "scheduler": "normal",
        "denoise": 1, "image_output": "Save", "save_prefix": "ttn"}},
}
EASY_USE = {  # Easy-Use: loader (prompts, size preset), preSampling (seed, steps, ...), kSampler (decode and save)
    "1": {"class_type": "easy fullLoader", "inputs": {
        "ckpt_name": "sdxl_base.safetensors", "config_name": "Default", "vae_name": "Baked VAE", "clip_skip": -2,
        "lora_name": "None", "resolution": "832 x 1216", "empty_latent_width": 512, "empty_latent_height": 512,
        "positive": POS, "positive_token_normalization": "none", "negative": NEG, "batch_size": 1}},
    "2": {"class_type": "easy preSampling", "inputs": {
        "pipe": ["1", 0], "steps": 20, "cfg": 5, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
        "seed": 99}},
    "3": {"class_type": "easy kSampler", "inputs": {
        "pipe": ["2", 0], "image_output": "Preview", "link_id": 0, "save_prefix": "ComfyUI"}},
}
IMPACT = {  # Impact Pack: a basic pipe bundles model, clip, vae and both conditionings
    "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd15.safetensors"}},
    "4": {"class_type": "CLIPTextEncode", "inputs": {"text": NEG, "clip": ["1", 1]}},
    "5": {"class_type": "CLIPTextEncode", "inputs": {"text": POS, "clip": ["1", 1]}},
    "6": {"class_type": "ToBasicPipe", "inputs": {"model": ["1", 0], "clip": ["1", 1], "vae": ["1", 2],
                                                 "positive": ["5", 0], "negative": ["4", 0]}},
    "7": {"class_type": "EmptyLatentImage", "inputs": {"width": 768, "height": 512, "batch_size": 1}},
    "8": {"class_type": "ImpactKSamplerBasicPipe", "inputs": {
        "basic_pipe": ["6", 0], "seed": 5, "steps": 12, "cfg": 8, "sampler_name": "euler", "scheduler": "normal",
        "latent_image": ["7", 0], "denoise": 1}},
    **save(["8", 1]),
}


@pytest.mark.parametrize("graph, expected", [
    (EFFICIENT, {"seed": 1234, "num_inference_steps": 25, "guidance_scale": 6.5, "width": 512, "height": 768,
                 "model": "dreamshaper_8"}),
    (TINYTERRA, {"seed": 777, "num_inference_steps": 30, "guidance_scale": 7, "width": 640, "height": 448,
                 "model": "sd15", "scheduler": "euler_ancestral"}),
    (EASY_USE, {"seed": 99, "num_inference_steps": 20, "guidance_scale": 5, "width": 832, "height": 1216,
                "model": "sdxl_base", "scheduler": "euler"}),
    (IMPACT, {"seed": 5, "num_inference_steps": 12, "guidance_scale": 8, "width": 768, "height": 512}),
], ids=["efficient-loader", "ttn-pipe", "easy-use-pipe", "impact-basic-pipe"])
def test_custom_loaders_and_pipes_give_every_field_with_prompts_in_their_roles(graph, expected):
    _, fields, _ = read(graph)
    assert {name: fields.get(name) for name in expected} == expected
    assert (fields.get("prompt"), fields.get("negative_prompt")) == (POS, NEG)


def test_a_controlnet_between_encoders_and_sampler_keeps_each_prompt_in_its_role():
    graph = {**IMPACT, "8": {"class_type": "KSampler", "inputs": {
        "seed": 5, "steps": 12, "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
        "model": ["1", 0], "positive": ["9", 0], "negative": ["9", 1], "latent_image": ["7", 0]}},
        "9": {"class_type": "ControlNetApplyAdvanced", "inputs": {
            "positive": ["5", 0], "negative": ["4", 0], "control_net": ["10", 0], "image": ["11", 0],
            "strength": 1, "start_percent": 0, "end_percent": 1}},
        "10": {"class_type": "ControlNetLoader", "inputs": {"control_net_name": "canny.safetensors"}},
        "11": {"class_type": "LoadImage", "inputs": {"image": "edges.png"}}}
    _, fields, notes = read(graph)
    assert (fields["prompt"], fields["negative_prompt"]) == (POS, NEG)
    assert not any("combines several prompts" in note for note in notes)


def concatenated(kind, inputs):
    graph = json.loads(json.dumps(IMPACT))
    graph["20"] = {"class_type": kind, "inputs": inputs}
    graph["5"]["inputs"]["text"] = ["20", 0]
    return graph


@pytest.mark.parametrize("kind, inputs, expected", [
    ("StringConcatenate", {"string_a": "a lighthouse", "string_b": "storm", "delimiter": ", "},
     "a lighthouse, storm"),
    ("StringConcatenate", {"string_a": "a lighthouse", "string_b": "", "delimiter": ", "}, "a lighthouse, "),
    ("Text Concatenate", {"delimiter": ", ", "clean_whitespace": "true", "text_a": " a lighthouse ",
                          "text_b": "", "text_c": ["21", 0]}, "a lighthouse, storm at night"),
    ("CR Text Concatenate", {"text1": "a lighthouse", "text2": ["21", 0], "separator": " | "},
     "a lighthouse | storm at night"),
], ids=["comfy", "comfy-empty-part", "was-clean", "comfyroll"])
def test_a_prompt_built_by_concatenating_constants_is_the_joined_text(kind, inputs, expected):
    graph = concatenated(kind, inputs)
    graph["21"] = {"class_type": "Text Multiline", "inputs": {"text": "storm at night"}}
    _, fields, _ = read(graph)
    assert fields["prompt"] == expected and fields["negative_prompt"] == NEG


def test_a_concatenation_with_a_part_that_is_not_a_constant_gives_no_prompt():
    graph = concatenated("StringConcatenate", {"string_a": "a", "string_b": ["22", 0], "delimiter": ""})
    graph["22"] = {"class_type": "LLMGenerate", "inputs": {"instruction": "write", "model": ["1", 0], "seed": 3}}
    _, fields, _ = read(graph)
    assert "prompt" not in fields and fields["negative_prompt"] == NEG


UNKNOWN = {  # class names no node pack has; ComfyUI's own input names
    "1": {"class_type": "Zq Loader ✨", "inputs": {
        "ckpt_name": "mystery.safetensors", "positive": POS, "negative": NEG, "width": 896, "height": 640}},
    "2": {"class_type": "ZqSeed", "inputs": {"seed": 424242}},
    "3": {"class_type": "Zq Magic Sampler", "inputs": {
        "model": ["1", 0], "positive": ["1", 1], "negative": ["1", 2], "latent_image": ["1", 3],
        "seed": ["2", 0], "steps": 18, "cfg": 4.5, "sampler_name": "dpmpp_2m", "scheduler": "karras"}},
    **save(["3", 0]),
}


def test_an_unknown_node_pack_with_standard_input_names_gives_prompt_seed_and_size():
    _, fields, notes = read(UNKNOWN)
    assert {name: fields.get(name) for name in ("prompt", "negative_prompt", "seed", "num_inference_steps",
                                                "guidance_scale", "width", "height", "model")} == {
        "prompt": POS, "negative_prompt": NEG, "seed": 424242, "num_inference_steps": 18, "guidance_scale": 4.5,
        "width": 896, "height": 640, "model": "mystery"}
    assert any("Zq Magic Sampler" in note for note in notes)  # named as a node SeedLab does not reproduce


def test_group_node_ids_and_a_pipe_from_the_first_pass_read_the_first_pass():
    """A group node's inner nodes come as "12:0", "12:1" in the API graph; a second custom sampler refines the
    first through its pipe: the first pass is restored, the second named."""
    graph = {f"12:{key}": {"class_type": node["class_type"], "inputs": {
        name: [f"12:{value[0]}", value[1]] if isinstance(value, list) else value
        for name, value in node["inputs"].items()}} for key, node in TINYTERRA.items()}
    graph["12:3"] = {"class_type": "ttN pipeKSampler", "inputs": {
        **TINYTERRA["2"]["inputs"], "pipe": ["12:2", 0], "steps": 10, "denoise": 0.5, "seed": 8}}
    graph["12:4"] = {"class_type": "SaveImage", "inputs": {"images": ["12:3", 2], "filename_prefix": "x"}}
    _, fields, notes = read(graph)
    assert (fields["seed"], fields["num_inference_steps"], fields["prompt"]) == (777, 30, POS)
    assert any("2 sampling passes" in note for note in notes)


def test_a_settings_node_that_feeds_a_sampler_is_not_taken_for_a_sampling_pass():
    graph = json.loads(json.dumps(UNKNOWN))
    graph["4"] = {"class_type": "KSampler Config (rgthree)", "inputs": {
        "steps_total": 30, "refiner_step": 24, "cfg": 4.5, "sampler_name": "euler", "scheduler": "normal"}}
    graph["3"]["inputs"]["steps"] = ["4", 0]  # its STEPS output: steps_total
    _, fields, notes = read(graph)
    assert fields["num_inference_steps"] == 30 and fields["prompt"] == POS
    assert not any("sampling passes" in note for note in notes)


def test_a_ui_workflow_names_an_unknown_nodes_values_by_the_widget_inputs_it_lists():
    """Newer ComfyUI frontends list every widget among a node's inputs ({"name", "widget": {"name"}, "link"}):
    an unknown sampler's and loader's values are named by them, the seed's "control after generate" skipped."""
    from seedlab.files.comfyui.reader import read_comfyui_workflow

    def widget(name, link=None):
        return {"name": name, "type": "INT", "widget": {"name": name}, "link": link}

    def node(node_id, kind, slots, values):
        return {"id": node_id, "type": kind, "inputs": slots, "outputs": [], "widgets_values": values}

    workflow = {"nodes": [
        node(1, "Zq Loader", [widget("ckpt_name"), widget("positive"), widget("negative"), widget("width"),
                              widget("height")], ["mystery.safetensors", POS, NEG, 896, 640]),
        node(3, "Zq Magic Sampler", [
            {"name": "model", "type": "MODEL", "link": 1}, {"name": "positive", "type": "CONDITIONING", "link": 2},
            {"name": "negative", "type": "CONDITIONING", "link": 3}, {"name": "latent_image", "type": "LATENT",
                                                                       "link": 4},
            widget("seed"), widget("steps"), widget("cfg"), widget("sampler_name"), widget("scheduler")],
            [424242, "randomize", 18, 4.5, "dpmpp_2m", "karras"]),
        node(9, "SaveImage", [{"name": "images", "type": "IMAGE", "link": 5}], ["x"]),
    ], "links": [[1, 1, 0, 3, 0, "MODEL"], [2, 1, 1, 3, 1, "CONDITIONING"], [3, 1, 2, 3, 2, "CONDITIONING"],
                 [4, 1, 3, 3, 3, "LATENT"], [5, 3, 0, 9, 0, "IMAGE"]]}
    _, fields, _ = read_comfyui_workflow(json.dumps(workflow))
    assert {name: fields.get(name) for name in ("prompt", "negative_prompt", "seed", "num_inference_steps",
                                                "guidance_scale", "width", "height")} == {
        "prompt": POS, "negative_prompt": NEG, "seed": 424242, "num_inference_steps": 18, "guidance_scale": 4.5,
        "width": 896, "height": 640}


CONTEXT = {  # rgthree's Context: one bundle carried from node to node, each adding what it sets
    "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "juggernaut.safetensors"}},
    "2": {"class_type": "Seed (rgthree)", "inputs": {"seed": 8837}},
    "3": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 640, "batch_size": 1}},
    "4": {"class_type": "Context (rgthree)", "inputs": {"model": ["1", 0], "clip": ["1", 1], "vae": ["1", 2],
                                                       "latent": ["3", 0], "seed": ["2", 0]}},
    "5": {"class_type": "CLIPTextEncode", "inputs": {"text": POS, "clip": ["4", 2]}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"text": NEG, "clip": ["4", 2]}},
    "7": {"class_type": "Context (rgthree)", "inputs": {"base_ctx": ["4", 0], "positive": ["5", 0],
                                                       "negative": ["6", 0]}},
    "8": {"class_type": "Context (rgthree)", "inputs": {"base_ctx": ["7", 0]}},
    "9": {"class_type": "KSampler", "inputs": {
        "seed": ["8", 8], "steps": 25, "cfg": 3, "sampler_name": "dpmpp_2m", "scheduler": "karras", "denoise": 1,
        "model": ["8", 1], "positive": ["8", 4], "negative": ["8", 5], "latent_image": ["8", 6]}},
    **save(["9", 0]),
}


def test_values_carried_in_a_context_or_pipe_come_from_the_node_that_put_them_there():
    _, fields, _ = read(CONTEXT)
    assert (fields["seed"], fields["width"], fields["height"], fields["prompt"], fields["negative_prompt"]) == (
        8837, 512, 640, POS, NEG)
    graph = {**IMPACT, "8": {"class_type": "KSampler", "inputs": {  # Impact's FromBasicPipe outputs
        "seed": 5, "steps": 12, "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
        "model": ["12", 0], "positive": ["12", 3], "negative": ["12", 4], "latent_image": ["7", 0]}},
        "12": {"class_type": "FromBasicPipe", "inputs": {"basic_pipe": ["6", 0]}}}
    _, fields, _ = read(graph)
    assert (fields["prompt"], fields["negative_prompt"]) == (POS, NEG)


def test_a_settings_node_with_steps_and_a_seed_gives_its_size_preset_and_nan_widgets_are_read_as_unset():
    """Searge's generation parameters hold seed, steps, cfg and an "image_size_preset" that wins over its own
    width and height; ComfyUI writes NaN (Python's json) where a widget had no number."""
    graph = {"1": {"class_type": "SeargeGenerationParameters", "inputs": {
        "seed": 564, "image_size_preset": "1344x768 (16:9)", "image_width": 1024, "image_height": 1024,
        "steps": 30, "cfg": 5, "sampler_name": "dpmpp_2m", "scheduler": "karras", "tile_width": 256,
        "data": ["2", 0]}},
        "2": {"class_type": "SeargeOperatingMode", "inputs": {"workflow_mode": "text-to-image", "strength": "NAN"}}}
    text = json.dumps(graph).replace('"NAN"', "NaN")
    _, fields, _ = read_comfyui(text)
    assert (fields["seed"], fields["num_inference_steps"], fields["width"], fields["height"]) == (564, 30, 1344, 768)


@pytest.mark.parametrize("switch, first, second", [
    ({"class_type": "Switch conditioning [Crystools]", "inputs": {"on_true": ["4", 0], "on_false": ["5", 0],
                                                                 "boolean": True}}, NEG, POS),
    ({"class_type": "ImpactSwitch", "inputs": {"select": 1, "input1": ["4", 0], "input2": ["5", 0],
                                               "sel_mode": False}}, NEG, POS),
    ({"class_type": "Any Switch (rgthree)", "inputs": {"any_02": ["4", 0]}}, NEG, NEG),
], ids=["boolean", "select", "first-linked"])
def test_a_switch_gives_the_input_comfyui_runs(switch, first, second):
    """The negative prompt's encoder (node 4) or the positive's (node 5), chosen by the switch's setting."""
    graph = json.loads(json.dumps(IMPACT))
    graph["30"] = switch
    graph["6"]["inputs"]["negative"] = ["30", 0]
    _, fields, _ = read(graph)
    assert (fields["prompt"], fields["negative_prompt"]) == (POS, first)
    graph["30"]["inputs"].update({"boolean": False} if "boolean" in switch["inputs"] else
                                 {"select": 2} if "select" in switch["inputs"] else {})
    _, fields, _ = read(graph)
    assert fields["negative_prompt"] == second


def test_hostile_graphs_of_nested_concatenations_contexts_and_switches_are_read_quickly():
    """A hang guard (not a speed target): each walk is bounded, so these end at once with nothing read."""
    import time
    graph = {"s": {"class_type": "KSampler", "inputs": {
        "seed": ["x0", 8], "steps": 2, "cfg": 1, "positive": ["e", 0], "negative": ["x0", 5],
        "latent_image": ["w0", 6]}}, "e": {"class_type": "CLIPTextEncode", "inputs": {"text": ["c0", 0]}}}
    for level in range(50):  # every part of every concatenation is the next one: 8**50 texts if unbounded
        graph[f"c{level}"] = {"class_type": "StringConcatenate", "inputs": {
            **{f"text_{chr(97 + k)}": [f"c{level + 1}", 0] for k in range(8)}, "delimiter": ","}}
    for hop in range(2400):  # contexts searched upstream at each hop; switches whose settings are switches
        graph[f"x{hop}"] = {"class_type": "Context", "inputs": {"base_ctx": [f"x{hop + 1}", 0],
                                                                "o": [f"x{hop + 1}", 1]}}
        graph[f"w{hop}"] = {"class_type": "Switch", "inputs": {"on_true": [f"w{hop + 1}", 0],
                                                               "on_false": [f"w{hop + 1}", 0],
                                                               "boolean": [f"w{hop + 1}", 0]}}
    started = time.perf_counter()
    _, fields, _ = read(graph)
    assert time.perf_counter() - started < 10 and "prompt" not in fields and "seed" not in fields


def test_searge_names_and_a_size_computed_from_a_preset_by_the_node_that_gives_width_and_height():
    graph = {
        "1": {"class_type": "CR SDXL Aspect Ratio", "inputs": {
            "width": 1024, "height": 1024, "aspect_ratio": "3:4 portrait 896x1152", "swap_dimensions": "Off",
            "upscale_factor": 1, "batch_size": 1}},
        "2": {"class_type": "EmptyLatentImage", "inputs": {"width": ["1", 0], "height": ["1", 1], "batch_size": 1}},
        "3": {"class_type": "SeargePromptText", "inputs": {"prompt": POS}},
        "4": {"class_type": "SeargePromptText", "inputs": {"prompt": NEG}},
        "5": {"class_type": "SeargeSDXLPromptEncoder", "inputs": {
            "pos_g": ["3", 0], "pos_l": ["3", 0], "neg_g": ["4", 0], "neg_l": ["4", 0], "base_clip": ["9", 1]}},
        "6": {"class_type": "SeargeSDXLSampler2", "inputs": {
            "noise_seed": 31, "steps": 20, "cfg": 7, "base_model": ["9", 0], "base_positive": ["5", 0],
            "base_negative": ["5", 1], "latent_image": ["2", 0], "sampler_name": "euler", "scheduler": "normal"}},
        "9": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sdxl.safetensors"}},
        **save(["6", 0]),
    }
    _, fields, _ = read(graph)
    assert (fields["width"], fields["height"], fields["prompt"], fields["negative_prompt"], fields["seed"]) == (
        896, 1152, POS, NEG, 31)
    graph["1"]["inputs"]["swap_dimensions"] = "On"
    assert (read(graph)[1]["width"], read(graph)[1]["height"]) == (1152, 896)


def test_numbered_pipe_slots_sigmas_passed_on_and_a_samplers_own_size_taken_last():
    graph = {
        "1": {"class_type": "ttN pipeLoaderSDXL_v2", "inputs": {
            "ckpt_name": "sdxl.safetensors", "positive_g": POS, "positive_l": "", "negative_g": NEG,
            "negative_l": "", "empty_latent_aspect": "768 x 512 [L] 3:2", "empty_latent_width": 1024,
            "empty_latent_height": 1024, "seed": 12}},
        "2": {"class_type": "ttN pipeKSamplerSDXL_v2", "inputs": {  # width/height: its upscale target
            "sdxl_pipe": ["1", 0], "upscale_method": "None", "width": 2048, "height": 2048, "base_steps": 22,
            "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "refiner_steps": 0}},
    }
    _, fields, _ = read(graph)
    assert (fields["num_inference_steps"], fields["guidance_scale"], fields["width"], fields["height"],
            fields["prompt"], fields["negative_prompt"], fields["seed"]) == (22, 8, 768, 512, POS, NEG, 12)
    graph = json.loads(json.dumps(IMPACT))  # Crystools: output k of "Pipe from any" is input any_k packed before
    graph["40"] = {"class_type": "Pipe to/edit any [Crystools]", "inputs": {
        "any_1": ["5", 0], "any_2": ["4", 0], "any_3": ["7", 0]}}
    graph["41"] = {"class_type": "Pipe from any [Crystools]", "inputs": {"CPipeAny": ["40", 0]}}
    graph["8"]["inputs"].update({"latent_image": ["41", 3], "basic_pipe": ["42", 0]})
    graph["42"] = {"class_type": "ToBasicPipe", "inputs": {"model": ["1", 0], "positive": ["41", 1],
                                                          "negative": ["41", 2]}}
    _, fields, _ = read(graph)
    assert (fields["prompt"], fields["negative_prompt"], fields["width"], fields["height"]) == (POS, NEG, 768, 512)
    graph = {**UNKNOWN, "3": {"class_type": "SamplerCustomAdvanced", "inputs": {
        "noise": ["10", 0], "guider": ["11", 0], "sampler": ["12", 0], "sigmas": ["11", 1], "latent_image": ["1", 3]}},
        "10": {"class_type": "RandomNoise", "inputs": {"noise_seed": 77}},
        "11": {"class_type": "ScheduledCFGGuider //Inspire", "inputs": {  # passes the sigmas on
            "model": ["1", 0], "positive": ["1", 1], "negative": ["1", 2], "sigmas": ["13", 0], "from_cfg": 6.5,
            "to_cfg": 1, "schedule": "linear"}},
        "12": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
        "13": {"class_type": "BasicScheduler", "inputs": {"model": ["1", 0], "scheduler": "normal", "steps": 20,
                                                          "denoise": 1}}}
    _, fields, _ = read(graph)
    assert (fields["seed"], fields["num_inference_steps"], fields["prompt"]) == (77, 20, POS)


def test_a_prompt_built_by_a_node_seedlab_does_not_follow_is_named_in_a_note():
    graph = json.loads(json.dumps(IMPACT))
    graph["14"] = {"class_type": "SDXLPromptStyler", "inputs": {"text_positive": "a cat", "text_negative": NEG,
                                                               "style": "sai-analog film"}}
    graph["4"]["inputs"]["text"] = ["14", 1]
    _, fields, notes = read(graph)
    assert "negative_prompt" not in fields and fields["prompt"] == POS
    assert any(note.startswith("the negative prompt is built by nodes SeedLab does not follow") for note in notes)


def test_a_ui_nodes_output_named_as_one_of_its_widgets_or_a_settings_key_gives_that_value():
    """SD Prompt Reader's shape: a parameter node's SEED output is its seed widget, and the reader's SEED, STEPS,
    CFG outputs are the keys of the A1111 settings text it read; the parameter node, which only holds settings,
    is not taken for the sampling pass."""
    from seedlab.files.comfyui.reader import read_comfyui_workflow

    def node(node_id, kind, values, slots=(), outputs=()):
        return {"id": node_id, "type": kind, "widgets_values": values, "outputs": [{"name": name} for name in outputs],
                "inputs": [{"name": name, "link": link_id} for name, link_id in slots]}

    workflow = {"nodes": [
        node(1, "SDPromptReader", ["in.png", "image", 0, POS, NEG, "Steps: 35, Sampler: Euler, CFG scale: 7.5, "
                                   "Seed: 2302238556, Size: 512x768, Model: x"],
             outputs=("IMAGE", "MASK", "POSITIVE", "NEGATIVE", "SEED", "STEPS", "CFG", "WIDTH", "HEIGHT")),
        node(2, "SDParameterGenerator", ["m.safetensors", "baked VAE", "SDv1 512px", "none", -1, 30, 1, 8, "euler",
                                         "normal", 6, 6, "custom", 672, 384, 1],
             outputs=("MODEL_NAME", "VAE_NAME", "MODEL", "CLIP", "VAE", "SEED", "STEPS", "REFINER_START_STEP", "CFG",
                      "SAMPLER_NAME", "SCHEDULER", "POSITIVE_ASCORE", "NEGATIVE_ASCORE", "WIDTH", "HEIGHT")),
        node(5, "EmptyLatentImage", [512, 512, 1], [("width", 5), ("height", 6)]),
        node(6, "CLIPTextEncode", [""], [("text", 7)]),
        node(7, "CLIPTextEncode", [""], [("text", 8)]),
        node(4, "KSamplerAdvanced", ["enable", 0, "fixed", 20, 8, "euler", "normal", 0, 10000, "disable"],
             [("model", 9), ("positive", 10), ("negative", 11), ("latent_image", 12), ("noise_seed", 1),
              ("steps", 2), ("cfg", 3)]),
        node(8, "VAEDecode", [], [("samples", 13)]),
        node(3, "SDPromptSaver", ["x"], [("images", 14), ("seed", 15), ("steps", 16)]),
    ], "links": [[1, 1, 4, 4, 0, "INT"], [2, 1, 5, 4, 0, "INT"], [3, 1, 6, 4, 0, "FLOAT"], [5, 2, 13, 5, 0, "INT"],
                 [6, 2, 14, 5, 0, "INT"], [7, 1, 2, 6, 0, "STRING"], [8, 1, 3, 7, 0, "STRING"],
                 [9, 2, 2, 4, 0, "MODEL"], [10, 6, 0, 4, 0, "C"], [11, 7, 0, 4, 0, "C"], [12, 5, 0, 4, 0, "L"],
                 [13, 4, 0, 8, 0, "L"], [14, 8, 0, 3, 0, "IMAGE"], [15, 2, 5, 3, 0, "INT"], [16, 1, 5, 3, 0, "INT"]]}
    _, fields, notes = read_comfyui_workflow(json.dumps(workflow))
    assert {name: fields.get(name) for name in ("seed", "num_inference_steps", "guidance_scale", "width", "height",
                                                "prompt", "negative_prompt")} == {
        "seed": 2302238556, "num_inference_steps": 35, "guidance_scale": 7.5, "width": 672, "height": 384,
        "prompt": POS, "negative_prompt": NEG}
    workflow["links"][0] = [1, 2, 5, 4, 0, "INT"]  # the generator's seed widget, -1: random at queue time
    _, fields, notes = read_comfyui_workflow(json.dumps(workflow))
    assert "seed" not in fields and any("random at queue time" in note for note in notes)


def test_zeroed_conditioning_cutoff_regions_img2img_sizes_and_shifted_widgets():
    graph = json.loads(json.dumps(IMPACT))
    graph["8"]["inputs"]["seed"] = "randomize"  # an older node version's widgets, shifted by one
    graph["31"] = {"class_type": "ConditioningZeroOut", "inputs": {"conditioning": ["5", 0]}}
    graph["6"]["inputs"]["negative"] = ["31", 0]  # Flux, Qwen and SD3 graphs: the negative is the positive zeroed
    graph["32"] = {"class_type": "BNK_CutoffBasePrompt", "inputs": {"text": POS, "clip": ["1", 1]}}
    graph["33"] = {"class_type": "BNK_CutoffSetRegions", "inputs": {"clip_regions": ["32", 0], "region_text": "red"}}
    graph["34"] = {"class_type": "BNK_CutoffRegionsToConditioning", "inputs": {"clip_regions": ["33", 0]}}
    graph["6"]["inputs"]["positive"] = ["34", 0]
    graph["35"] = {"class_type": "LoadImage", "inputs": {"image": "photo.png"}}
    graph["36"] = {"class_type": "ImageScale", "inputs": {"image": ["35", 0], "upscale_method": "lanczos",
                                                         "width": 1024, "height": 640, "crop": "disabled"}}
    graph["37"] = {"class_type": "VAEEncode", "inputs": {"pixels": ["36", 0], "vae": ["1", 2]}}
    graph["8"]["inputs"]["latent_image"] = ["37", 0]
    _, fields, notes = read(graph)
    assert fields["prompt"] == POS and "negative_prompt" not in fields and "seed" not in fields
    assert (fields["width"], fields["height"]) == (1024, 640)
    assert any("negative conditioning is zeroed (ConditioningZeroOut)" in note for note in notes)
    assert any("seed 'randomize' is not a number of its kind" in note for note in notes)
    assert any("img2img" in note for note in notes)


def test_a_hostile_graph_of_wide_contexts_searched_at_every_hop_ends_at_once():
    """A hang guard: each hop of a chain of contexts searched upstream past 60 wide dead-end nodes (90,000 inputs)
    before finding the value that leads to the next hop; every setting of the sampler walks that chain. Searches
    along one value are now few and each looks at a bounded number of inputs."""
    import time
    chain = ["x0", 0]
    graph = {"s": {"class_type": "KSampler", "inputs": {
        **{name: chain for name in ("seed", "steps", "cfg", "sampler_name", "scheduler", "denoise")},
        "positive": chain, "negative": chain, "latent_image": chain}},
        "dead": {"class_type": "Dead", "inputs": {"a": 1, "b": 2}}}
    for hub in range(60):
        graph[f"h{hub}"] = {"class_type": "Wide", "inputs": {f"w{k}": ["dead", 0] for k in range(1500)}}
    for hop in range(64):
        graph[f"x{hop}"] = {"class_type": "Context", "inputs": {
            **{f"h{hub}": [f"h{hub}", 0] for hub in range(60)}, "base_ctx": [f"y{hop}", 0]}}
        graph[f"y{hop}"] = {"class_type": "Holder", "inputs": {
            name: [f"x{hop + 1}", 0] for name in ("seed", "steps", "cfg", "sampler_name", "scheduler", "denoise")}}
    started = time.perf_counter()
    _, fields, _ = read(graph)
    assert time.perf_counter() - started < 5 and "seed" not in fields and "prompt" not in fields
