"""Plots: A1111's X/Y/Z plot over any recipe field, every cell a full recipe made as a solo image.

    python -m seedlab plot --prompt "a red circle" --x "seed: 1-5 (+2)" --y "Steps: 10, 20" --out plot/

An axis is "NAME: VALUES". NAME is a recipe field (seed, num_inference_steps, scheduler, ...), `size`
(WxH: width and height together) or `prompt_sr` (A1111's Prompt S/R), or one of A1111's axis labels
("Seed", "Var. seed", "Steps", "CFG Scale", "Prompt S/R", "Sampler", ...). VALUES are A1111's:
"1, 5, 9" (CSV: "a, b" in quotes is one value), "1-5", "1-5 (+2)", "1-10 [5]" (five values evenly
spaced, rounded for whole-number fields), "0.1-0.5 (+0.1)", and -1 on a seed axis draws a seed.

Each cell is the base recipe (the prompt and recipe options) with its axes' values applied, checked
by admission like any request, and generated alone with its own generator (generation's per-image
path): a cell is the image its recipe makes solo, bit for bit, and its link reproduces it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.generation import Result
from ..engine.recipe import FieldError, Recipe, RecipeError
from ..files.links import result_record
from ..files.sheets import save_plot_sheet
from ..serving.admission import Admission
from .axes import Axis, parse_axes
from .render import Where, render
from .viewer import write_viewer


@dataclass(frozen=True)
class PlotCell:
    """One cell: its position on each axis (0 where the plot has no such axis) and its full recipe."""

    x: int
    y: int
    z: int
    recipe: Recipe


@dataclass(frozen=True)
class Plot:
    """The axes and every cell, in x/y/z order (x changes fastest, then y, then z)."""

    x: Axis
    y: Axis | None
    z: Axis | None
    cells: tuple[PlotCell, ...]

    @property
    def recipes(self) -> list[Recipe]:
        return [cell.recipe for cell in self.cells]

    def texts(self, cell: PlotCell) -> dict[str, str | None]:
        """The cell's value on each axis, as text (None where the plot has no such axis)."""
        return {key: None if axis is None else axis.texts[getattr(cell, key)]
                for key, axis in (("x", self.x), ("y", self.y), ("z", self.z))}

    def generation_order(self) -> list[int]:
        """Cell numbers in the order to make them: expensive changes (model and dtype, then the scheduler)
        as rarely as possible, otherwise in x/y/z order. Any order gives the same pixels."""
        first: dict[tuple, int] = {}  # where each model and each scheduler first appears
        for recipe in self.recipes:
            first.setdefault((recipe.model, recipe.dtype), len(first))
            first.setdefault((recipe.scheduler,), len(first))

        def cost(number: int) -> tuple[int, int]:
            recipe = self.cells[number].recipe
            return first[recipe.model, recipe.dtype], first[(recipe.scheduler,)]

        return sorted(range(len(self.cells)), key=cost)

    def to_json(self) -> dict[str, Any]:
        return {"x": self.x.to_json(), "y": self.y and self.y.to_json(), "z": self.z and self.z.to_json()}


def plot_recipes(admission: Admission, values: Mapping[str, Any], x: Axis, y: Axis | None = None,
                 z: Axis | None = None, *, max_cells: int | None = None,
                 options: tuple[str, str, str] = ("x", "y", "z")) -> Plot:
    """Every cell of an X/Y/Z plot as a validated Recipe; ValueError naming the axis (by `options`) and value.

    `values` are the base recipe's untrusted fields (as for Admission.recipe; unset ones take each cell's
    model's defaults). The cell count is bounded by `max_cells` (default: the server's max_images); the
    compute budget is the caller's to charge (admission.charge(plot.recipes, visitor)).
    """
    # 1. The axes: no two set the same field; the cell count within the limit.
    axes = [(option, axis) for option, axis in zip(options, (x, y, z)) if axis is not None]
    taken: dict[str, str] = {}
    for option, axis in axes:
        for field in axis.fields:
            if field in taken:
                raise ValueError(f"{option}: {axis.label} sets {field}, which {taken[field]} sets too")
            taken[field] = option
    limit = admission.limits.max_images if max_cells is None else max_cells
    count = math.prod(len(axis.values) for _, axis in axes)
    if count > limit:
        sizes = " x ".join(str(len(axis.values)) for _, axis in axes)
        raise ValueError(f"{options[0]}: a plot here makes at most {limit} images, and {sizes} axis values make "
                         f"{count}")
    prompt = values.get("prompt") or ""

    # 2. Each value alone on the base recipe, so a refusal names its axis and value.
    for option, axis in axes:
        if axis.name == "prompt_sr" and axis.values[0] not in prompt:
            raise ValueError(f"{option}: Prompt S/R looks for {axis.values[0]!r} in the prompt, and the prompt "
                             f"{prompt[:80]!r} does not contain it")
        for index, _text in enumerate(axis.texts):
            _cell_recipe(admission, values, [(option, axis, index)], prompt)

    # 3. Every cell (combinations can still be refused: a scheduler another model lacks).
    cells = []
    for zi, yi, xi in itertools.product(*(range(len(axis.values) if axis else 1) for axis in (z, y, x))):
        chosen = [(option, axis, index) for option, axis, index in zip(options, (x, y, z), (xi, yi, zi))
                  if axis is not None]
        cells.append(PlotCell(xi, yi, zi, _cell_recipe(admission, values, chosen, prompt)))
    return Plot(x, y, z, tuple(cells))


