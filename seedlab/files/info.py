"""`python -m seedlab info FILE [--json]`: what an image's metadata says, as A1111's "PNG Info" shows it.

Reads a PNG, JPEG or WebP and prints the recipe fields as the file has them and the notes, without
loading a model. The fields are shown even where this SeedLab could not run them (a size that is not
a multiple of 8, a seed out of range), with a note saying why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .metadata import partial_recipe, read_metadata


def describe(source: str | Path) -> dict[str, Any]:
    """{"format", "recipe": {field: value as read}, "notes": [...]}; ValueError (one line) when there is none."""
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"FILE must be an image file; {str(source)[:80]!r} is not a file here")
    reading = read_metadata(path)
    notes = list(reading.notes)
    try:
        notes += partial_recipe(reading)[1]
    except ValueError as error:
        notes.append(f"this SeedLab cannot run the recipe as it is: {error}")
    recipe = {name: _plain(value) for name, value in reading.fields.items()}
    return {"format": reading.format, "recipe": recipe, "notes": notes}


def run_info(source: str, as_json: bool) -> int:
    """Print what `source` says; 0 when a recipe was found (errors raise ValueError: exit 2 in the CLI)."""
    described = describe(source)
    if as_json:
        print(json.dumps(described, ensure_ascii=False))
        return 0
    print(f"format: {described['format']}")
    for name, value in described["recipe"].items():
        print(f"{name}: {json.dumps(value, ensure_ascii=False) if isinstance(value, str) else value}")
    for note in described["notes"]:
        print(f"note: {note}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options, for the full command line and for `main` alike."""
    parser.add_argument("source", metavar="FILE")
    parser.add_argument("--json", action="store_true", help='one object: {"format", "recipe", "notes"}')


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, as the full command line says it
        raise ValueError(message)


def main(argv: list[str]) -> int:
    """`python -m seedlab info ...` on its own: the metadata readers only, so torch and diffusers are never
    imported (a file is answered in a fraction of a second, not after seconds of imports)."""
    parser = _Parser(prog="python -m seedlab info", description="print the recipe an image's metadata holds")
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
        return run_info(args.source, args.json)
    except ValueError as error:
        print(f"seedlab: error: {error}", file=sys.stderr)
        return 2


def _plain(value: Any) -> Any:
    """A value as JSON can show it (tuples as lists; anything else unusual as text)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"(a {len(str(abs(value)))}-digit number)"  # 1e308 steps read as an int: 309 digits, not printed
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return str(value)[:200]
