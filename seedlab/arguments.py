"""The command line's commands and options, torch-free: `python -m seedlab --help` and a bad argument are
answered without importing torch or diffusers (seedlab/cli.py imports what a command needs when it runs).

Each recipe field's option comes from its Spec (engine/recipe.py); each command's own options are here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .engine import cpu
from .engine.recipe import SPECS
from .engine.weights import library
from .explore.curves import CURVES, MAX_FRAMES
from .files import info as info_command
from .files.links import DEFAULT_BASE_URL
from .scale.plan import MAX_IMAGES

# The recipe fields set by options derived from their Specs; prompt and seed(s) are each command's own.
RECIPE_OPTIONS = tuple(name for name in SPECS if name not in ("prompt", "seed"))
CLI_ALIASES = {"scheduler": ("--sampler",)}  # A1111's word: --sampler "DPM++ 2M" --schedule Karras
DESCRIPTION = "The command line: headless grids and variations, a contract other tools script against."


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of argparse's usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m seedlab", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    grid = commands.add_parser("grid", help="one image per seed")
    grid.add_argument("--seeds", required=True, help='"42", "0-7" or "3, 17, 99"')
    grid.add_argument("--preview", action="store_true",
                      help="previews: each seed in fewer steps (--preview-steps, default 5), to finish later")
    vary = commands.add_parser("vary", help="the base prompt and each variation, all from one seed")
    vary.add_argument(SPECS["seed"].cli, dest="seed", required=True, help=SPECS["seed"].help)
    vary.add_argument("--variation", action="append", required=True, help="appended to the prompt; repeatable")
    sweep = commands.add_parser("sweep", help="thousands of seeds to PNGs and a manifest, resumable, local or on Ray")
    add_sweep_arguments(sweep)
    plot = commands.add_parser("plot", help="an X/Y/Z plot over any recipe fields: cell PNGs, sheets, an HTML viewer")
    add_plot_arguments(plot)
    travel = commands.add_parser("travel", help="seed travel: frames from seed to seed, an animated WebP and GIF")
    add_travel_arguments(travel)
    for command in (grid, vary, sweep, plot, travel):
        command.add_argument(SPECS["prompt"].cli, dest="prompt", default=None,
                             help=f"{SPECS['prompt'].help} (required, but for unconditional models: DDIM, DDPM)")
        command.add_argument("--out", required=True, type=Path, help="folder for the PNG files")
        add_recipe_options(command)
        command.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
        command.add_argument("--threads", type=int, default=None,
                             help="torch intra-op threads per image (grid, vary: 1 on a CPU, images side by side as "
                                  "in the app; sweep: cores / workers)")
        add_cpu_isa_option(command)
        add_models_dir_option(command)
        command.add_argument("--json", action="store_true", help="print one JSON object per image")
        command.add_argument("--base-url", default=DEFAULT_BASE_URL, help="where links point (the app's address)")
    for command in (grid, vary):
        command.add_argument("--stealth", action="store_true",
                             help="also hide the A1111 text in the PNG's alpha channel (stealth PNG info), for sites "
                                  "that strip text chunks; the RGB pixels are unchanged")
    reproduce = commands.add_parser("reproduce", help="regenerate a link or a PNG and compare the pixels")
    reproduce.add_argument("source", metavar="LINK_OR_PNG", help="a SeedLab link, or a PNG that carries its recipe")
    reproduce.add_argument("--model", default=None,
                           help="the model to use (also permits the one a link names; default: embedded ones only)")
    reproduce.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    reproduce.add_argument("--threads", type=int, default=None,
                           help="torch's intra-op thread count (default: the original's, when it is recorded)")
    add_cpu_isa_option(reproduce, default_help="the original's baseline, when it is recorded")
    add_models_dir_option(reproduce)
    reproduce.add_argument("--out", type=Path, default=None, help="also write the regenerated image to this PNG")
    reproduce.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    finish = commands.add_parser("finish", help="finish previews: each PNG's full image, bit for bit its full render")
    finish.add_argument("sources", nargs="+", metavar="PNG", help="preview PNGs (grid --preview writes them)")
    finish.add_argument("--out", required=True, type=Path, help="folder for the finished PNGs (same file names)")
    finish.add_argument("--model", default=None,
                        help="the model to use (also permits the one a preview names; default: embedded ones only)")
    finish.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    finish.add_argument("--threads", type=int, default=None,
                        help="torch's intra-op thread count (default: the preview's, when it is recorded; else 1)")
    add_cpu_isa_option(finish, default_help="the preview's baseline, when it is recorded")
    add_models_dir_option(finish)
    finish.add_argument("--json", action="store_true", help="print one JSON object per image")
    finish.add_argument("--base-url", default=DEFAULT_BASE_URL, help="where links point (the app's address)")
    info = commands.add_parser("info", help="print the recipe an image's metadata holds (PNG, JPEG, WebP); no model")
    info_command.add_arguments(info)
    return parser


def add_recipe_options(command: argparse.ArgumentParser) -> None:
    """One option per recipe field, from its Spec (name, help, allowed values); unset means the model's default."""
    for name in RECIPE_OPTIONS:
        spec = SPECS[name]
        if spec.kind == "bool":
            command.add_argument(spec.cli, dest=name, action="store_true", help=spec.help)
        else:
            command.add_argument(spec.cli, *CLI_ALIASES.get(name, ()), dest=name, default=None,
                                 metavar=spec.label.upper().replace(" ", "_"), help=f"{spec.help} ({spec.allowed()})")


