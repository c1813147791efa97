"""ComfyUI's `prompt` chunk (the API graph) as recipe fields: followed from the sampler that made the image.

The graph maps node ids to {"class_type", "inputs"}; an input is a value or a link [node id, output].
From the saved image we walk upstream to the first sampling pass (KSampler, KSamplerAdvanced with its start and
end steps, SamplerCustom(Advanced)), then follow its links through reroutes, primitives, conditioning and LoRA
nodes to the seed, steps, cfg, sampler, scheduler, size, model and the positive and negative text.

A file with only the `workflow` chunk (the UI graph) is first turned into the same node map (files/comfyui/workflow.py).
Of a graph that saves images from several passes, the one whose size is the file's own is read.
"""

from __future__ import annotations

from typing import Any

from ...engine.samplers.names import COMFY_SCHEDULES, is_comfy_sampler
from ..formats import loads
from ..tool_samplers import tool_sampling
from .clip import clip_fields
from .graph import Walks, follow, is_node, is_sampler, link, nearest, upstream
from .loras import lora_loaders
from .passes import advanced_steps, second_pass
from .text import ROLE_TEXT, latent_size, size_from, text
from .vae import decoder_vae
from .workflow import workflow_graph

_MAX_NODES, _MAX_SAMPLERS = 5_000, 64  # real graphs have a few hundred nodes and a handful of samplers
_HANDLED = {"KSampler", "KSamplerAdvanced", "SamplerCustom", "SamplerCustomAdvanced", "CLIPTextEncode",
            "EmptyLatentImage", "CheckpointLoaderSimple", "CheckpointLoader", "VAEDecode", "SaveImage",
            "PreviewImage", "Reroute", "KSamplerSelect", "BasicScheduler", "RandomNoise", "CFGGuider",
            "UNETLoader", "VAELoader", "CLIPLoader", "PrimitiveNode", "LoraLoader", "LoraLoaderModelOnly",
            "LatentUpscale", "LatentUpscaleBy", "CLIPSetLastLayer"}
_MAX_INPUTS = 2_000  # inputs of one node (real nodes have a few dozen), checked before any walk
_MAX_OUTPUTS_READ = 8  # of a graph saving images from different passes, this many are read to match the file's size


def read_comfyui(text: str, size: tuple[int, int] | None = None) -> tuple[str, dict[str, Any], list[str]]:
    """The recipe fields of a ComfyUI API graph, with notes on what is not restored. `size` is the image's own
    width and height: of a graph that saves several images, the one of that size is read."""
    graph = loads(text, "prompt", constants=True)
    if not isinstance(graph, dict) or not any(is_node(node) for node in graph.values()):
        raise ValueError("prompt holds JSON that is not a ComfyUI graph (no nodes with a class_type)")
    return _read_graph({str(key): node for key, node in graph.items() if is_node(node)}, [], size)


def read_comfyui_workflow(text: str, size: tuple[int, int] | None = None) -> tuple[str, dict[str, Any], list[str]]:
    """The recipe fields of a ComfyUI UI workflow (no API graph in the file), turned into an API-style graph."""
    workflow = loads(text, "workflow", constants=True)
    if not isinstance(workflow, dict) or not isinstance(workflow.get("nodes"), list):
        raise ValueError("workflow holds JSON that is not a ComfyUI workflow (no nodes list)")
    graph, notes = workflow_graph(workflow)
    _, fields, notes = _read_graph(graph, notes, size)
    return "ComfyUI (workflow)", fields, notes


