"""A ComfyUI sampler's prompts and size, read by meaning from wherever the graph holds them.

A prompt is followed from the sampler's positive or negative input through conditioning nodes (combine, area,
ControlNet: each keeps its role, so a node with both a positive and a negative input gives the one asked for) to the
node that holds the text: a text encoder ("text", "text_g", "prompt", ...), or a loader that encodes its own
prompts ("positive"/"negative" text inputs, as Efficiency Nodes', Easy-Use's and tinyterra's loaders have). A text
is a literal, a primitive, or built by a concatenation node from parts that are themselves texts. The size comes
from the node that makes the empty latent: any "width"/"height" pair (also "empty_latent_width"), or a preset
"W x H".
"""

from __future__ import annotations

import re
from typing import Any

from .graph import CONDITIONING, MAX_HOPS, MAX_SEARCHES, by_output, follow, link, nearest, switched, unpiped

_TEXT = ("populated_text", "text", "text_g", "prompt", "Text", "string", "STRING", "value", "wildcard_text", "t5xxl",
         "clip_l", "clip_g")  # the last ones: Flux's and SD3's encoders (CLIPTextEncodeFlux, CLIPTextEncodeSD3)
ROLE_TEXT = {"positive": ("positive", "text_positive", "positive_prompt", "pos", "prompt_positive", "positive_text",
                           "positive_g", "pos_g"),  # the last: SDXL encoders' and loaders' G prompt (Searge, tinyterra)
              "negative": ("negative", "text_negative", "negative_prompt", "neg", "prompt_negative", "negative_text",
                           "negative_g", "neg_g")}
_DELIMITERS = ("delimiter", "separator", "sep", "delim")
_PART = re.compile(r"(?:text|string|str|prompt)_?(?:[a-z]|\d{1,2})", re.IGNORECASE)  # text_a, string_b, text1
_PRESET_SIZE = re.compile(r"(\d{2,5})\s{0,3}[x×]\s{0,3}(\d{2,5})")  # "1024 x 1024  (square)", "SDXL 1:1 1024x1024"
_PRESET_NAME = re.compile(r"preset|resolution|dimension|aspect|size", re.IGNORECASE)  # Searge's image_size_preset
_NOT_SIZE = ("target", "crop", "tile", "seam", "mask", "guide", "max", "min", "feather", "padding")
_MAX_PARTS, _MAX_TEXT = 8, 100_000  # 8 parts, 4 levels: at most 8**4 texts looked at


def text(graph: dict[str, Any], value: Any, role: str, notes: list[str]) -> str | None:
    """The prompt text behind a sampler's `role` ("positive" or "negative") conditioning link (or the text itself,
    where a loader holds it)."""
    other, searches = "negative" if role == "positive" else "positive", 0
    for _ in range(MAX_HOPS):
        if isinstance(value, str):
            return value
        node = graph.get(link(value) or "")
        if node is None:
            return None
        inputs = node["inputs"]
        choice = by_output(graph, value) or switched(graph, inputs) or unpiped(graph, value)
        if choice is not None:
            value = choice
            continue
        for name in ROLE_TEXT[role] + _TEXT:
            if name in inputs and (isinstance(inputs[name], str) or link(inputs[name]) is not None):
                if name in ROLE_TEXT[role] and _is_conditioning(graph, inputs[name]):
                    break  # ControlNetApplyAdvanced and the like: this role's conditioning goes on upstream
                found = string(graph, inputs[name])
                if isinstance(found, str):
                    return found
        if "ZeroOut" in node["class_type"]:  # the conditioning zeroed: no text is encoded for this role
            notes.append(f"the {role} conditioning is zeroed ({node['class_type'][:40]}): no {role} prompt is read")
            return None
        linked = [inputs[name] for name in (role, *CONDITIONING, "clip_regions") if link(inputs.get(name)) is not None
                  and name != other]  # clip_regions: the Cutoff nodes' base prompt
        if len({str(item) for item in linked}) > 1 and not any("combine" in note for note in notes):
            notes.append(f"the conditioning combines several prompts ({node['class_type'][:60]}, area composition): "
                         "the first one is restored, the others are not")
        # a pipe or context output (FromBasicPipe, rgthree's Context): the role's conditioning it carries
        searches += not linked
        value = linked[0] if linked else nearest(graph, link(value) or "", (role,)) if searches <= MAX_SEARCHES \
            else None
    return None


def _is_conditioning(graph: dict[str, Any], value: Any) -> bool:
    """Whether a linked role input carries conditioning (a node with clip, conditioning or text encoder inputs)
    rather than a text (a primitive, a string node)."""
    node = graph.get(link(value) or "") or {"inputs": {}}
    return any(name in node["inputs"] for name in ("clip", "conditioning", "conditioning_1", "conditioning_to",
                                                   "positive", "negative", "control_net"))


