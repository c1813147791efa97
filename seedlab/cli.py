"""The command line: headless grids and variations, a contract other tools script against.

    python -m seedlab grid --prompt "a red circle" --seeds 0-7 --out out/ --json
    python -m seedlab vary --prompt "a red circle" --seed 3 --variation ", on a blue background" --out out/
    python -m seedlab reproduce "http://127.0.0.1:7860/?v=1&prompt=a+red+circle&..."   # or a PNG
    python -m seedlab plot --prompt "a red circle" --x "seed: 1-5" --y "Steps: 10, 20" --out plot/
    python -m seedlab travel --prompt "a red circle" --seeds 3,7 --frames 9 --out travel/

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
from typing import TYPE_CHECKING

from .arguments import RECIPE_OPTIONS, UsageError, build_parser
from .engine import cpu
from .engine.previews import as_preview, finished
from .engine.recipe import EMBEDDED_NAMES, SPECS, FieldError, RecipeError, new_image_model
from .engine.seeds import parse_seeds
from .engine.weights import library
from .files import info as info_command
from .serving.limits import Limits

if TYPE_CHECKING:
    from .serving.admission import Admission
    from .serving.reproduction import Original

# Torch, diffusers and the commands are imported inside the functions that run a command: `--help` and a bad
# argument are answered without them (about 5 s of CPU on a small machine).

# The command line's host allows what a Recipe allows at all (the app's limits are for public servers).
CLI_LIMITS = Limits(max_images=64, max_variations=64, max_steps=200, max_size=4096, max_prompt_chars=2000)


def option_name(field: str) -> str:
    """How the command line names a recipe field: its option."""
    return SPECS[field].cli if field in SPECS else field


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "base"


def check_values(args: argparse.Namespace) -> None:
    """Each recipe option's own type and range, and the seeds, checked without the model: what depends on it
    (sizes, schedulers, limits) is checked by admission once the model's config is read."""
    errors: list[FieldError] = []
    for name in ("prompt", "seed", *RECIPE_OPTIONS):
        value = getattr(args, name, None)
        if value is None or (value == "" and SPECS[name].kind not in ("text", "size")):
            continue
        try:
            SPECS[name].check(name, SPECS[name].coerce(value))
        except FieldError as error:
            errors.append(error)
    if errors:
        raise CLI_LIMITS.narrowed(RecipeError(errors))
    if getattr(args, "seeds", None) is not None:
        try:
            parse_seeds(args.seeds, random_allowed=True)
        except ValueError as error:  # "seeds: ..." is the command's own option
            raise UsageError("--seeds:" + str(error).removeprefix("seeds:")) from None


def _admission(args: argparse.Namespace) -> Admission:
    """The CLI user is the host: the model they name is the one allowed, in the dtype they ask for."""
    from .engine import models
    from .serving.admission import Admission

    dtype = args.dtype or "float32"
    if dtype not in SPECS["dtype"].choices:
        raise UsageError(f"--dtype must be {SPECS['dtype'].allowed()}, got {dtype!r}")
    device = models.resolve_device(args.device)
    return Admission(models.ModelStore([args.model or new_image_model()], device, dtype=dtype), CLI_LIMITS)


