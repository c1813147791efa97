"""Group nodes and subgraphs of a ComfyUI UI workflow, expanded into their inner nodes.

A group node ("workflow/NAME" or "workflow>NAME", older frontends) is defined in extra.groupNodes[NAME]:
"nodes" (each with its "index"), "links" [from index, from slot, to index, to slot, ...] between them and
"external" [index, slot, ...] (inner outputs also used outside). The group's inputs are its inner nodes'
unlinked inputs in order, its outputs their outputs not linked inside (or external) in order, and its
widget values its inner nodes' widget values in order. A subgraph (newer frontends) is defined in
definitions.subgraphs by id, the node's type: its own nodes and links, where node -10 is the subgraph's
inputs and node -20 its outputs.

expand() gives the workflow's nodes and links with every group node and subgraph replaced by its inner
nodes (ids "outer:inner"), links rewired, within caps on nodes, links and nesting.
"""

from __future__ import annotations

from typing import Any

MAX_NODES, MAX_LINKS, MAX_DEPTH = 5_000, 50_000, 8
_IN, _OUT = -10, -20  # a subgraph's input and output nodes


class _Budget:
    def __init__(self) -> None:
        self.nodes = self.links = 0

    def spend(self, nodes: int, links: int) -> None:
        self.nodes += nodes
        self.links += links
        if self.nodes > MAX_NODES or self.links > MAX_LINKS:
            raise ValueError(f"the ComfyUI workflow's groups hold more than {MAX_NODES} nodes or "
                             f"{MAX_LINKS} links; no more are read")


def expand(workflow: dict[str, Any], nodes: list[dict[str, Any]], links: list[Any]) -> tuple[list, list]:
    """The workflow's nodes and links with group nodes and subgraphs replaced by their inner nodes."""
    extra = workflow.get("extra") if isinstance(workflow.get("extra"), dict) else {}
    groups = extra.get("groupNodes") if isinstance(extra.get("groupNodes"), dict) else {}
    definitions = workflow.get("definitions") if isinstance(workflow.get("definitions"), dict) else {}
    subgraphs = {sub["id"]: sub for sub in definitions.get("subgraphs") or []
                 if isinstance(sub, dict) and isinstance(sub.get("id"), str)}
    if not groups and not subgraphs:
        return nodes, links
    links = [list(link) for link in links if isinstance(link, list) and len(link) >= 5]
    budget = _Budget()
    for _ in range(MAX_DEPTH):  # one level of nesting at a time; deeper groups stay as they are
        nodes, links, expanded = _expand(nodes, links, groups, subgraphs, budget)
        if not expanded:
            break
    return nodes, links


def _definition(node_type: str, groups: dict[str, Any]) -> dict[str, Any] | None:
    for prefix in ("workflow/", "workflow>"):
        if node_type.startswith(prefix):
            found = groups.get(node_type[len(prefix):])
            return found if isinstance(found, dict) else None
    return None


def _expand(nodes: list, links: list, groups: dict, subgraphs: dict, budget: _Budget) -> tuple[list, list, bool]:
    """One level: each group node or subgraph in nodes replaced by its inner nodes, links rewired."""
    out_nodes: list[dict[str, Any]] = []
    outputs: dict[tuple[str, Any], tuple[str, Any]] = {}  # (group id, output slot) -> (inner id, slot)
    inputs: dict[tuple[str, Any], list[tuple[dict, str]]] = {}  # (group id, input slot) -> inner inputs
    inner_links: list[list[Any]] = []
    for node in nodes:
        group, subgraph = _definition(node["type"], groups), subgraphs.get(node["type"])
        if group is not None:
            inner, more_links = _group(node, group, outputs, inputs)
        elif subgraph is not None:
            inner, more_links = _subgraph(node, subgraph, outputs, inputs)
        else:
            out_nodes.append(node)
            continue
        budget.spend(len(inner), len(more_links))
        out_nodes.extend(inner)
        inner_links.extend(more_links)
    if len(out_nodes) == len(nodes) and not inner_links and not outputs and not inputs:
        return nodes, links, False
    rewired = []
    for link in links:
        origin = outputs.get((str(link[1]), link[2]), (link[1], link[2]))
        for inner, name in inputs.get((str(link[3]), link[4]), []):
            inner["inputs"] = [dict(slot, link=link[0]) if slot.get("name") == name else slot
                               for slot in inner.get("inputs") or [] if isinstance(slot, dict)]
        rewired.append([link[0], origin[0], origin[1], *link[3:]])
    return out_nodes, rewired + inner_links, True


