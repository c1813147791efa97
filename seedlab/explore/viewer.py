"""The plot viewer: one self-contained HTML file beside a plot's PNGs, opened from disk, no network.

Images are referenced by their path relative to the file; the plot's data (axes, and every cell's
recipe, fingerprint and link) is embedded as JSON and shown with textContent only: recipes are user
text and never become HTML. A person picks which axis runs across (X) and down (Y), swaps them,
picks the value of the third axis, and clicks a cell to see its recipe and its link.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

VIEWER = "plot.html"

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src 'self' file: data:; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>SeedLab plot: __TITLE__</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; }
#promise { background: #eef7ee; border: 1px solid #9c9; padding: 6px 10px; }
#controls { margin: 10px 0; display: flex; gap: 12px; flex-wrap: wrap; align-items: center; }
table { border-collapse: collapse; }
th { font-weight: 600; padding: 4px; text-align: center; max-width: 160px; overflow-wrap: anywhere; }
td.cell { padding: 4px; text-align: center; cursor: pointer; border: 2px solid transparent; }
td.cell.picked { border-color: #36c; }
td.cell img { width: 128px; image-rendering: pixelated; display: block; }
td.cell code { font-size: 11px; color: #555; }
#details { margin-top: 12px; }
#recipe { background: #f6f6f6; padding: 8px; white-space: pre-wrap; overflow-wrap: anywhere; }
#link { overflow-wrap: anywhere; }
</style>
</head>
<body>
<h1>SeedLab plot</h1>
<p id="promise">Every cell is exact and linkable: its recipe regenerates the same pixels (the fingerprint under
each cell is the start of the sha256 of its pixels), and its link opens it in SeedLab and checks them.</p>
<div id="controls">
<label>X (across) <select id="x-axis"></select></label>
<label>Y (down) <select id="y-axis"></select></label>
<button id="swap" type="button">Swap X and Y</button>
<label id="z-label">Z <select id="z-value"></select></label>
</div>
<table id="plot"></table>
<div id="details" hidden>
<h2 id="cell-title"></h2>
<p>Link: <a id="link" target="_blank" rel="noopener noreferrer"></a></p>
<p>Fingerprint: <code id="fingerprint"></code></p>
<pre id="recipe"></pre>
</div>
<script type="application/json" id="plot-data">__DATA__</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("plot-data").textContent);
const keys = ["x", "y", "z"].filter(key => data.axes[key]);
const view = {x: "x", y: keys.includes("y") ? "y" : null, z: {}};
const $ = id => document.getElementById(id);

function element(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}
function legend(key, index) {
  const axis = data.axes[key];
  return axis.label + ": " + axis.values[index];
}
function others() { return keys.filter(key => key !== view.x && key !== view.y); }

function fillControls() {
  for (const [id, allowNone] of [["x-axis", false], ["y-axis", true]]) {
    const select = $(id);
    select.replaceChildren();
    if (allowNone) select.append(new Option("(none)", ""));
    for (const key of keys) select.append(new Option(data.axes[key].label + " (" + key + ")", key));
  }
  $("x-axis").value = view.x;
  $("y-axis").value = view.y || "";
  const rest = others();
  const select = $("z-value");
  select.replaceChildren();
  for (const key of rest) {
    data.axes[key].values.forEach((value, index) => {
      const option = new Option(legend(key, index), key + ":" + index);
      option.selected = (view.z[key] || 0) === index;
      select.append(option);
    });
  }
  $("z-label").hidden = rest.length === 0;
}

function render() {
  fillControls();
  const table = $("plot");
  table.replaceChildren();
  const xs = data.axes[view.x].values.length;
  const ys = view.y ? data.axes[view.y].values.length : 1;
  const head = element("tr");
  head.append(element("th", view.y ? data.axes[view.y].label + " \\\\ " + data.axes[view.x].label : ""));
  for (let i = 0; i < xs; i++) head.append(element("th", legend(view.x, i)));
  table.append(head);
  for (let j = 0; j < ys; j++) {
    const row = element("tr");
    row.append(element("th", view.y ? legend(view.y, j) : ""));
    for (let i = 0; i < xs; i++) {
      const cell = data.cells.find(c => c[view.x] === i && (!view.y || c[view.y] === j)
                                        && others().every(key => c[key] === (view.z[key] || 0)));
      const td = element("td");
      td.className = "cell";
      if (cell) {
        const img = element("img");
        img.src = cell.path;
        img.alt = "cell " + cell.index;
        td.append(img, element("code", cell.fingerprint.slice(0, 12)));
        td.dataset.index = cell.index;
        td.addEventListener("click", () => pick(cell, td));
      }
      row.append(td);
    }
    table.append(row);
  }
}

function pick(cell, td) {
  document.querySelectorAll("td.picked").forEach(node => node.classList.remove("picked"));
  td.classList.add("picked");
  $("details").hidden = false;
  $("cell-title").textContent = keys.map(key => legend(key, cell[key])).join(" · ");
  const link = $("link");
  link.textContent = cell.link;
  if (/^https?:\\/\\//.test(cell.link)) link.setAttribute("href", cell.link); else link.removeAttribute("href");
  $("fingerprint").textContent = cell.fingerprint;
  $("recipe").textContent = JSON.stringify(cell.recipe, null, 2);
}

$("x-axis").addEventListener("change", event => {
  const chosen = event.target.value;
  if (chosen === view.y) view.y = view.x;
  view.x = chosen;
  render();
});
$("y-axis").addEventListener("change", event => {
  const chosen = event.target.value || null;
  if (chosen === view.x) view.x = view.y || keys.find(key => key !== chosen);
  view.y = chosen;
  render();
});
$("swap").addEventListener("click", () => {
  if (!view.y) return;
  [view.x, view.y] = [view.y, view.x];
  render();
});
$("z-value").addEventListener("change", event => {
  const [key, index] = event.target.value.split(":");
  view.z[key] = Number(index);
  render();
});
render();
</script>
</body>
</html>
"""


def write_viewer(folder: Path, title: str, axes: dict[str, Any], cells: list[dict]) -> Path:
    """Write the viewer into `folder`: `axes` maps "x", "y", "z" to an axis's JSON (or None); each cell has
    x, y, z (value indexes), path (relative to `folder`), fingerprint, link and recipe."""
    data = {"axes": axes, "cells": [{"index": index, **cell} for index, cell in enumerate(cells)]}
    # JSON inside <script>: "<", ">" and "&" escaped, so no text in a recipe can close the element.
    text = json.dumps(data, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    head, tail = _PAGE.split("__DATA__")  # one pass each: neither placeholder is looked for in user text
    page = head.replace("__TITLE__", html.escape(title[:120])) + text + tail
    path = folder / VIEWER
    path.write_text(page, encoding="utf-8")
    return path