# Long: the numbered steps of a command read top to bottom; its imports are here so that --help needs no torch.
def run(args: argparse.Namespace) -> int:
    if args.command == "reproduce":
        return reproduce(args)
    if args.command == "info":  # metadata only: errors are ValueErrors, printed as one line with exit 2
        return info_command.run_info(args.source, args.json)
    if args.command == "finish":
        return finish(args)
    # 1. Validate everything before loading a model: bad input fails fast (config files only are read).
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads must be a positive integer")
    if not args.base_url.startswith(("http://", "https://")):
        raise UsageError(f"--base-url must start with http:// or https://, got {args.base_url!r}")
    check_values(args)  # before torch and diffusers are imported (~5 s of CPU): a typo is answered at once
    from .engine import determinism, generation, models
    from .explore import plot as plot_command
    from .explore import travel as travel_command
    from .files.links import result_record
    from .files.metadata import save_png
    from .scale import sweep as sweep_command

    admission = _admission(args)
    if args.prompt is None:  # only a pipeline without a prompt may go without one
        if not admission.store.info(admission.store.default).unconditional:
            raise UsageError(f"the following arguments are required: {SPECS['prompt'].cli}")
        args.prompt = ""
    threads = args.threads
    if args.command != "sweep" and threads is None and admission.store.device.type == "cpu":
        threads = 1  # as the app: images side by side at one thread each, the same pixels as the app's
    determinism.configure_process(threads, args.cpu_isa)
    if args.command != "sweep":
        admission.store.lanes = models.default_lanes(admission.store.device, threads or 1)
    values = {name: getattr(args, name) for name in ("prompt", *RECIPE_OPTIONS)}
    if args.command in ("plot", "travel"):  # their own axes or seeds; the recipe options as grid's
        command = plot_command if args.command == "plot" else travel_command
        return command.run(args, admission, values, threads)
    try:
        if args.command == "sweep":  # the sweep's own seed ranges and variations; the recipe as grid's
            base = admission.recipe({**values, "seed": 0})
            return sweep_command.run(args, as_preview(base) if args.preview else base)
        if args.command == "grid":
            recipes = admission.grid(values, args.seeds)
            recipes = [as_preview(recipe) for recipe in recipes] if args.preview else recipes
        else:
            recipes = admission.variations({**values, "seed": args.seed}, args.variation)
    except (RecipeError, FieldError):
        raise
    except ValueError as error:  # "seeds: ..." and "variations: ..." are the commands' own options
        message = str(error)
        for word, option in (("seeds:", "--seeds:"), ("variations:", "--variation:")):
            message = option + message.removeprefix(word) if message.startswith(word) else message
        raise UsageError(message) from None
    _make_folder(args.out)

    # 2. Load the model, then generate, writing each PNG as soon as it is ready.
    model = admission.store.get(recipes[0].model)
    for index, result in enumerate(generation.iter_generate(model, recipes)):
        suffix = _slug(result.recipe.prompt[len(args.prompt):]) if args.command == "vary" else ""
        path = args.out / f"{index:02d}-seed{result.recipe.seed}{'-' + suffix if suffix else ''}.png"
        try:
            save_png(result, path, stealth=args.stealth)
        except OSError as error:
            raise UsageError(f"--out: {path.name} cannot be written ({error.strerror})") from None
        except ValueError as error:  # the text does not fit in the image's alpha channel
            raise UsageError(f"--stealth: {error}") from None
        if args.json:
            line = {**result_record(result.recipe, result.fingerprint, result.environment, args.base_url),
                    "path": str(path)}
            print(json.dumps(line), flush=True)
        else:
            print(f"{path}  seed {result.recipe.seed}  {result.fingerprint[:16]}", flush=True)
    return 0


# Long: read, adapt to this machine, regenerate, compare: one story; its imports are here so that --help needs no torch.
def reproduce(args: argparse.Namespace) -> int:
    """Regenerate a link or a PNG and print the verdict: exit 0 when exact, 1 when the pixels differ."""
    import torch

    from .engine import determinism, generation, models
    from .engine.prompts import text_inversion
    from .engine.weights import checkpoint_files, vae_names
    from .files.metadata import save_png
    from .serving.conventions import retry_conventions
    from .serving.reproduction import Original, compare, retry_natively

    # 1. Read the original; the CLI user is the host, so --model decides which model may load.
    original = _read_original(args.source)
    recipe, notes = original.recipe, list(original.notes)
    notes += text_inversion.missing_notes(recipe.ti_hashes)  # the models folder lacks an embedding the image used
    recipe, found = checkpoint_files.resolve_hash(recipe)  # its checkpoint by hash, whatever its name here
    recipe, missing = vae_names.adapt(recipe)  # a VAE the models folder lacks: the checkpoint's own, said so
    notes += found + missing
    if args.model is not None and args.model != recipe.model:
        notes.append(f"the original names model {recipe.model!r}; --model {args.model!r} is used instead")
        recipe = recipe.replace(model=args.model, model_hash="")  # the hash named the original's file
    elif args.model is None and recipe.model not in EMBEDDED_NAMES:
        raise UsageError(f"the original names model {recipe.model!r}, which is only loaded with your permission: "
                         f"pass --model {recipe.model!r} (or another model) to use it")
    if recipe.model_hash and checkpoint_files.find_checkpoint(recipe.model) is None:
        notes.append(f"Model hash {recipe.model_hash} is not checked: {recipe.model} is not a checkpoint file here")
        recipe = recipe.replace(model_hash="")
    threads = args.threads
    if threads is None and original.environment is not None:  # the thread count changes low bits on CPU
        recorded = original.environment.threads
        if isinstance(recorded, int) and 1 <= recorded <= (os.cpu_count() or 1):
            threads = recorded
        else:  # an untrusted file or link must not start thousands of threads unasked
            notes.append(f"the original used {recorded} threads and this machine has {os.cpu_count()} cores: "
                         f"pass --threads {recorded} to match it")
    if threads is not None and threads < 1:
        raise UsageError("--threads must be a positive integer")
    cpu_isa = args.cpu_isa
    recorded_isa = original.environment.cpu_isa if original.environment is not None else None
    if cpu_isa is None and recorded_isa is not None:  # the CPU's kernels change low bits too: pin the original's
        cpu_isa = cpu.level_for(recorded_isa)
        if cpu_isa is None:
            notes.append(f"the original was computed with {cpu.describe(recorded_isa)}, which this CPU cannot run")
    if args.out is not None:
        _check_writable(args.out)

    # 2. Regenerate and compare (torch has not computed yet, so the CPU baseline still takes hold).
    determinism.configure_process(threads, cpu_isa)
    try:
        model = models.load_model(recipe.model, models.resolve_device(args.device), recipe.dtype)
        result = generation.generate(model, recipe)
    except ValueError as error:  # an unknown model or scheduler: the message names it
        raise UsageError(str(error)) from None
    original = Original(recipe, original.fingerprint, original.environment, original.pixels, tuple(notes))
    verdict = compare(result, original)
    result, verdict = retry_conventions(result, verdict, original, model)  # an older ComfyUI? A1111's CPU noise?
    if args.cpu_isa is None:  # a baseline asked for is the one used; otherwise an old original may need native
        result, verdict = retry_natively(result, verdict, original, device=model.device.type,
                                         threads=threads or torch.get_num_threads(), dtype=recipe.dtype)
    if args.out is not None:
        save_png(result, args.out)
    if args.json:
        print(json.dumps(verdict.to_dict()), flush=True)
    else:
        print(verdict.summary)
        for note in verdict.notes:
            print(f"note: {note}")
    return 0 if verdict.exact else 1


