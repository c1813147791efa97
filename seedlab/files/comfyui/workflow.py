"""ComfyUI's `workflow` chunk (the UI graph) as the API graph's node map, for files without a `prompt` chunk.

The UI graph has a "nodes" list, each node with its linked "inputs" and its "widgets_values" in order, and a
"links" list of [id, from node, from slot, to node, to slot, type]. The node map is {node id: {"class_type",
"inputs"}}: links by id, widget values named in the order of the node type's widgets (WIDGETS, for the common
nodes), reroutes followed and primitive nodes' values inlined. Group nodes and subgraphs are first expanded into their
inner nodes (files/comfyui/groups.py).
"""

from __future__ import annotations

from typing import Any

from .groups import expand
from .widgets import orders

MAX_NODES, MAX_LINKS = 5_000, 50_000
MAX_OUTPUTS = 64
_MAX_HOPS = 64  # a chain of reroutes longer than this is not followed (and cycles end here)
_CONTROL_VALUES = ("fixed", "increment", "decrement", "randomize")  # "control after generate"


def workflow_graph(workflow: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The UI graph as {node id: {"class_type", "inputs"}}: widget values by name, links as [node id, slot]."""
    nodes = [node for node in workflow["nodes"] if isinstance(node, dict) and isinstance(node.get("type"), str)
             and isinstance(node.get("id"), (int, str))]
    links = workflow.get("links") if isinstance(workflow.get("links"), list) else []
    if len(nodes) > MAX_NODES or len(links) > MAX_LINKS:
        raise ValueError(f"the ComfyUI workflow has {len(nodes)} nodes and {len(links)} links; at most "
                         f"{MAX_NODES} and {MAX_LINKS} are read")
    nodes, links = expand(workflow, nodes, links)
    by_id = {str(node["id"]): node for node in nodes}
    origins = {}  # link id -> (node id, output slot): [id, from node, from slot, to node, to slot, type]
    for link in links:
        if isinstance(link, list) and len(link) >= 5 and all(isinstance(part, (int, str)) for part in link[:3]):
            origins[str(link[0])] = (str(link[1]), link[2])
    notes: list[str] = []
    graph: dict[str, Any] = {}
    for key, node in by_id.items():
        if node["type"] in ("Note", "MarkdownNote"):
            continue  # text boxes on the canvas: not part of the graph
        inputs = _widget_inputs(node)
        for slot in node.get("inputs") or []:
            if isinstance(slot, dict) and isinstance(slot.get("name"), str) and slot.get("link") is not None:
                origin = _resolve(by_id, origins, str(slot["link"]))
                if origin is not None:
                    inputs[slot["name"]] = origin
        graph[key] = {"class_type": node["type"], "inputs": inputs}
        outputs = [slot.get("name") if isinstance(slot, dict) else None for slot in node.get("outputs") or []]
        if any(isinstance(name, str) for name in outputs):
            graph[key]["outputs"] = outputs[:MAX_OUTPUTS]  # by name: which input an output passes on (by_output)
    return graph, notes


def _widget_inputs(node: dict[str, Any]) -> dict[str, Any]:
    """A node's widget values by name, in the order of its type's widgets (files/comfyui/widgets.py)."""
    values = node.get("widgets_values")
    if isinstance(values, dict):  # some nodes store their widgets by name already
        return {str(name): value for name, value in values.items()}
    if not isinstance(values, list):
        return {}
    candidates = orders(node["type"])
    if not candidates:
        return _named_widgets(node, values)
    for names in candidates:  # where a node's widgets changed between versions: the order that names every value
        inputs, used = _in_order(names, values)
        if used == len(values) and len(inputs) == len([name for name in names if name is not None]):
            return inputs
    return _in_order(candidates[0], values)[0]


def _in_order(names: tuple[str | None, ...], values: list[Any]) -> tuple[dict[str, Any], int]:
    """Values named in order, as far as both go (a pack may store more after its widgets: a preview, a video),
    the seed's control value skipped where the UI wrote one; and how many values were used."""
    inputs: dict[str, Any] = {}
    position = 0
    for name in names:
        if position >= len(values):
            break
        if name is None:  # "randomize", ...; true/false in the first frontends; null where a pack hides it
            value = values[position]
            position += value is None or isinstance(value, bool) or value in _CONTROL_VALUES
            continue
        inputs[name] = values[position]
        position += 1
    return inputs, position


def _named_widgets(node: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    """A node type SeedLab does not know: its values named by the widget inputs the UI lists with it (newer
    frontends list every widget, older ones the converted ones), when they account for every value in order."""
    names = [slot["widget"]["name"] for slot in node.get("inputs") or [] if isinstance(slot, dict)
             and isinstance(slot.get("widget"), dict) and isinstance(slot["widget"].get("name"), str)]
    inputs: dict[str, Any] = {}
    position = 0
    for name in names:
        if position >= len(values):
            return {}
        inputs[name] = values[position]
        position += 1
        if "seed" in name and position < len(values) and values[position] in _CONTROL_VALUES:
            position += 1
    if not names and len(values) == 1 and isinstance(values[0], (str, int, float)):
        return {"value": values[0]}  # one widget and no names: its value, as a primitive's (a text box, a number)
    return inputs if names and position == len(values) else {}


def _resolve(by_id: dict[str, Any], origins: dict[str, Any], link: str) -> Any:
    """Where a link comes from, past reroutes; a primitive node's value inlined. None if it leads nowhere."""
    for _ in range(_MAX_HOPS):
        if link not in origins:
            return None
        node_id, slot = origins[link]
        node = by_id.get(node_id)
        if node is None:
            return None
        if node["type"] == "Reroute":
            inputs = [item for item in node.get("inputs") or [] if isinstance(item, dict)]
            if not inputs or inputs[0].get("link") is None:
                return None
            link = str(inputs[0]["link"])
            continue
        values = node.get("widgets_values")
        if node["type"] == "PrimitiveNode" and isinstance(values, list) and values:
            return values[0]  # its value, as the API graph holds it
        return [node_id, slot]
    return None
