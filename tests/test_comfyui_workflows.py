"""UI workflows (the `workflow` chunk only) built with custom node packs and group nodes, in the layout the
frontend saves: each node's widget values in its pack's INPUT_TYPES order, links as [id, from, slot, to, slot,
type]. Their recipe is read through files/comfyui/workflow.py's node map."""

import json

import pytest

from seedlab.files.comfyui.groups import MAX_NODES
from seedlab.files.comfyui.reader import read_comfyui_workflow
from seedlab.files.comfyui.workflow import workflow_graph


def node(node_id, node_type, values=None, inputs=(), outputs=0):
    """A UI node: inputs as (name, link id or None), outputs as a count."""
    return {"id": node_id, "type": node_type, "widgets_values": values,
            "inputs": [{"name": name, "type": "*", "link": link} for name, link in inputs],
            "outputs": [{"name": f"out{slot}", "type": "*", "links": []} for slot in range(outputs)]}


def read(nodes, links, extra=None, definitions=None):
    workflow = {"nodes": nodes, "links": links, "extra": extra or {}}
    if definitions:
        workflow["definitions"] = definitions
    return read_comfyui_workflow(json.dumps(workflow))[1]


def recipe(fields):
    return (fields.get("seed"), fields.get("num_inference_steps"), fields.get("guidance_scale"),
            fields.get("width"), fields.get("height"), fields.get("prompt"), fields.get("negative_prompt"))


def test_efficiency_nodes_loader_and_sampler_with_hidden_control_value_and_a_preview_after():
    loader = node(1, "Efficient Loader", ["model.safetensors", "Baked VAE", -2, "None", 1, 1, "a red fox",
                                          "blurry", "none", "comfy", 768, 512, 1], outputs=7)
    sampler = node(2, "KSampler (Efficient)",
                   [17, None, 25, 7, "ddim", "ddim_uniform", 1, "auto", "true", "/view?filename=x.mp4"],
                   [("model", 1), ("positive", 2), ("negative", 3), ("latent_image", 4)])
    links = [[1, 1, 0, 2, 0, "MODEL"], [2, 1, 1, 2, 1, "CONDITIONING"], [3, 1, 2, 2, 2, "CONDITIONING"],
             [4, 1, 3, 2, 3, "LATENT"]]
    assert recipe(read([loader, sampler], links)) == (17, 25, 7, 768, 512, "a red fox", "blurry")


def test_efficiency_sdxl_loader_and_sampler():
    loader = node(1, "Eff. Loader SDXL", ["base.safetensors", -2, "refiner.safetensors", -2, 6, 2, "Baked VAE",
                                          "a castle", "fog", "none", "comfy", 1216, 832, 1], outputs=4)
    sampler = node(2, "KSampler SDXL (Eff.)", [238710419612190, "fixed", 40, 9, "euler", "karras", 0, -1,
                                               "auto", "true"], [("sdxl_tuple", 1), ("latent_image", 2)])
    links = [[1, 1, 0, 2, 0, "SDXL_TUPLE"], [2, 1, 1, 2, 1, "LATENT"]]
    fields = read([loader, sampler], links)
    assert recipe(fields) == (238710419612190, 40, 9, 1216, 832, "a castle", "fog")


def test_easy_use_loader_presampling_and_sampler_through_pipes():
    loader = node(1, "easy a1111Loader", ["model.safetensors", "Baked VAE", -1, "None", 1, 1, "512 x 768", 512,
                                          512, "a girl on a bus", "text, watermark", 1, False], outputs=3)
    settings = node(2, "easy preSampling", [20, 8, "dpmpp_2m", "karras", 1, 236370671715313, "fixed"],
                    [("pipe", 1)], outputs=1)
    sampler = node(3, "easy kSampler", ["Preview", 0, "ComfyUI"], [("pipe", 2)])
    links = [[1, 1, 0, 2, 0, "PIPE_LINE"], [2, 2, 0, 3, 0, "PIPE_LINE"]]
    fields = read([loader, settings, sampler], links)
    assert recipe(fields) == (236370671715313, 20, 8, 512, 768, "a girl on a bus", "text, watermark")