def _group(node: dict, group: dict, outputs: dict, inputs: dict) -> tuple[list, list]:
    """A legacy group node's inner nodes and links; records where its outer slots lead."""
    gid = str(node["id"])
    inner = [dict(item) for item in group.get("nodes") or [] if isinstance(item, dict)
             and isinstance(item.get("type"), str) and isinstance(item.get("index"), int)]
    by_index = {item["index"]: item for item in inner}
    linked_in, linked_out, links = set(), set(), []
    for number, link in enumerate(group.get("links") or []):
        if not (isinstance(link, list) and len(link) >= 4 and link[0] in by_index and link[2] in by_index):
            continue
        link_id = f"{gid}:L{number}"
        links.append([link_id, f"{gid}:{link[0]}", link[1], f"{gid}:{link[2]}", link[3]])
        linked_in.add((link[2], link[3]))
        linked_out.add((link[0], link[1]))
        target = by_index[link[2]]
        slots = [slot for slot in target.get("inputs") or [] if isinstance(slot, dict)]
        if isinstance(link[3], int) and 0 <= link[3] < len(slots):
            slots[link[3]] = dict(slots[link[3]], link=link_id)
        target["inputs"] = slots
    external = {(item[0], item[1]) for item in group.get("external") or [] if isinstance(item, list)
                and len(item) >= 2}
    values = node.get("widgets_values") if isinstance(node.get("widgets_values"), list) else None
    counts = [len(item["widgets_values"]) if isinstance(item.get("widgets_values"), list) else 0
              for item in inner]
    position, open_inputs, open_outputs = 0, [], []
    for item, count in zip(inner, counts):
        if values is not None and sum(counts) == len(values) and count:
            item["widgets_values"] = values[position:position + count]  # the group's own values
        position += count
        for slot_number, slot in enumerate(item.get("inputs") or []):
            if isinstance(slot, dict) and (item["index"], slot_number) not in linked_in and "widget" not in slot:
                open_inputs.append((item, slot.get("name")))
        for slot_number, _ in enumerate(item.get("outputs") or []):
            if (item["index"], slot_number) not in linked_out or (item["index"], slot_number) in external:
                open_outputs.append((f"{gid}:{item['index']}", slot_number))
    for slot_number, slot in enumerate(open_outputs):
        outputs[(gid, slot_number)] = slot
    slot_number = 0
    for outer in node.get("inputs") or []:
        if isinstance(outer, dict) and "widget" not in outer and slot_number < len(open_inputs):
            inputs[(gid, _slot_of(node, outer))] = [open_inputs[slot_number]]
            slot_number += 1
    for item in inner:
        item["id"] = f"{gid}:{item['index']}"
    return inner, links


def _slot_of(node: dict, slot: dict) -> int:
    return next(number for number, item in enumerate(node.get("inputs") or []) if item is slot)


def _subgraph(node: dict, subgraph: dict, outputs: dict, inputs: dict) -> tuple[list, list]:
    """A subgraph node's inner nodes and links; records where its outer slots lead."""
    gid = str(node["id"])
    inner = [dict(item, id=f"{gid}:{item['id']}") for item in subgraph.get("nodes") or []
             if isinstance(item, dict) and isinstance(item.get("type"), str) and isinstance(item.get("id"), int)]
    by_id = {item["id"]: item for item in inner}
    links = []
    for link in subgraph.get("links") or []:
        if not isinstance(link, dict):
            continue
        origin, target = link.get("origin_id"), link.get("target_id")
        link_id = f"{gid}:L{link.get('id')}"
        if target == _OUT:
            outputs[(gid, link.get("target_slot"))] = (f"{gid}:{origin}", link.get("origin_slot"))
            continue
        item = by_id.get(f"{gid}:{target}")
        slot = link.get("target_slot")
        slots = [part for part in (item or {}).get("inputs") or [] if isinstance(part, dict)]
        if item is None or not isinstance(slot, int) or not 0 <= slot < len(slots):
            continue
        if origin == _IN:
            inputs.setdefault((gid, link.get("origin_slot")), []).append((item, slots[slot].get("name")))
            continue
        slots[slot] = dict(slots[slot], link=link_id)
        item["inputs"] = slots
        links.append([link_id, f"{gid}:{origin}", link.get("origin_slot"), item["id"], slot])
    return inner, links
