"""ComfyUI's `prompt` chunk (the API graph) as recipe fields: followed from the sampler that made the image.

The graph maps node ids to {"class_type", "inputs"}; an input is a value or a link [node id, output].
From the saved image we walk upstream to the first sampling pass (KSampler, KSamplerAdvanced with its start and
end steps, SamplerCustom(Advanced)), then follow its links through reroutes, primitives, conditioning and LoRA
nodes to the seed, steps, cfg, sampler, scheduler, size, model and the positive and negative text.

A file with only the `workflow` chunk (the UI graph) is first turned into the same node map (comfyui_workflow.py).
Of a graph that saves images from several passes, the one whose size is the file's own is read.
"""

from __future__ import annotations

import re
from typing import Any

from ..engine.sampler_names import COMFY_SCHEDULES, is_comfy_sampler
from .comfyui_clip import clip_fields
from .comfyui_loras import lora_loaders
from .comfyui_passes import advanced_steps, second_pass
from .comfyui_vae import decoder_vae
from .comfyui_workflow import workflow_graph
from .formats import loads, sampler_scheduler

_MAX_HOPS = 64  # a chain of links longer than this is not followed (and cycles end here)
_MAX_NODES, _MAX_SAMPLERS = 5_000, 64  # real graphs have a few hundred nodes and a handful of samplers
_CONDITIONING = ("conditioning", "conditioning_1", "conditioning_to", "positive", "negative", "cond")
_HANDLED = {"KSampler", "KSamplerAdvanced", "SamplerCustom", "SamplerCustomAdvanced", "CLIPTextEncode",
            "EmptyLatentImage", "CheckpointLoaderSimple", "CheckpointLoader", "VAEDecode", "SaveImage",
            "PreviewImage", "Reroute", "KSamplerSelect", "BasicScheduler", "RandomNoise", "CFGGuider",
            "UNETLoader", "VAELoader", "CLIPLoader", "PrimitiveNode", "LoraLoader", "LoraLoaderModelOnly",
            "LatentUpscale", "LatentUpscaleBy", "CLIPSetLastLayer"}
_PRESET_SIZE = re.compile(r"\s*(\d{1,5})\s*[x×]\s*(\d{1,5})\b")  # "1024 x 1024  (square)", " 832 x 1216", "1024x1024 (1.0)"
_MAX_INPUTS = 2_000  # inputs of one node (real nodes have a few dozen), checked before any walk
_MAX_VISITS = 200_000  # links looked at in all the walks of one graph: a hostile graph costs no more
_MAX_OUTPUTS_READ = 8  # of a graph saving images from different passes, this many are read to match the file's size


def read_comfyui(text: str, size: tuple[int, int] | None = None) -> tuple[str, dict[str, Any], list[str]]:
    """The recipe fields of a ComfyUI API graph, with notes on what is not restored. `size` is the image's own
    width and height: of a graph that saves several images, the one of that size is read."""
    graph = loads(text, "prompt")
    if not isinstance(graph, dict) or not any(_is_node(node) for node in graph.values()):
        raise ValueError("prompt holds JSON that is not a ComfyUI graph (no nodes with a class_type)")
    return _read_graph({str(key): node for key, node in graph.items() if _is_node(node)}, [], size)


def read_comfyui_workflow(text: str, size: tuple[int, int] | None = None) -> tuple[str, dict[str, Any], list[str]]:
    """The recipe fields of a ComfyUI UI workflow (no API graph in the file), turned into an API-style graph."""
    workflow = loads(text, "workflow")
    if not isinstance(workflow, dict) or not isinstance(workflow.get("nodes"), list):
        raise ValueError("workflow holds JSON that is not a ComfyUI workflow (no nodes list)")
    graph, notes = workflow_graph(workflow)
    _, fields, notes = _read_graph(graph, notes, size)
    return "ComfyUI (workflow)", fields, notes


def _read_graph(graph: dict[str, Any], notes: list[str],
                size: tuple[int, int] | None = None) -> tuple[str, dict[str, Any], list[str]]:
    """The recipe fields of an API-style node map, from the first sampling pass behind the saved image (of the
    outputs that lead to different passes, the first whose image is `size`, else the first)."""
    samplers = [key for key, node in graph.items() if _is_sampler(node)]
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
    chains = _passes(graph, samplers)
    readings = []
    for first, last in chains[:_MAX_OUTPUTS_READ]:
        readings.append(_read_pass(graph, samplers, first, last, list(notes)))
        if size is None or _made_size(readings[-1][0]) == tuple(size):
            break
    chosen = next((reading for reading in readings if size and _made_size(reading[0]) == tuple(size)), None)
    fields, notes = chosen or readings[0]
    if len(chains) > 1:
        which = (f"the one of this file's size ({size[0]}x{size[1]})" if chosen else "the first one saved" +
                 (f" (none is this file's size, {size[0]}x{size[1]})" if size else ""))
        notes.append(f"the graph saves images from {len(chains)} different sampling passes: {which} is restored")
    others = sorted({node["class_type"] for node in graph.values()} - _HANDLED)
    if others:
        shown = ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else "")
        notes.append(f"ComfyUI nodes {shown} are not reproduced by SeedLab")
    return "ComfyUI", fields, notes