def test_tinyterra_pipe_loader_and_sampler_with_the_seed_widget_after_the_others():
    loader = node(1, "ttN pipeLoader_v2", ["model.safetensors", "Default", "Baked VAE", -1, "", "a lion",
                                           "none", "comfy++", "ugly", "none", "comfy++", "768 x 512 [L] 3:2",
                                           512, 512, 1, 65968988380466, "fixed", "", "", None], outputs=1)
    sampler = node(2, "ttN pipeKSampler_v2", ["None", 1, "None", "upscaler.pth", 2, "by percentage", 50, 1024,
                                              1024, 1024, "disabled", 24, 7, "dpmpp_2m", "karras", 1, "Preview",
                                              "ComfyUI", "png", True, 0, "randomize", None], [("pipe", 1)])
    graph, _ = workflow_graph({"nodes": [loader, sampler], "links": [[1, 1, 0, 2, 0, "PIPE_LINE"]]})
    assert graph["1"]["inputs"]["seed"] == 65968988380466
    assert graph["1"]["inputs"]["empty_latent_aspect"] == "768 x 512 [L] 3:2"
    assert graph["2"]["inputs"]["steps"] == 24 and graph["2"]["inputs"]["cfg"] == 7
    fields = read([loader, sampler], [[1, 1, 0, 2, 0, "PIPE_LINE"]])
    assert (fields["prompt"], fields["negative_prompt"], fields["num_inference_steps"]) == ("a lion", "ugly", 24)


@pytest.mark.parametrize("values", [
    [364796916966557, "fixed", 20, 3.5, "euler", "normal", 1, "GPU(=A1111)", "incremental", 1, 0.3, "linear"],
    [364796916966557, "fixed", 20, 3.5, "euler", "normal", 1, "GPU(=A1111)", "incremental", 1, 0.3],
])
def test_inspire_ksampler_of_either_version_keeps_its_control_value_apart(values):
    graph, _ = workflow_graph({"nodes": [node(1, "KSampler //Inspire", values)], "links": []})
    inputs = graph["1"]["inputs"]
    assert (inputs["seed"], inputs["steps"], inputs["cfg"], inputs["noise_mode"]) == \
        (364796916966557, 20, 3.5, "GPU(=A1111)")


@pytest.mark.parametrize(("node_type", "values", "expected"), [
    ("Seed", [904019488781965, True], {"seed": 904019488781965}),  # WAS, the first frontends' toggle
    ("CR Seed", [5, "fixed"], {"seed": 5}),
    ("Seed (rgthree)", [42, None, None, None], {"seed": 42}),
    ("ImpactKSamplerAdvancedBasicPipe", [False, 101, "fixed", 20, 3.5, "euler", "normal", 3, 10000, False],
     {"noise_seed": 101, "steps": 20, "cfg": 3.5, "start_at_step": 3}),
    ("CR SDXL Aspect Ratio", [1024, 1024, "3:4 portrait 896x1152", "Off", 2, 1],
     {"aspect_ratio": "3:4 portrait 896x1152"}),
    ("SeargeSDXLSampler2", [68907621190797, "randomize", 20, 7, 0.8, 1, 0, 1, 1],
     {"noise_seed": 68907621190797, "steps": 20, "cfg": 7}),
    ("Primitive string [Crystools]", ["a cat"], {"string": "a cat"}),
    ("CLIPTextEncodeSDXL", [4096, 4096, 0, 0, 4096, 4096, "big", "small"], {"text_g": "big", "text_l": "small"}),
    ("RandomNoise", [40012, "fixed"], {"noise_seed": 40012}),
    ("BasicScheduler", ["karras", 20, 1], {"steps": 20}),
])
def test_widget_values_are_named_by_the_packs_order(node_type, values, expected):
    graph, _ = workflow_graph({"nodes": [node(1, node_type, values)], "links": []})
    assert expected.items() <= graph["1"]["inputs"].items()


def group_definition():
    """Impact's MAKE_BASIC_PIPE group: a checkpoint, two text encoders and ToBasicPipe."""
    inner = [
        {"index": 0, "type": "CheckpointLoaderSimple", "widgets_values": ["old.safetensors"],
         "outputs": [{"name": n, "links": []} for n in ("MODEL", "CLIP", "VAE")]},
        {"index": 1, "type": "CLIPTextEncode", "widgets_values": [""], "inputs": [{"name": "clip", "link": None}],
         "outputs": [{"name": "CONDITIONING", "links": []}]},
        {"index": 2, "type": "CLIPTextEncode", "widgets_values": [""], "inputs": [{"name": "clip", "link": None}],
         "outputs": [{"name": "CONDITIONING", "links": []}]},
        {"index": 3, "type": "ToBasicPipe", "inputs": [{"name": n, "link": None} for n in
                                                       ("model", "clip", "vae", "positive", "negative")],
         "outputs": [{"name": "basic_pipe", "links": None}]},
    ]
    links = [[0, 1, 1, 0, 1, "CLIP"], [0, 1, 2, 0, 1, "CLIP"], [0, 0, 3, 0, 1, "MODEL"], [0, 1, 3, 1, 1, "CLIP"],
             [0, 2, 3, 2, 1, "VAE"], [1, 0, 3, 3, 3, "CONDITIONING"], [2, 0, 3, 4, 4, "CONDITIONING"]]
    return {"nodes": inner, "links": links, "external": []}