def _cell_recipe(admission: Admission, values: Mapping[str, Any], chosen: list[tuple[str, Axis, int]],
                 prompt: str) -> Recipe:
    """The recipe with these axis values; its scheduler named by class, as generation records it."""
    fields = dict(values)
    for _, axis, index in chosen:
        fields.update(axis.changes(index, prompt))
    try:
        recipe = admission.recipe(fields)
    except (RecipeError, FieldError) as error:
        where = ", ".join(f"{option}: {axis.label} value {axis.texts[index][:40]!r}" for option, axis, index in chosen)
        problems = error.named(lambda f: f) if isinstance(error, RecipeError) else str(error)
        raise ValueError(f"{where}: {problems}") from None
    return recipe.replace(scheduler=admission.store.info(recipe.model).scheduler_name(recipe.scheduler))


# The command line: python -m seedlab plot ...

MAX_CLI_CELLS = 10_000  # one plot from the command line (the app's plots are bounded by its max_images)
CELLS = "cells"


def workers_from(args: argparse.Namespace) -> Where:
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be a positive integer, got {args.workers}")
    return Where(args.workers, args.ray, args.device or "auto")


def run(args: argparse.Namespace, admission: Admission, values: dict[str, Any], threads: int | None) -> int:
    """`python -m seedlab plot`: cell PNGs, a sheet per Z value and the viewer; exit 1 if some cell failed."""
    import torch

    threads = threads or torch.get_num_threads()  # None: torch's own count (a GPU), recorded with each image
    # 1. Axes and cells, all checked before a model loads; the CLI user is the host, so a model axis is allowed.
    axes = parse_axes([(getattr(args, key), f"--{key}") for key in "xyz"])  # every bad axis named at once
    for axis in axes:
        for model in axis.values if axis is not None and axis.name == "model" else ():
            if model not in admission.store.allowed:
                admission.store.allowed.append(model)
    plot = plot_recipes(admission, {**values, "seed": args.seed}, *axes, max_cells=MAX_CLI_CELLS,
                        options=("--x", "--y", "--z"))
    admission.charge(plot.recipes, None)
    workers = workers_from(args)
    make_folder(args.out)

    # 2. Every cell alone, expensive changes least often; JSON lines in x/y/z order as soon as they can be.
    paths = [args.out / CELLS / f"x{cell.x}-y{cell.y}-z{cell.z}.png" for cell in plot.cells]
    records: dict[int, dict] = {}
    printed = 0
    for number, item, _ in render(admission.store, plot.recipes, paths, threads=threads,
                                  order=plot.generation_order(), workers=workers):
        records[number] = _record(plot, number, item, paths[number].relative_to(args.out), args.base_url)
        while printed in records and args.json:
            print(json.dumps({**records[printed], "path": str(args.out / records[printed]["path"])}), flush=True)
            printed += 1

    # 3. A sheet per Z value, then the viewer.
    ordered = [records[number] for number in range(len(plot.cells))]
    sheets = write_sheets(plot, ordered, args.out, values.get("prompt") or "")
    cells = [{"x": cell.x, "y": cell.y, "z": cell.z, **{k: record[k] for k in ("path", "fingerprint", "link",
                                                                            "recipe")}}
             for cell, record in zip(plot.cells, ordered) if "error" not in record]
    viewer = write_viewer(args.out, values.get("prompt") or "", plot.to_json(), cells)
    failed = [record for record in ordered if "error" in record]
    print(f"plot: {len(ordered) - len(failed)} of {len(ordered)} cells in {args.out / CELLS}, "
          f"{len(sheets)} sheet(s), viewer {viewer}", file=sys.stderr)
    if failed:
        print(f"plot: {len(failed)} cells failed ({failed[0]['error']}); run the same command to make them",
              file=sys.stderr)
    return 1 if failed else 0


def _record(plot: Plot, number: int, item: Result | str, path: Path, base_url: str) -> dict[str, Any]:
    """A cell as the JSON lines, the sheet's chunk and the viewer list it."""
    cell = plot.cells[number]
    record: dict[str, Any] = {**plot.texts(cell), "seed": str(cell.recipe.seed)}
    if isinstance(item, str):
        return {**record, "path": str(path), "fingerprint": "", "error": item, "recipe": cell.recipe.to_json()}
    made = result_record(item.recipe, item.fingerprint, item.environment, base_url)
    del made["prompt"]  # a plot's records give the axes' values instead
    return {**record, "path": str(path), **made}


def write_sheets(plot: Plot, records: list[dict], folder: Path, prompt: str) -> list[Path]:
    """A labelled sheet per Z value (one when there is no Z axis); `records` in x/y/z order."""
    columns = [f"{plot.x.label}: {text}" for text in plot.x.texts]
    rows = [f"{plot.y.label}: {text}" for text in plot.y.texts] if plot.y else []
    per_sheet = len(columns) * max(1, len(rows))
    written = []
    for z in range(len(plot.z.values) if plot.z else 1):
        chunk = records[z * per_sheet:(z + 1) * per_sheet]
        title = prompt if plot.z is None else f"{prompt} · {plot.z.label}: {plot.z.texts[z]}"
        name = "sheet.png" if plot.z is None else f"sheet-z{z}.png"
        cells = [{k: v for k, v in record.items() if k != "environment"} for record in chunk]
        paths = [None if "error" in record else folder / record["path"] for record in chunk]
        written.append(save_plot_sheet(cells, paths, columns, rows, title, folder / name))
    return written


def make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"--out needs a folder it can write to; {folder} cannot be one ({error.strerror})") from None
