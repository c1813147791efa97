"""The command line: headless grids and variations, a contract other tools script against.

    python -m seedlab grid --prompt "a red circle" --seeds 0-7 --out out/ --json
    python -m seedlab vary --prompt "a red circle" --seed 3 --variation ", on a blue background" --out out/
    python -m seedlab reproduce "http://127.0.0.1:7860/?v=1&prompt=a+red+circle&..."   # or a PNG

Bad arguments exit with status 2 and one line naming the option and what is allowed. `reproduce`
exits 0 when the pixels match the original exactly, 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from . import determinism, generation, models
from . import sweep as sweep_command
from .links import encode_link
from .metadata import save_png
from .recipe import DEFAULT_MODEL, DTYPES, RNG_SOURCES, Recipe
from .reproduction import Original, compare, original_from_link, original_from_png
from .seeds import parse_seeds

DEFAULT_BASE_URL = "http://127.0.0.1:7860/"

# Recipe field -> the option that sets it, so a recipe's error message can name the option.
_OPTIONS = {
    "num_inference_steps": "--steps",
    "guidance_scale": "--guidance",
    "negative_prompt": "--negative",
    "prompt": "--prompt",
    "seed": "--seed",
    "seeds": "--seeds",
    "scheduler": "--scheduler",
    "width": "--width",
    "height": "--height",
    "model": "--model",
    "rng": "--rng",
    "dtype": "--dtype",
}


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of argparse's usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m seedlab", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    grid = commands.add_parser("grid", help="one image per seed")
    grid.add_argument("--seeds", required=True, help='"42", "0-7" or "3, 17, 99"')
    vary = commands.add_parser("vary", help="the base prompt and each variation, all from one seed")
    vary.add_argument("--seed", required=True, type=int)
    vary.add_argument("--variation", action="append", required=True, help="appended to the prompt; repeatable")
    sweep = commands.add_parser("sweep", help="thousands of seeds to PNGs and a manifest, resumable, local or on Ray")
    sweep_command.add_arguments(sweep)
    for command in (grid, vary, sweep):
        command.add_argument("--prompt", required=True)
        command.add_argument("--out", required=True, type=Path, help="folder for the PNG files")
        command.add_argument("--model", default=None, help=f"hub id or local folder (default: {DEFAULT_MODEL})")
        command.add_argument("--steps", type=int, default=20)
        command.add_argument("--guidance", type=float, default=None,
                             help="default: the model's (2.5 for the embedded model, else 7.5)")
        command.add_argument("--scheduler", default="default", help="a diffusers scheduler class name")
        command.add_argument("--negative", default="")
        command.add_argument("--width", type=int, default=None, help="default: the model's native size")
        command.add_argument("--height", type=int, default=None, help="default: the model's native size")
        command.add_argument("--rng", choices=RNG_SOURCES, default="cpu")
        command.add_argument("--deterministic", action="store_true", help="full-determinism switches on")
        command.add_argument("--dtype", choices=DTYPES, default="float32")
        command.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
        command.add_argument("--threads", type=int, default=None, help="pin torch's intra-op thread count")
        command.add_argument("--json", action="store_true", help="print one JSON object per image")
        command.add_argument("--base-url", default=DEFAULT_BASE_URL, help="where links point (the app's address)")
    reproduce = commands.add_parser("reproduce", help="regenerate a link or a PNG and compare the pixels")
    reproduce.add_argument("source", metavar="LINK_OR_PNG", help="a SeedLab link, or a PNG that carries its recipe")
    reproduce.add_argument("--model", default=None,
                           help="the model to use (also permits the one a link names; default: embedded only)")
    reproduce.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    reproduce.add_argument("--threads", type=int, default=None,
                           help="torch's intra-op thread count (default: the original's, when it is recorded)")
    reproduce.add_argument("--out", type=Path, default=None, help="also write the regenerated image to this PNG")
    reproduce.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    return parser


def _recipe(args: argparse.Namespace, seed: int) -> Recipe:
    return Recipe(
        prompt=args.prompt,
        seed=seed,
        negative_prompt=args.negative,
        model=args.model or DEFAULT_MODEL,
        scheduler=args.scheduler,
        num_inference_steps=args.steps,
        # Without --guidance, a placeholder: run() puts the model's default in once the model is loaded.
        guidance_scale=models.STANDARD_GUIDANCE if args.guidance is None else args.guidance,
        width=args.width or 64,
        height=args.height or 64,
        rng=args.rng,
        deterministic=args.deterministic,
        dtype=args.dtype,
    )


def _name_option(message: str) -> str:
    """Turn "num_inference_steps must be ..." into "--steps must be ..."."""
    for field, option in _OPTIONS.items():
        if message.startswith(field + " ") or message.startswith(field + ":"):
            return option + message[len(field):]
    return message


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "base"


def run(args: argparse.Namespace) -> int:
    if args.command == "reproduce":
        return reproduce(args)
    if args.command == "sweep":
        return sweep_command.run(args, _recipe(args, 0))
    # 1. Validate everything before loading a model: bad input fails fast.
    seeds = parse_seeds(args.seeds) if args.command == "grid" else [args.seed]
    recipe = _recipe(args, seeds[0])
    recipes = (
        generation.grid_recipes(recipe, seeds)
        if args.command == "grid"
        else generation.variation_recipes(recipe, args.variation)
    )
    if args.threads is not None and args.threads < 1:
        raise ValueError("--threads must be a positive integer")
    if not args.base_url.startswith(("http://", "https://")):
        raise ValueError(f"--base-url must start with http:// or https://, got {args.base_url!r}")
    _make_folder(args.out)
    determinism.configure_process(args.threads)
    device = models.resolve_device(args.device)

    # 2. Load the model and fill in its native size and guidance where none was given.
    model = models.load_model(recipe.model, device, recipe.dtype)
    width, height = model.native_size
    guidance = model.default_guidance if args.guidance is None else args.guidance
    recipes = [r.replace(width=args.width or width, height=args.height or height, guidance_scale=guidance) for r in recipes]

    # 3. Generate, writing each PNG as soon as it is ready.
    for index, result in enumerate(generation.iter_generate(model, recipes)):
        suffix = _slug(result.recipe.prompt[len(args.prompt):]) if args.command == "vary" else ""
        path = args.out / f"{index:02d}-seed{result.recipe.seed}{'-' + suffix if suffix else ''}.png"
        save_png(result, path)
        if args.json:
            line = {
                "seed": result.recipe.seed,
                "prompt": result.recipe.prompt,
                "path": str(path),
                "fingerprint": result.fingerprint,
                "link": encode_link(result.recipe, result.fingerprint, result.environment, args.base_url),
                "recipe": result.recipe.to_dict(),
                "environment": result.environment.to_dict(),
            }
            print(json.dumps(line), flush=True)
        else:
            print(f"{path}  seed {result.recipe.seed}  {result.fingerprint[:16]}", flush=True)
    return 0


def reproduce(args: argparse.Namespace) -> int:
    """Regenerate a link or a PNG and print the verdict: exit 0 when exact, 1 when the pixels differ."""
    # 1. Read the original; the CLI user is the host, so --model decides which model may load.
    original = _read_original(args.source)
    recipe, notes = original.recipe, list(original.notes)
    if args.model is not None and args.model != recipe.model:
        notes.append(f"the original names model {recipe.model!r}; --model {args.model!r} is used instead")
        recipe = recipe.replace(model=args.model)
    elif args.model is None and recipe.model != DEFAULT_MODEL:
        raise UsageError(f"the original names model {recipe.model!r}, which is only loaded with your permission: "
                         f"pass --model {recipe.model!r} (or another model) to use it")
    threads = args.threads
    if threads is None and original.environment is not None:  # the thread count changes low bits on CPU
        recorded = _get(original.environment, "threads")
        if isinstance(recorded, int) and 1 <= recorded <= (os.cpu_count() or 1):
            threads = recorded
        else:  # an untrusted file or link must not start thousands of threads unasked
            notes.append(f"the original used {recorded} threads and this machine has {os.cpu_count()} cores: "
                         f"pass --threads {recorded} to match it")
    if threads is not None and threads < 1:
        raise UsageError("--threads must be a positive integer")
    if args.out is not None:
        _make_folder(args.out.parent)

    # 2. Regenerate and compare.
    determinism.configure_process(threads)
    try:
        model = models.load_model(recipe.model, models.resolve_device(args.device), recipe.dtype)
        result = generation.generate(model, recipe)
    except ValueError as error:  # an unknown model or scheduler: the message names it
        raise UsageError(str(error)) from None
    verdict = compare(result, Original(recipe, original.fingerprint, original.environment, original.pixels,
                                       tuple(notes)))
    if args.out is not None:
        save_png(result, args.out)
    if args.json:
        print(json.dumps(verdict.to_dict()), flush=True)
    else:
        print(verdict.summary)
        for note in verdict.notes:
            print(f"note: {note}")
    return 0 if verdict.exact else 1


def _read_original(source: str) -> Original:
    """A PNG file (by path) or a link; errors become one usage line."""
    try:
        if "?" in source or source.startswith("v="):
            return original_from_link(source)
        if not Path(source).is_file():
            raise ValueError(f"{source} is neither a link (http://...?v=1&...) nor a PNG file here")
        return original_from_png(source)
    except ValueError as error:
        raise UsageError(str(error)) from None


def _make_folder(folder: Path) -> None:
    """Create the output folder before any model loads, so a bad --out fails fast with one line."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file of that name, no permission, a read-only disk
        raise UsageError(f"--out needs a folder it can write to; {folder} cannot be one ({error.strerror})") from None


def _get(environment, name: str):
    return environment.get(name) if isinstance(environment, dict) else getattr(environment, name)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return run(args)
    except (UsageError, ValueError) as error:
        print(f"seedlab: error: {_name_option(str(error))}", file=sys.stderr)
        return 2