@pytest.mark.parametrize("prefix", ["workflow/", "workflow>"])
def test_a_group_node_is_read_through_its_inner_nodes(prefix):
    group = node(16, prefix + "Impact::MAKE_BASIC_PIPE", ["model.safetensors", "galaxy bottle", "blurry"],
                 outputs=1)
    latent = node(7, "EmptyLatentImage", [512, 640, 1], outputs=1)
    sampler = node(6, "ImpactKSamplerBasicPipe", [630921104207501, "fixed", 20, 8, "euler", "normal", 1],
                   [("basic_pipe", 11), ("latent_image", 3)])
    links = [[11, 16, 0, 6, 0, "BASIC_PIPE"], [3, 7, 0, 6, 1, "LATENT"]]
    extra = {"groupNodes": {"Impact::MAKE_BASIC_PIPE": group_definition()}}
    fields = read([group, latent, sampler], links, extra)
    assert recipe(fields) == (630921104207501, 20, 8, 512, 640, "galaxy bottle", "blurry")


def test_a_group_nodes_open_input_takes_the_outer_link():
    definition = {"nodes": [{"index": 0, "type": "CLIPTextEncode", "widgets_values": ["x"],
                             "inputs": [{"name": "clip", "link": None}], "outputs": [{"name": "C", "links": []}]}],
                  "links": [], "external": []}
    group = node(5, "workflow/ENC", ["a tree"], [("clip", 9)], outputs=1)
    loader = node(4, "CheckpointLoaderSimple", ["m.safetensors"], outputs=3)
    graph, _ = workflow_graph({"nodes": [loader, group], "links": [[9, 4, 1, 5, 0, "CLIP"]],
                               "extra": {"groupNodes": {"ENC": definition}}})
    assert {key: graph["5:0"][key] for key in ("class_type", "inputs")} == {
        "class_type": "CLIPTextEncode", "inputs": {"text": "a tree", "clip": ["4", 1]}}


def test_a_subgraph_is_read_through_its_inner_nodes():
    inner = [node(1, "CLIPTextEncode", ["a lighthouse"], [("clip", None)], outputs=1),
             node(2, "CLIPTextEncode", ["rain"], [("clip", None)], outputs=1)]
    subgraph = {"id": "9f0c-sub", "nodes": inner, "links": [
        {"id": 1, "origin_id": -10, "origin_slot": 0, "target_id": 1, "target_slot": 0},
        {"id": 2, "origin_id": -10, "origin_slot": 0, "target_id": 2, "target_slot": 0},
        {"id": 3, "origin_id": 1, "origin_slot": 0, "target_id": -20, "target_slot": 0},
        {"id": 4, "origin_id": 2, "origin_slot": 0, "target_id": -20, "target_slot": 1}]}
    loader = node(3, "CheckpointLoaderSimple", ["m.safetensors"], outputs=3)
    prompts = node(4, "9f0c-sub", [], [("clip", 1)], outputs=2)
    latent = node(5, "EmptyLatentImage", [832, 1216, 1], outputs=1)
    sampler = node(6, "KSampler", [7, "fixed", 30, 5, "euler", "normal", 1],
                   [("model", 2), ("positive", 3), ("negative", 4), ("latent_image", 5)])
    links = [[1, 3, 1, 4, 0, "CLIP"], [2, 3, 0, 6, 0, "MODEL"], [3, 4, 0, 6, 1, "CONDITIONING"],
             [4, 4, 1, 6, 2, "CONDITIONING"], [5, 5, 0, 6, 3, "LATENT"]]
    fields = read([loader, prompts, latent, sampler], links, definitions={"subgraphs": [subgraph]})
    assert recipe(fields) == (7, 30, 5, 832, 1216, "a lighthouse", "rain")


def test_groups_that_hold_themselves_or_too_many_nodes_end():
    looping = {"nodes": [{"index": 0, "type": "workflow/LOOP", "widgets_values": []}], "links": []}
    graph, _ = workflow_graph({"nodes": [node(1, "workflow/LOOP", [])], "links": [],
                               "extra": {"groupNodes": {"LOOP": looping}}})
    assert len(graph) == 1  # nesting stops at its cap
    many = {"nodes": [{"index": n, "type": "workflow/MANY"} for n in range(1000)], "links": []}
    with pytest.raises(ValueError, match=str(MAX_NODES)):
        workflow_graph({"nodes": [node(1, "workflow/MANY", [])], "links": [],
                        "extra": {"groupNodes": {"MANY": many}}})
