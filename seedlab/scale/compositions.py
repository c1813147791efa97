"""A preview sweep's first screen: its images grouped by composition, one of each group first.

`python -m seedlab sweep --preview` writes, once every image is made, `composition.json` (the images in the order
to look at them, each one's group, the groups' first images) and `sheets/first-screen.png` (the first FIRST_SCREEN
of that order). The order is engine/previews.py's farthest-point grouping of 8x8 thumbnails: deterministic for the
same images, for any model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from PIL import Image

from ..engine.previews import FIRST_SCREEN, composition, thumbnail
from ..files.sheets import contact_sheet
from .manifest import PARTIAL
from .plan import Plan

COMPOSITION = "composition.json"
FIRST_SCREEN_SHEET = "first-screen.png"


def write_composition(folder: Path, plan: Plan, sheets: str) -> Path:
    """Group the sweep's images (all made) by composition; write composition.json and the first screen's sheet."""
    thumbnails = []
    for number in range(len(plan)):
        with Image.open(folder / plan.path(number)) as image:
            thumbnails.append(thumbnail(image))
    grouped = composition(thumbnails, FIRST_SCREEN)
    record = {"order": grouped.order, "group": grouped.group, "groups": len(grouped.centres),
              "first_screen": [{"image": n, "seed": str(plan.image(n)[0]), "path": plan.path(n)}
                               for n in grouped.order[:FIRST_SCREEN]]}
    path = folder / COMPOSITION
    partial = folder / PARTIAL / COMPOSITION
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text(json.dumps(record))
    os.replace(partial, path)
    cells = [(folder / plan.path(n), f"{plan.image(n)[0]} · group {grouped.group[n] + 1}")
             for n in grouped.order[:FIRST_SCREEN]]
    sheet = contact_sheet([cells[i:i + 4] for i in range(0, len(cells), 4)])
    (folder / sheets).mkdir(parents=True, exist_ok=True)
    sheet.save(folder / PARTIAL / FIRST_SCREEN_SHEET, format="PNG")
    os.replace(folder / PARTIAL / FIRST_SCREEN_SHEET, folder / sheets / FIRST_SCREEN_SHEET)
    return path