def _read_graph(graph: dict[str, Any], notes: list[str],
                size: tuple[int, int] | None = None) -> tuple[str, dict[str, Any], list[str]]:
    """The recipe fields of an API-style node map, from the first sampling pass behind the saved image (of the
    outputs that lead to different passes, the first whose image is `size`, else the first)."""
    samplers = [key for key, node in graph.items() if is_sampler(node)]
    strict = bool(samplers)  # else the nodes that hold a sampler's settings (Searge's) are read as its pass
    samplers = samplers or [key for key, node in graph.items() if is_sampler(node, strict=False)]
    if len(graph) > _MAX_NODES or len(samplers) > _MAX_SAMPLERS:  # the walk costs samplers x nodes
        raise ValueError(f"the ComfyUI graph has {len(graph)} nodes and {len(samplers)} samplers; at most "
                         f"{_MAX_NODES} and {_MAX_SAMPLERS} are read")
    widest = max(graph, key=lambda key: len(graph[key]["inputs"]), default=None)
    if widest is not None and len(graph[widest]["inputs"]) > _MAX_INPUTS:
        raise ValueError(f"the ComfyUI graph's node {widest[:40]} has {len(graph[widest]['inputs'])} inputs; at most "
                         f"{_MAX_INPUTS} are read")
    if not samplers:
        types = ", ".join(sorted({node["class_type"] for node in graph.values()})[:8])
        raise ValueError(f"the ComfyUI graph has no sampler node SeedLab knows (it has {types})")
    chains = _passes(graph, samplers, strict)
    readings = []
    for first, last in chains[:_MAX_OUTPUTS_READ]:
        readings.append(_read_pass(graph, samplers, first, last, list(notes)))
        if size is None or _made_size(readings[-1][0]) == tuple(size):
            break
    chosen = next((reading for reading in readings if size and _made_size(reading[0]) == tuple(size)), None)
    fields, notes = chosen or readings[0]
    fields["to_8bit"] = "truncate"  # VAEDecode's floats, SaveImage's np.clip(255. * i, 0, 255).astype(np.uint8)
    if len(chains) > 1:
        which = (f"the one of this file's size ({size[0]}x{size[1]})" if chosen else "the first one saved" +
                 (f" (none is this file's size, {size[0]}x{size[1]})" if size else ""))
        notes.append(f"the graph saves images from {len(chains)} different sampling passes: {which} is restored")
    others = sorted({node["class_type"] for node in graph.values()} - _HANDLED)
    if others:
        shown = ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else "")
        notes.append(f"ComfyUI nodes {shown} are not reproduced by SeedLab")
    return "ComfyUI", fields, notes