def string(graph: dict[str, Any], value: Any, depth: int = 0) -> str | None:
    """A text input's value: a literal, a primitive or string node's value, or a concatenation of such texts."""
    for _ in range(MAX_HOPS):
        if isinstance(value, str):
            return value
        node = graph.get(link(value) or "")
        if node is None or depth > 4:
            return None
        inputs = node["inputs"]
        parts = [name for name in inputs if _PART.fullmatch(name)]
        delimiter = next((inputs[name] for name in _DELIMITERS if name in inputs), None)
        choice = switched(graph, inputs)
        if choice is not None:
            value = choice
            continue
        if len(parts) >= 2 and (delimiter is not None or "concat" in node["class_type"].lower()):
            return _joined(graph, inputs, parts[:_MAX_PARTS], delimiter, depth)
        name = next((name for name in _TEXT if name in inputs), None)
        if name is None:
            found = follow(graph, value, ())
            return found if isinstance(found, str) else None
        value = inputs[name]
    return None


def _joined(graph: dict[str, Any], inputs: dict[str, Any], parts: list[str], delimiter: Any,
            depth: int) -> str | None:
    """A concatenation node's text: its parts joined by its delimiter (ComfyUI's StringConcatenate and Comfyroll's
    keep every part; WAS's, with clean_whitespace, strips them and leaves out the empty ones)."""
    delimiter = string(graph, delimiter, depth + 1) if delimiter is not None else ""
    if not isinstance(delimiter, str):
        return None
    delimiter = "\n" if delimiter == "\\n" else delimiter
    texts = []
    for name in sorted(parts) if "clean_whitespace" in inputs else parts:
        part = string(graph, inputs[name], depth + 1)
        if not isinstance(part, str):
            return None
        texts.append(part)
    if "clean_whitespace" in inputs:
        clean = follow(graph, inputs["clean_whitespace"], ()) == "true"
        texts = [part.strip() if clean else part for part in texts]
        texts = [part for part in texts if part]
    joined = delimiter.join(texts)
    return joined if len(joined) <= _MAX_TEXT else None


def latent_size(graph: dict[str, Any], value: Any, fields: dict[str, Any], notes: list[str]) -> None:
    """Width and height of the empty latent a pass starts from (an image input: noted, no size)."""
    searches = 0
    for _ in range(MAX_HOPS):
        node = graph.get(link(value) or "")
        if node is None:
            return
        inputs = node["inputs"]
        if (piped := unpiped(graph, value)) is not None:
            value = piped
            continue
        if size_from(graph, inputs, fields):
            return
        if "pixels" in inputs or "image" in inputs:
            notes.append("the first pass starts from an input image (img2img): SeedLab starts from noise")
            _image_size(graph, inputs.get("pixels", inputs.get("image")), fields)
            return
        names = ("samples", "latent", "latent_image", "LATENT", "latents")
        found = next((inputs[name] for name in names if link(inputs.get(name)) is not None), None)
        searches += found is None
        if found is None and searches <= MAX_SEARCHES:
            found = nearest(graph, link(value) or "", names)  # a pipe or context: the latent it carries
        value = found


def _image_size(graph: dict[str, Any], value: Any, fields: dict[str, Any]) -> None:
    """The size an img2img pass's image is scaled to before it is encoded (ImageScale's width and height)."""
    for _ in range(MAX_HOPS):
        node = graph.get(link(value) or "")
        if node is None or size_from(graph, node["inputs"], fields):
            return
        value = next((node["inputs"][name] for name in ("image", "pixels", "images") if name in node["inputs"]), None)


def size_from(graph: dict[str, Any], inputs: dict[str, Any], fields: dict[str, Any]) -> bool:
    """Put the width and height a node's inputs give into `fields`: a size preset ("832 x 1216", then Essentials'
    overrides where not 0), else a width and height pair (also "empty_latent_width", ...). False if none."""
    if _preset_size(inputs, fields):
        overrides = [follow(graph, inputs.get(key), ("value", "int")) for key in ("width_override", "height_override")]
        if all(isinstance(side, int) and not isinstance(side, bool) and side > 0 for side in overrides):
            fields["width"], fields["height"] = overrides  # Essentials: 0 means the preset
        return True
    for width_name in [name for name in inputs if name.endswith("width") and not name.startswith(_NOT_SIZE)]:
        height_name = width_name[:-5] + "height"
        source = link(inputs[width_name])
        if source is not None and source == link(inputs.get(height_name)) and source in graph and \
                inputs is not graph[source]["inputs"] and _preset_size(graph[source]["inputs"], fields):
            return True  # both from one node that computes them (Comfyroll's aspect ratios): its preset, if any
        sides = [follow(graph, inputs.get(name), ("value", "int", "width" if name == width_name else "height"))
                 for name in (width_name, height_name)]
        if all(isinstance(side, int) and not isinstance(side, bool) for side in sides):
            fields["width"], fields["height"] = sides
            return True
    return False


def _preset_size(inputs: dict[str, Any], fields: dict[str, Any]) -> bool:
    """A size preset's width and height ("832 x 1216", "3:4 portrait 896x1152"; swapped where the node swaps)."""
    presets = [value for key, value in inputs.items() if isinstance(value, str) and _PRESET_NAME.search(key)]
    match = next((found for preset in presets if (found := _PRESET_SIZE.search(preset[:200]))), None)
    if match is None:
        return False
    size = [int(match.group(1)), int(match.group(2))]
    fields["width"], fields["height"] = size[::-1] if inputs.get("swap_dimensions") == "On" else size
    return True
