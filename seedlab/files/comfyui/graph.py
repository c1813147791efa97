"""A ComfyUI node map read by meaning: which nodes sample, where a value comes from, what a pipe carries.

Custom node packs name their classes as they like ("KSampler (Efficient)", "easy preSampling", "ttN pipeKSampler",
"ImpactKSamplerBasicPipe"), but their inputs keep ComfyUI's own names: a node with steps and a seed (or ComfyUI's
own sampler classes) samples; a value is found by following its link to the node that holds it under the same name
(or a primitive's one value); and what a sampler lacks (its prompts, size or seed in a loader upstream) is taken
from the nearest node upstream through its other links (pipes, contexts, bundles) that holds it.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

MAX_HOPS = 64  # a chain of links longer than this is not followed (and cycles end here)
MAX_VISITS = 200_000  # links looked at in all the walks of one graph: a hostile graph costs no more
MAX_NEAREST = 256  # nodes looked at when searching upstream for a value a sampler lacks
MAX_NEAREST_INPUTS = 20_000  # and inputs looked at in one such search (a node may have 2,000)
MAX_SEARCHES = 2  # searches upstream in one walk along a value's links (a hostile chain of contexts: no more)
SAMPLER_CLASSES = ("KSampler", "KSamplerAdvanced", "SamplerCustom", "SamplerCustomAdvanced")
CONDITIONING = ("conditioning", "conditioning_1", "conditioning_to", "positive", "negative", "cond")
# Inputs that never carry the image being made: a model, text or a setting. Everything else (latents, images,
# pipes, contexts) may lead to the pass that made it.
TYPED = ("model", "clip", "vae", "guider", "sigmas", "sampler", "noise", "seed", "noise_seed", "steps", "cfg",
         "sampler_name", "scheduler", "denoise", "width", "height", "text", "text_g", "text_l", "control_net",
         "clip_vision", "upscale_model", "bbox_detector", "sam_model_opt", "segm_detector_opt", "lora_stack",
         "controlnet_stack", "optional_lora_stack", "optional_controlnet_stack")
_ANY = re.compile(r"any_\d{1,3}")
_SAMPLES = re.compile(r"(?:\w+_)?(?:model|latent|latent_image|samples|positive|guider|pipe|tuple|ctx|context)")
_NOT_SAMPLERS = ("KSamplerSelect", "Config", "Settings", "Loader", "Seed")  # nodes that hold a sampler's settings


def link(value: Any) -> str | None:
    """The node id a linked input comes from ([node id, output slot]); None for a literal value."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], (str, int)) and \
            isinstance(value[1], int) and not isinstance(value[1], bool):
        return str(value[0])
    return None


def is_node(node: Any) -> bool:
    return isinstance(node, dict) and isinstance(node.get("class_type"), str) and isinstance(node.get("inputs"), dict)


def is_sampler(node: dict[str, Any], strict: bool = True) -> bool:
    """ComfyUI's sampler classes, and any node that takes steps and a seed (a custom sampler by its inputs) and,
    unless not `strict`, something to sample: a model, a latent, conditioning or a pipe (a node holding only the
    settings, such as SD Prompt Reader's parameter generator, samples nothing; a graph whose only such nodes are
    settings nodes, as Searge's, is read from them)."""
    kind, inputs = node["class_type"], node["inputs"]
    if kind in SAMPLER_CLASSES:
        return True
    if any(word in kind for word in _NOT_SAMPLERS):
        return False
    steps = "steps" in inputs or "base_steps" in inputs  # tinyterra's SDXL samplers: base_steps and refiner_steps
    takes = steps and any(name in inputs for name in ("seed", "noise_seed", "noise")) or "KSampler" in kind and steps
    return takes and (not strict or any(_SAMPLES.fullmatch(name) for name in inputs))


def switched(graph: dict[str, Any], inputs: dict[str, Any]) -> Any:
    """What a switch node passes on, as ComfyUI runs it: "on_true"/"on_false" by its "boolean", "input{n}" by its
    "select" (Impact), the first linked "any_NN" (rgthree's Any Switch); None for a node that is no switch."""
    if "on_true" in inputs and "on_false" in inputs:
        choice = follow(graph, inputs.get("boolean", inputs.get("value")), ("boolean", "value"), switches=False)
        return inputs["on_true"] if choice is True else inputs["on_false"] if choice is False else None
    select = follow(graph, inputs.get("select"), ("select", "value", "int"), switches=False) if "select" in inputs \
        else None
    if isinstance(select, int) and not isinstance(select, bool):
        return inputs.get(f"input{select}", inputs.get(f"input_{select}"))
    alternatives = [inputs[name] for name in sorted(inputs) if _ANY.fullmatch(name) and link(inputs[name])]
    return alternatives[0] if alternatives else None


def by_output(graph: dict[str, Any], value: Any) -> Any:
    """The value a UI workflow node's output passes on, where the output is named as one of its inputs ("SEED" of
    a parameter node is its "seed" widget), or as a key of an A1111 settings text it holds (SD Prompt Reader's
    SETTINGS: "Steps: 35, ..., Seed: 2302238556, Size: 512x512"); None otherwise."""
    node = graph.get(link(value) or "")
    outputs = node.get("outputs") if node else None
    if not outputs or not isinstance(value[1], int) or not 0 <= value[1] < len(outputs) or \
            not isinstance(outputs[value[1]], str):
        return None
    wanted = _plain(outputs[value[1]])
    inputs = node["inputs"]
    found = next((item for key, item in inputs.items() if _plain(key) == wanted), None)
    if found is not None:
        return found
    settings = inputs.get("settings")
    key = {"seed": "Seed", "steps": "Steps", "cfg": "CFG scale", "width": "Size", "height": "Size"}.get(wanted)
    if key is None or not isinstance(settings, str) or len(settings) > 10_000:
        return None
    match = re.search(rf"(?:^|, ){re.escape(key)}: ([0-9.x]{{1,40}})(?:,|$)", settings)
    if match is None:
        return None
    text = match.group(1).split("x")[wanted == "height"] if key == "Size" else match.group(1)
    try:
        return float(text) if wanted == "cfg" else int(text)
    except ValueError:
        return None