def _read_pass(graph: dict[str, Any], samplers: list[str], first: str, last: str,
               notes: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The fields of the first pass `first`, with hires fix when `last` refines it as ComfyUI's two-pass graph."""
    fields = _sampler_fields(graph, first, notes)
    fields.update(decoder_vae(graph, last, link, notes))  # a VAELoader's file decodes the image
    if last != first and not second_pass(graph, first, last, fields, _sampler_fields, link, notes):
        notes.append(f"the graph has {len(samplers)} sampling passes (hires fix, refiner or more): the first pass "
                     f"(node {first}, {graph[first]['class_type']}) is restored, the later passes are not")
    return fields, notes


def _made_size(fields: dict[str, Any]) -> tuple[int, int] | None:
    """The size of the image a reading makes: the first pass's, times hires fix's scale."""
    width, height, scale = fields.get("width"), fields.get("height"), fields.get("hires_scale") or 1
    if not all(isinstance(side, int) and not isinstance(side, bool) for side in (width, height)):
        return None
    return int(width * scale), int(height * scale)


def _passes(graph: dict[str, Any], samplers: list[str], strict: bool = True) -> list[tuple[str, str]]:
    """(first pass, last pass) behind each saved or previewed image, each pair once, Save nodes first; with no
    output behind a sampler: the first sampler with nothing upstream, and the last sampler."""
    upstream = Walks(graph, strict)
    outputs = [key for key, node in graph.items() if "Save" in node["class_type"]]
    outputs += [key for key, node in graph.items() if "Preview" in node["class_type"]]
    chains: list[tuple[str, str]] = []
    for output in outputs:
        reached = upstream(output)
        if reached:
            roots = [key for key in reached if not upstream(key)]
            chain = (roots[0] if roots else reached[-1]), reached[0]
            chains += [chain] if chain not in chains else []
    if not chains:
        roots = [key for key in samplers if not upstream(key)]
        chains.append(((roots[0] if roots else samplers[0]), samplers[-1]))
    return chains



def _sampler_fields(graph: dict[str, Any], key: str, notes: list[str]) -> dict[str, Any]:
    """A sampling node's recipe fields: each from its own input, its guider or sigmas node, else (a custom sampler
    fed by a pipe or a loader that holds its settings) the nearest node upstream that holds it."""
    inputs = graph[key]["inputs"]
    guider = graph.get(link(inputs.get("guider")) or "", {}).get("inputs", {})
    sigmas = graph.get(link(inputs.get("sigmas")) or "", {}).get("inputs", {})
    for _ in range(8):  # a node that passes the sigmas on (Inspire's ScheduledCFGGuider): the scheduler behind it
        if "steps" in sigmas or link(sigmas.get("sigmas")) is None:
            break
        sigmas = graph.get(link(sigmas["sigmas"]) or "", {}).get("inputs", {})

    def value(*names: str, source: dict[str, Any] = sigmas) -> Any:
        own = next((inputs[name] for name in names if inputs.get(name) is not None), None)
        own = own if own is not None else next((source[name] for name in names if source.get(name) is not None), None)
        return own if own is not None else nearest(graph, key, names)

    seed = value("seed", "noise_seed")
    if seed is None and "noise" in inputs:
        seed = follow(graph, inputs["noise"], ("noise_seed", "seed"))
    values = {
        "seed": follow(graph, seed, ("seed", "noise_seed", "value", "int")),
        "num_inference_steps": follow(graph, value("steps", "base_steps"), ("steps", "value", "int")),
        "guidance_scale": follow(graph, value("cfg", source=guider), ("cfg", "value", "float")),
    }
    fields: dict[str, Any] = {name: found for name, found in values.items() if _usable(name, found, notes)}
    sampler = inputs.get("sampler_name")
    if sampler is None and "sampler" in inputs:
        sampler = follow(graph, inputs["sampler"], ("sampler_name",))
    sampler = follow(graph, sampler if sampler is not None else value("sampler_name"), ("sampler_name", "value",
                                                                                        "string"))
    schedule = follow(graph, value("scheduler"), ("scheduler", "value", "string"))
    if isinstance(sampler, str) and is_comfy_sampler(sampler) and schedule in (None, *COMFY_SCHEDULES):
        fields["scheduler"], fields["schedule"] = sampler, schedule or "normal"  # run as ComfyUI runs them
    elif isinstance(sampler, str):  # another diffusers class runs: tool_sampling names it in a note
        fields.update(tool_sampling(sampler, schedule, notes, "comfyui"))
    # BasicGuider (Flux's usual graph) has no positive/negative, only the one conditioning it guides with
    # Searge's sampler names them base_positive/base_negative; a loader upstream may hold them as texts
    positive = value("positive", "base_positive", *ROLE_TEXT["positive"][1:],
                     source={"positive": guider.get("positive", guider.get("conditioning"))})
    negative = value("negative", "base_negative", *ROLE_TEXT["negative"][1:], source=guider)
    _prompts(graph, positive, negative, fields, notes)
    fields.update(clip_fields(graph, positive, link, lambda number: follow(graph, number, ("value", "int")), notes))
    _size(graph, key, fields, notes)
    model_input = inputs.get("model", guider.get("model"))
    model = follow(graph, model_input, ("ckpt_name", "unet_name", "model_name"), ("model",))
    model = model if isinstance(model, str) else follow(graph, nearest(graph, key, ("ckpt_name", "unet_name")), ())
    if isinstance(model, str):
        fields["model"] = model.rsplit(".", 1)[0] if model.endswith((".safetensors", ".ckpt")) else model
    if loras := lora_loaders(graph, model_input, link, notes):
        fields["loras"] = loras
    if graph[key]["class_type"] == "KSamplerAdvanced":
        advanced_steps(inputs, fields, lambda number: follow(graph, number, ("value", "int")), notes)
    denoise = follow(graph, sigmas.get("denoise", inputs.get("denoise")), ("value", "float"))
    if isinstance(denoise, (int, float)) and denoise < 1:
        notes.append(f"denoise {denoise:g} (img2img or a partial pass) is not supported: SeedLab starts from noise")
    return fields


def _usable(name: str, value: Any, notes: list[str]) -> bool:
    """A seed, step count or CFG the graph states as a number of its kind (a widget shifted by an older node
    version holds "randomize" or "euler"; -1 is "random at queue time"); anything else named in a note."""
    if value is None:
        return False
    whole = isinstance(value, int) and not isinstance(value, bool)
    if name == "guidance_scale" and (whole or isinstance(value, float)) or whole and value >= (name != "seed"):
        return True
    what = "random at queue time: the seed used is not recorded" if value == -1 and name == "seed" else \
        "not a number of its kind"
    notes.append(f"the graph's {name} {str(value)[:30]!r} is {what}: it is not restored")
    return False


def _prompts(graph: dict[str, Any], positive: Any, negative: Any, fields: dict[str, Any], notes: list[str]) -> None:
    """The prompt and negative prompt behind the pass's conditioning (or the texts a loader holds)."""
    for field, role, conditioning in (("prompt", "positive", positive), ("negative_prompt", "negative", negative)):
        found = text(graph, conditioning, role, notes)
        if found is not None:
            fields[field] = found
        elif conditioning is not None:
            notes.append(f"the {role} prompt is built by nodes SeedLab does not follow (a style template, a "
                         "generated or random text): it is not restored")


def _size(graph: dict[str, Any], key: str, fields: dict[str, Any], notes: list[str]) -> None:
    """The pass's size: from its latent input, else from the nearest node upstream that gives a size (a loader
    that makes the empty latent itself) or a latent."""
    if link(graph[key]["inputs"].get("latent_image")) is not None:
        latent_size(graph, graph[key]["inputs"]["latent_image"], fields, notes)
        return
    for found in [*list(upstream(graph, key))[1:], key]:  # its own width and height last (an upscale target)
        inputs = graph[found]["inputs"]
        if size_from(graph, inputs, fields):
            return
        latent = next((inputs[name] for name in ("latent_image", "latent", "samples") if link(inputs.get(name))), None)
        if latent is not None:
            latent_size(graph, latent, fields, notes)
            return
