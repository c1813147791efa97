"""Rendering a list of recipes into PNG files: in this process or on workers, skipping files already made.

Plots and seed travel make their images here. Each image is generation's per-image path (a batch-1
call with its own generator), in this process (lanes) or on the worker pool / Ray actors that sweeps
use, one model at a time. A file is written under a temporary name and renamed into place, so an
interrupted run leaves whole files only; running the same command again keeps every file that holds
its cell's recipe, made at the same thread count, with pixels that match its recorded fingerprint.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..engine import cpu, generation
from ..engine.generation import Result
from ..engine.models import ModelStore
from ..engine.recipe import Recipe
from ..files.metadata import read_png, save_png


@dataclass(frozen=True)
class Where:
    """Where images are made: this process (count None), a process pool, or Ray (`ray`: "local" or an address)."""

    count: int | None = None
    ray: str | None = None
    device: str = "auto"  # for Ray actors; a process pool uses the store's device


def render(store: ModelStore, recipes: list[Recipe], paths: list[Path], *, threads: int,
           order: list[int] | None = None, workers: Where = Where(),
           progress: bool = True) -> Iterator[tuple[int, Result | str, bool]]:
    """Make every recipe into its path, yielding (number, Result or the error's line, made now) as each is ready.

    `order` is the order to make them in (default: as given); images of one model are made together.
    """
    order = list(range(len(recipes))) if order is None else order
    todo: list[int] = []
    with tqdm(total=len(recipes), unit="img", desc="images", disable=not progress, file=sys.stderr) as bar:
        for number in order:
            kept = _kept(recipes[number], paths[number], threads)
            if kept is None:
                todo.append(number)
            else:
                bar.update()
                yield number, kept, False
        for model, group in itertools.groupby(todo, key=lambda n: recipes[n].model):
            numbers = list(group)
            for number, item in _make(store, model, [recipes[n] for n in numbers], numbers, threads, workers):
                if isinstance(item, Result):
                    _save(item, paths[number])
                else:
                    bar.write(f"image {number} ({recipes[number].prompt[:40]}): {item}", file=sys.stderr)
                bar.update()
                yield number, item, True


def _make(store: ModelStore, model: str, recipes: list[Recipe], numbers: list[int], threads: int,
          workers: Where) -> Iterator[tuple[int, Result | str]]:
    """One model's images, each as a solo generation: (number, Result or the error's line)."""
    if workers.count is None and workers.ray is None:
        loaded = store.get(model)
        yield from zip(numbers, generation.iter_generate(loaded, recipes))
        return
    from ..scale.pool import Done, Pool

    if workers.ray is None:
        pool = Pool(model, workers=workers.count, threads=threads, device=str(store.device), dtype=store.dtype)
    else:
        try:
            import ray  # noqa: F401 - only to say clearly when it is missing
        except ImportError:
            raise ValueError("--ray needs the ray package: pip install -r requirements.txt") from None
        from ..scale.cluster import RayPool

        pool = RayPool(model, workers=workers.count, threads=threads, dtype=store.dtype, device=workers.device,
                       address=None if workers.ray == "local" else workers.ray)
    try:
        pool.model_info()
        for item in pool.map(recipes):
            yield numbers[item.index], item.result() if isinstance(item, Done) else item.error
    finally:
        pool.close()


def _kept(recipe: Recipe, path: Path, threads: int) -> Result | None:
    """The image already in `path` if it is this recipe's, made at `threads` and this run's CPU baseline, with
    pixels as recorded (kernels and thread counts change low bits: a resumed plot must not mix them)."""
    if not path.is_file():
        return None
    try:
        recorded, fingerprint, environment, _ = read_png(path)
        from PIL import Image

        with Image.open(path) as image:
            image = image.convert("RGB")
    except (ValueError, OSError):
        return None
    if recorded != recipe or environment is None or environment.threads != threads:
        return None
    if environment.cpu_isa != cpu.in_force():
        return None
    if generation.fingerprint(image) != fingerprint:
        return None
    return Result(recipe, image, fingerprint, environment)


def _save(result: Result, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    save_png(result, partial)
    os.replace(partial, path)