def _plain(name: str) -> str:
    return "".join(char for char in name.lower() if char.isalnum())


def unpiped(graph: dict[str, Any], value: Any) -> Any:
    """Output k of a node that unpacks a pipe of numbered slots is input "any_k" of the node that packed it
    (Crystools' Pipe from any / Pipe to/edit any); None for any other link."""
    target = link(value)
    inputs = graph.get(target or "", {}).get("inputs", {})
    packed = [item for item in inputs.values() if link(item) is not None]
    if len(packed) != 1 or not isinstance(value[1], int) or value[1] < 1:
        return None
    return graph.get(link(packed[0]) or "", {}).get("inputs", {}).get(f"any_{value[1]}")


def follow(graph: dict[str, Any], value: Any, names: tuple[str, ...], through: tuple[str, ...] = (),
           switches: bool = True) -> Any:
    """The literal behind `value`: its link followed to the node holding one of `names` (past nodes that pass it on
    through an input named in `through`, or through their one linked input), or, with none of them, its one literal
    value (a primitive); None where it leads nowhere."""
    searches = 0
    for _ in range(MAX_HOPS):
        target = link(value)
        if target is None:
            return value
        node = graph.get(target)
        if node is None:
            return None
        inputs = node["inputs"]
        name = next((name for name in names if name in inputs), None)
        if name is None and names:  # "steps" from rgthree's KSampler Config "steps_total": the one named so
            named = [key for key, item in inputs.items() if key.startswith(names[0] + "_") and link(item) is None]
            name = named[0] if len(named) == 1 else None
        if name is None:
            name = next((name for name in through if link(inputs.get(name)) is not None), None)
        if name is not None:
            value = inputs[name]
            continue
        choice = by_output(graph, value)
        if choice is None and switches:  # a switch's own setting is no switch
            choice = switched(graph, inputs) or unpiped(graph, value)
        if choice is not None:
            value = choice
            continue
        literal = [item for key, item in inputs.items() if link(item) is None and not _control(key, item)]
        if len(literal) == 1:
            return literal[0]
        linked = [item for item in inputs.values() if link(item) is not None]
        if len(linked) == 1 and not literal:
            value = linked[0]  # a pass-through node (reroute, switch with one input)
            continue
        # a pipe or context output (rgthree's Context, Impact's FromBasicPipe): the value it carries, from the
        # nearest node upstream that holds it
        searches += 1
        value = nearest(graph, target, names) if names and not literal and searches <= MAX_SEARCHES else None
        if value is None:
            return None
    return None


def _control(name: str, value: Any) -> bool:
    """A primitive's "control after generate" setting, which is not its value."""
    return name.startswith("control") or value in ("fixed", "increment", "decrement", "randomize")


def nearest(graph: dict[str, Any], key: str, names: tuple[str, ...]) -> Any:
    """The first of `names` that `key` has, else that the nearest node upstream has (see upstream); None if none."""
    for found in upstream(graph, key):
        inputs = graph[found]["inputs"]
        name = next((name for name in names if inputs.get(name) is not None), None)
        if name is not None:
            return inputs[name]
    return None


def upstream(graph: dict[str, Any], key: str):
    """`key`, then the nodes upstream of it through links other than the ones named in TYPED (pipes,
    contexts, bundles, latents): breadth first, input order, at most MAX_NEAREST of them."""
    queue, seen, looked = deque([key]), {key}, 0
    while queue and looked <= MAX_NEAREST_INPUTS:
        current = queue.popleft()
        yield current
        looked += len(graph[current]["inputs"])
        for name, value in graph[current]["inputs"].items():
            target = link(value)
            if target in graph and target not in seen and name not in TYPED \
                    and len(seen) < MAX_NEAREST:
                seen.add(target)
                queue.append(target)


class Walks:
    """The upstream samplers of each node, each walk made once, all of them within one budget of visits."""

    def __init__(self, graph: dict[str, Any], strict: bool = True):
        self.graph, self.visits, self.known, self.strict = graph, 0, {}, strict

    def __call__(self, start: str) -> list[str]:
        if start not in self.known:
            self.known[start] = self._walk(start)
        return self.known[start]

    def _walk(self, start: str) -> list[str]:
        """Samplers reached from `start` through image, latent and pipe links, nearest first (depth-first, input
        order); past the graph's budget of visits it is refused."""
        found, seen, stack = [], {start}, [start]
        while stack:
            node = self.graph[stack.pop()]
            self.visits += len(node["inputs"])
            if self.visits > MAX_VISITS:
                raise ValueError("the ComfyUI graph is too large to follow from its saved images to its sampler "
                                 f"(more than {MAX_VISITS:,} links looked at)")
            for name, value in reversed(list(node["inputs"].items())):
                target = link(value)
                if target is None or target in seen or target not in self.graph:
                    continue
                if name in CONDITIONING or name in TYPED:
                    continue
                seen.add(target)
                if is_sampler(self.graph[target], self.strict):
                    found.append(target)
                stack.append(target)
        return found