def add_models_dir_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--models-dir", dest="models_dir", type=Path, default=None,
                         help="a models folder laid out as A1111's models/ or ComfyUI's (Lora/ or loras/): LoRAs named "
                              f"in prompts (<lora:NAME:W>) or --lora are read from it (default: ${library.ENV})")


def add_cpu_isa_option(command: argparse.ArgumentParser, default_help: str = "") -> None:
    default = default_help or f"SEEDLAB_CPU_ISA, else {cpu.DEFAULT}"
    command.add_argument("--cpu-isa", dest="cpu_isa", default=None, choices=cpu.LEVELS,
                         help=f"CPU kernels: avx2 caps them so pixels match on every x86-64 CPU of a vendor, "
                              f"portable also across Intel and AMD (slower), universal computes the models in "
                              f"float64 so pixels match on any CPU, ARM included, at any thread count (slowest), "
                              f"native is fastest and CPU-bound "
                              f"(default: {default})")


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The sweep's own options; the recipe options are the grid command's."""
    parser.add_argument("--seeds", required=True, help=f'"0-9999", "3, 17, 99" (at most {MAX_IMAGES} images)')
    parser.add_argument("--variation", action="append", default=[], help="appended to the prompt; repeatable")
    parser.add_argument("--preview", action="store_true",
                        help="previews (--preview-steps, default 5), then composition.json: one seed of each layout "
                             "first")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="run on Ray: alone, a local instance; with an address, that cluster")


def add_plot_arguments(parser: argparse.ArgumentParser) -> None:
    """The plot's own options; the recipe options are the grid command's."""
    for key, need in (("x", "required"), ("y", "optional"), ("z", "optional: a sheet per value")):
        parser.add_argument(f"--{key}", required=key == "x", default=None, metavar='"AXIS: VALUES"',
                            help=f'{key.upper()} axis ({need}), such as "seed: 1-5 (+2)", "Steps: 10, 20", '
                                 '"Prompt S/R: red, blue", "size: 64x64, 96x64"')
    parser.add_argument(SPECS["seed"].cli, dest="seed", default=None, help="the seed of cells no seed axis sets")
    add_worker_arguments(parser)


def add_travel_arguments(parser: argparse.ArgumentParser) -> None:
    """Travel's own options; the recipe options are the grid command's."""
    parser.add_argument("--seeds", required=True, help='the seeds to travel through, in order: "3, 7" or "3, 7, 12"')
    parser.add_argument("--frames", type=int, required=True,
                        help=f"frames per segment, both ends included (2 to {MAX_FRAMES})")
    parser.add_argument("--curve", choices=tuple(CURVES), default="linear",
                        help="how the variation strength runs from 0 to 1 (default linear)")
    parser.add_argument("--duration", type=int, default=100, help="milliseconds per frame in the animation")
    parser.add_argument("--allow-ancestral", action="store_true",
                        help="run a scheduler that draws noise while stepping (the animation jumps at each seed)")
    add_worker_arguments(parser)


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes, each making one image at a time (default: this process)")
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="run on Ray: alone, a local instance; with an address, that cluster")