def _is_node(node: Any) -> bool:
    return isinstance(node, dict) and isinstance(node.get("class_type"), str) and isinstance(node.get("inputs"), dict)


def _is_sampler(node: dict[str, Any]) -> bool:
    kind = node["class_type"]
    return "KSampler" in kind and kind != "KSamplerSelect" or kind in ("SamplerCustom", "SamplerCustomAdvanced")


def _link(value: Any) -> str | None:
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], (str, int)):
        return str(value[0])
    return None


class _Walks:
    """The upstream samplers of each node, each walk made once, all of them within one budget of visits."""

    def __init__(self, graph: dict[str, Any]):
        self.graph, self.visits, self.known = graph, 0, {}

    def __call__(self, start: str) -> list[str]:
        if start not in self.known:
            self.known[start] = self._walk(start)
        return self.known[start]

    def _walk(self, start: str) -> list[str]:
        found, visits = _upstream_samplers(self.graph, start, _MAX_VISITS - self.visits)
        self.visits += visits
        return found


def _upstream_samplers(graph: dict[str, Any], start: str, budget: int) -> tuple[list[str], int]:
    """Samplers reached from `start` through image and latent links, nearest first (depth-first, input order),
    and how many links were looked at; past `budget` the graph is refused."""
    found, seen, stack, visits = [], {start}, [start], 0
    while stack:
        node = graph[stack.pop()]
        visits += len(node["inputs"])
        if visits > budget:
            raise ValueError("the ComfyUI graph is too large to follow from its saved images to its sampler "
                             f"(more than {_MAX_VISITS:,} links looked at)")
        for name, value in reversed(list(node["inputs"].items())):
            target = _link(value)
            if target is None or target in seen or target not in graph or name in ("model", "clip", "vae"):
                continue
            if name in _CONDITIONING or name in ("guider", "sigmas", "sampler", "noise"):
                continue
            seen.add(target)
            if _is_sampler(graph[target]):
                found.append(target)
            stack.append(target)
    return found, visits


