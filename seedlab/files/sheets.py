"""Contact sheets: many images on one page, each captioned (by its seed), columns headed (by variation)."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

THUMBNAIL = 128  # the longest side of a cell, in pixels: small images are enlarged so a 20-digit seed fits
CAPTION = 16  # pixels under each cell for its caption, and above each column for its header
GAP = 4
BACKGROUND, INK, MISSING = (255, 255, 255), (20, 20, 20), (200, 200, 200)

Cell = tuple[Path | None, str]  # (image file, caption); no file: a grey box


def contact_sheet(rows: list[list[Cell]], headers: list[str] | None = None, *,
                  row_headers: list[str] | None = None, title: str | None = None,
                  header_lines: int = 1) -> Image.Image:
    """A page of captioned thumbnails, row by row, with optional column headers, row headers and a title.

    Headers wrap onto up to `header_lines` lines (a plot's axis values must be read whole), row headers onto as
    many as their row is tall; only what is longer still is shortened with an ellipsis."""
    if not rows or not any(rows):
        raise ValueError("a contact sheet needs at least one cell")
    thumbs = [[_thumbnail(path) for path, _ in row] for row in rows]
    sizes = [thumb.size for row in thumbs for thumb in row if thumb is not None] or [(THUMBNAIL, THUMBNAIL)]
    width, height = max(w for w, _ in sizes), max(h for _, h in sizes)
    columns = max(len(row) for row in rows)
    draw, font = ImageDraw.Draw(Image.new("RGB", (1, 1))), ImageFont.load_default()
    wrapped = [_wrap(draw, font, header, width, header_lines) for header in headers or []]
    above = CAPTION if title else 0
    top = above + CAPTION * max((len(lines) for lines in wrapped), default=0)
    left = THUMBNAIL + GAP if row_headers else 0
    cell_w, cell_h = width + GAP, height + CAPTION + GAP
    sheet = Image.new("RGB", (GAP + left + max(columns * cell_w, THUMBNAIL if title else 0),
                              GAP + top + len(rows) * cell_h), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    if title:
        draw.text((GAP, GAP), _fit(draw, font, title, sheet.width - 2 * GAP), fill=INK, font=font)
    for column, lines in enumerate(wrapped):
        for number, line in enumerate(lines):
            draw.text((GAP + left + column * cell_w, GAP + above + number * CAPTION), line, fill=INK, font=font)
    for r, header in enumerate(row_headers or []):
        lines = _wrap(draw, font, header, THUMBNAIL, max(1, height // CAPTION))
        for number, line in enumerate(lines):  # centred on the row's image
            y = GAP + top + r * cell_h + (height - len(lines) * CAPTION) // 2 + number * CAPTION
            draw.text((GAP, y), line, fill=INK, font=font)
    for r, (row, row_thumbs) in enumerate(zip(rows, thumbs)):
        for c, ((_, caption), thumb) in enumerate(zip(row, row_thumbs)):
            x, y = GAP + left + c * cell_w, GAP + top + r * cell_h
            if thumb is None:
                draw.rectangle((x, y, x + width - 1, y + height - 1), fill=MISSING)
            else:
                sheet.paste(thumb, (x, y))
            draw.text((x, y + height + 1), _fit(draw, font, caption, width), fill=INK, font=font)
    return sheet


def _thumbnail(path: Path | None) -> Image.Image | None:
    if path is None or not path.is_file():
        return None
    with Image.open(path) as image:
        image = image.convert("RGB")
    scale = THUMBNAIL / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    # Enlarged pixels stay sharp squares (a seed's composition is what one browses for); shrunk ones are averaged.
    return image.resize(size, Image.Resampling.NEAREST if scale > 1 else Image.Resampling.LANCZOS)


def _fit(draw: ImageDraw.ImageDraw, font, text: str, width: int) -> str:
    """The text, shortened with an ellipsis until it fits `width` pixels."""
    text = " ".join(text.split())
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "...", font=font) > width:
        text = text[:-1]
    return text + "..."


def _wrap(draw: ImageDraw.ImageDraw, font, text: str, width: int, lines: int) -> list[str]:
    """The text in lines of at most `width` pixels, broken between words (inside a word too long for a line), at
    most `lines` of them: the last one shortened with an ellipsis if the text goes on."""
    text = " ".join(text.split())
    out: list[tuple[int, str]] = []  # each line with where it starts in the text
    at = 0
    for word in text.split(" ") if text else []:
        if out and draw.textlength(f"{out[-1][1]} {word}", font=font) <= width:
            out[-1] = (out[-1][0], f"{out[-1][1]} {word}")
        else:
            while len(word) > 1 and draw.textlength(word, font=font) > width:  # wider than a line: split it
                cut = max([n for n in range(1, len(word)) if draw.textlength(word[:n], font=font) <= width] or [1])
                out.append((at, word[:cut]))
                word, at = word[cut:], at + cut
            out.append((at, word))
        at += len(word) + 1
    if len(out) > lines:
        out = out[:lines - 1] + [(0, _fit(draw, font, text[out[lines - 1][0]:], width))]
    return [line for _, line in out] or [""]


SHEET_KEY = "seedlab-sheet"  # the PNG text chunk that lists a matrix sheet's cells


def save_matrix_sheet(records: list[dict], paths: list[Path | None], columns: list[str], out: Path) -> Path:
    """A seeds x variations matrix as one labelled PNG: a row per seed (captioned "seed S"), a column
    per prompt (headed by its variation), and every cell's recipe, fingerprint and link in its metadata."""
    from PIL.PngImagePlugin import PngInfo

    width = len(columns)
    if width == 0 or len(records) % width or len(paths) != len(records):
        raise ValueError(f"a matrix sheet needs a full grid: {len(records)} cells for {width} columns")
    rows = [[(paths[r * width + c], f"seed {records[r * width + c]['seed']}") for c in range(width)]
            for r in range(len(records) // width)]
    cells = [{"row": index // width, "column": index % width, **{key: record[key] for key in
              ("seed", "prompt", "fingerprint", "link", "recipe") if key in record}}
             for index, record in enumerate(records)]
    info = PngInfo()
    info.add_text(SHEET_KEY, json.dumps({"rows": [row[0][1].removeprefix("seed ") for row in rows],
                                         "columns": columns, "cells": cells}))
    contact_sheet(rows, headers=columns).save(out, format="PNG", pnginfo=info)
    return out


PLOT_KEY = "seedlab-plot"  # the PNG text chunk that lists a plot sheet's cells


def save_plot_sheet(cells: list[dict], paths: list[Path | None], columns: list[str], rows: list[str],
                    title: str, out: Path) -> Path:
    """One Z value of an X/Y/Z plot as a labelled PNG: a column per X value, a row per Y value (headed
    "axis: value"), each cell captioned by its fingerprint's start, and every cell's record (axis values,
    recipe, fingerprint, link) in a `seedlab-plot` text chunk."""
    from PIL.PngImagePlugin import PngInfo

    width = len(columns)
    if width == 0 or len(cells) != width * max(1, len(rows)) or len(paths) != len(cells):
        raise ValueError(f"a plot sheet needs a full grid: {len(cells)} cells for {width} x {len(rows)}")
    grid = [[(paths[r * width + c], cells[r * width + c]["fingerprint"][:12]) for c in range(width)]
            for r in range(len(cells) // width)]
    info = PngInfo()
    info.add_text(PLOT_KEY, json.dumps({"title": title, "columns": columns, "rows": rows, "cells": cells},
                                       ensure_ascii=True))
    sheet = contact_sheet(grid, headers=columns, row_headers=rows or None, title=title, header_lines=8)
    sheet.save(out, format="PNG", pnginfo=info)
    return out