# Long: read every preview first (a bad one fails before a model loads), then render each full image.
def finish(args: argparse.Namespace) -> int:
    """`finish PNG... --out DIR`: each preview's full image (its recipe with preview_steps 0), rendered from the start
    with the preview's thread count and CPU baseline, written under the preview's file name."""
    from .engine import determinism, generation, models
    from .files.links import result_record
    from .files.metadata import save_png

    # 1. The previews and where their full images go, checked before any model loads.
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads must be a positive integer")
    originals = [_read_original(source) for source in args.sources]
    targets = [args.out / Path(source).name for source in args.sources]
    _make_folder(args.out)
    for source, target in zip(args.sources, targets):
        if target.resolve() == Path(source).resolve():
            raise UsageError(f"--out: {target} is the preview itself; choose another folder")
    if len(set(targets)) < len(targets):
        raise UsageError("--out: two previews have the same file name; finish them into separate folders")
    recipes = [finished(original.recipe) for original in originals]
    for recipe in recipes:
        if args.model is None and recipe.model not in EMBEDDED_NAMES:
            raise UsageError(f"a preview names model {recipe.model!r}, which is only loaded with your permission: "
                             f"pass --model {recipe.model!r}")
    recipes = [recipe.replace(model=args.model) if args.model else recipe for recipe in recipes]
    environment = originals[0].environment
    threads = args.threads if args.threads is not None else environment.threads if environment else 1
    if not isinstance(threads, int) or not 1 <= threads <= max(os.cpu_count() or 1, args.threads or 1):
        threads = 1  # an untrusted file must not start thousands of threads
    cpu_isa = args.cpu_isa or (cpu.level_for(environment.cpu_isa) if environment and environment.cpu_isa else None)

    # 2. Render each full image from the start (nothing of the preview is reused: its pixels are the full render's).
    determinism.configure_process(threads, cpu_isa)
    store = models.ModelStore(sorted({recipe.model for recipe in recipes}), models.resolve_device(args.device),
                              dtype=recipes[0].dtype, lanes=1)
    for recipe, target in zip(recipes, targets):
        try:
            result = generation.generate(store.get(recipe.model), recipe)
        except ValueError as error:
            raise UsageError(str(error)) from None
        save_png(result, target)
        if args.json:
            print(json.dumps({**result_record(result.recipe, result.fingerprint, result.environment, args.base_url),
                              "path": str(target)}), flush=True)
        else:
            print(f"{target}  seed {result.recipe.seed}  {result.fingerprint[:16]}", flush=True)
    return 0


def _read_original(source: str) -> Original:
    """A PNG file (by path) or a link; errors become one usage line."""
    from .serving.reproduction import original_from_link, original_from_png

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


def _check_writable(path: Path) -> None:
    """Refuse an --out file that cannot be written before anything is generated."""
    _make_folder(path.parent)
    if path.is_dir():
        raise UsageError(f"--out must be a PNG file name, and {path} is a folder")
    try:
        with open(path, "ab"):
            pass
    except OSError as error:
        raise UsageError(f"--out: {path} cannot be written ({error.strerror})") from None


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "models_dir", None) is not None:
            library.configure(args.models_dir)
        return run(args)
    except RecipeError as error:
        print(f"seedlab: error: {error.named(option_name)}", file=sys.stderr)
        return 2
    except FieldError as error:
        print(f"seedlab: error: {option_name(error.field)} {error.problem}", file=sys.stderr)
        return 2
    except (UsageError, ValueError) as error:
        print(f"seedlab: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a failure inside a pipeline: one line, not a traceback
        if os.environ.get("SEEDLAB_DEBUG"):
            raise
        text = " ".join(str(error).split())[:300]
        print(f"seedlab: error: the generation failed ({type(error).__name__}: {text}); the model may be of a kind "
              "SeedLab does not support yet. SEEDLAB_DEBUG=1 shows the traceback", file=sys.stderr)
        return 1