def _read_pass(graph: dict[str, Any], samplers: list[str], first: str, last: str,
               notes: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The fields of the first pass `first`, with hires fix when `last` refines it as ComfyUI's two-pass graph."""
    fields = _sampler_fields(graph, first, notes)
    fields.update(decoder_vae(graph, last, _link, notes))  # a VAELoader's file decodes the image
    if last != first and not second_pass(graph, first, last, fields, _sampler_fields, _link, notes):
        notes.append(f"the graph has {len(samplers)} sampling passes (hires fix, refiner or more): the first pass "
                     f"(node {first}, {graph[first]['class_type']}) is restored, the later passes are not")
    return fields, notes


def _made_size(fields: dict[str, Any]) -> tuple[int, int] | None:
    """The size of the image a reading makes: the first pass's, times hires fix's scale."""
    width, height, scale = fields.get("width"), fields.get("height"), fields.get("hires_scale") or 1
    if not all(isinstance(side, int) and not isinstance(side, bool) for side in (width, height)):
        return None
    return int(width * scale), int(height * scale)


def _passes(graph: dict[str, Any], samplers: list[str]) -> list[tuple[str, str]]:
    """(first pass, last pass) behind each saved or previewed image, each pair once, Save nodes first; with no
    output behind a sampler: the first sampler with nothing upstream, and the last sampler."""
    upstream = _Walks(graph)
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


def _follow(graph: dict[str, Any], value: Any, names: tuple[str, ...], through: tuple[str, ...]) -> Any:
    """The first of `names` found by following links (through inputs named in `through`); None if none."""
    for _ in range(_MAX_HOPS):
        target = _link(value)
        if target is None:
            return value
        node = graph.get(target)
        if node is None:
            return None
        inputs = node["inputs"]
        for name in names:
            if name in inputs:
                value = inputs[name]
                break
        else:
            nxt = next((inputs[name] for name in through if _link(inputs.get(name)) is not None), None)
            if nxt is None:
                literal = [item for item in inputs.values() if _link(item) is None]
                return literal[0] if len(literal) == 1 else None  # a primitive node: its one value
            value = nxt
    return None


def _sampler_fields(graph: dict[str, Any], key: str, notes: list[str]) -> dict[str, Any]:
    inputs = graph[key]["inputs"]
    guider = graph.get(_link(inputs.get("guider")) or "", {}).get("inputs", {})
    sigmas = graph.get(_link(inputs.get("sigmas")) or "", {}).get("inputs", {})
    fields: dict[str, Any] = {}
    seed = inputs.get("seed", inputs.get("noise_seed"))
    if seed is None and "noise" in inputs:
        seed = _follow(graph, inputs["noise"], ("noise_seed", "seed"), ())
    values = {
        "seed": _follow(graph, seed, ("seed", "noise_seed", "value", "int"), ()),
        "num_inference_steps": _follow(graph, inputs.get("steps", sigmas.get("steps")), ("steps", "value", "int"), ()),
        "guidance_scale": _follow(graph, inputs.get("cfg", guider.get("cfg")), ("cfg", "value", "float"), ()),
    }
    fields.update({name: value for name, value in values.items() if value is not None})
    sampler = inputs.get("sampler_name")
    if sampler is None and "sampler" in inputs:
        sampler = _follow(graph, inputs["sampler"], ("sampler_name",), ())
    sampler = _follow(graph, sampler, ("sampler_name", "value", "string"), ())
    schedule = _follow(graph, inputs.get("scheduler", sigmas.get("scheduler")), ("scheduler", "value", "string"), ())
    if isinstance(sampler, str) and is_comfy_sampler(sampler) and schedule in (None, *COMFY_SCHEDULES):
        fields["scheduler"], fields["schedule"] = sampler, schedule or "normal"  # run as ComfyUI runs them
    elif isinstance(sampler, str):
        fields["scheduler"] = sampler_scheduler(sampler, schedule, notes)
    for field, name in (("prompt", "positive"), ("negative_prompt", "negative")):
        # BasicGuider (Flux's usual graph) has no positive/negative, only the one conditioning it guides with
        fallback = guider.get("conditioning") if name == "positive" else None
        text = _text(graph, inputs.get(name, guider.get(name, fallback)), notes)
        if text is not None:
            fields[field] = text
    positive = inputs.get("positive", guider.get("positive", guider.get("conditioning")))
    fields.update(clip_fields(graph, positive, _link, lambda value: _follow(graph, value, ("value", "int"), ()), notes))
    _latent_size(graph, inputs.get("latent_image"), fields, notes)
    model = _follow(graph, inputs.get("model", guider.get("model")), ("ckpt_name", "unet_name"), ("model",))
    if isinstance(model, str):
        fields["model"] = model.rsplit(".", 1)[0] if model.endswith((".safetensors", ".ckpt")) else model
    if loras := lora_loaders(graph, inputs.get("model", guider.get("model")), _link, notes):
        fields["loras"] = loras
    if graph[key]["class_type"] == "KSamplerAdvanced":
        advanced_steps(inputs, fields, lambda value: _follow(graph, value, ("value", "int"), ()), notes)
    denoise = sigmas.get("denoise", inputs.get("denoise"))
    if isinstance(denoise, (int, float)) and denoise < 1:
        notes.append(f"denoise {denoise:g} (img2img or a partial pass) is not supported: SeedLab starts from noise")
    return fields


def _text(graph: dict[str, Any], value: Any, notes: list[str]) -> str | None:
    """The prompt text behind a conditioning link: through combine, area and control nodes to a text encoder."""
    for _ in range(_MAX_HOPS):
        target = _link(value)
        node = graph.get(target or "")
        if node is None:
            return None
        inputs = node["inputs"]
        for name in ("text", "text_g", "prompt", "positive", "Text", "string"):
            if name in inputs and (isinstance(inputs[name], str) or _link(inputs[name]) is not None):
                text = _follow(graph, inputs[name], ("text", "Text", "string", "value", "prompt"), ())
                if isinstance(text, str):
                    return text
        linked = [inputs[name] for name in _CONDITIONING if _link(inputs.get(name)) is not None]
        if len(linked) > 1 and not any("combine" in note for note in notes):
            notes.append(f"the conditioning combines several prompts ({node['class_type']}, area composition): "
                         "the first one is restored, the others are not")
        value = linked[0] if linked else None
    return None


def _latent_size(graph: dict[str, Any], value: Any, fields: dict[str, Any], notes: list[str]) -> None:
    """Width and height of the empty latent the pass starts from (an image input: noted, no size)."""
    for _ in range(_MAX_HOPS):
        node = graph.get(_link(value) or "")
        if node is None:
            return
        inputs = node["inputs"]
        if "width" in inputs and "height" in inputs and "Latent" in node["class_type"]:
            width = _follow(graph, inputs["width"], ("value", "int"), ())
            height = _follow(graph, inputs["height"], ("value", "int"), ())
            if width is not None and height is not None:
                fields["width"], fields["height"] = width, height
            return
        # A size preset (rgthree's "dimensions", Inspire's "preset", Essentials' "resolution"): "W x H (...)"
        preset = next((inputs[key] for key in ("dimensions", "preset", "resolution") if isinstance(inputs.get(key), str)),
                      None)
        if preset is not None:
            match = _PRESET_SIZE.match(preset)
            if match:
                fields["width"], fields["height"] = int(match.group(1)), int(match.group(2))
                overrides = [_follow(graph, inputs.get(key), ("value", "int"), ()) for key in ("width_override",
                                                                                               "height_override")]
                if all(isinstance(value, int) and value > 0 for value in overrides):  # Essentials: 0 means the preset
                    fields["width"], fields["height"] = overrides
            return
        if "pixels" in inputs or "image" in inputs:
            notes.append("the first pass starts from an input image (img2img): SeedLab starts from noise")
            return
        value = inputs.get("samples", inputs.get("latent", inputs.get("latent_image")))
