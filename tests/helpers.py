"""Small helpers shared by tests: a pinned torch thread count, a clock tests move by hand, pixels, CompVis's noise
schedule, and the app's handlers driven in this process as the page drives them."""

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qsl

import numpy as np
import torch
from PIL import Image

STEPS = 4  # enough for the scheduler to matter, fast on the tiny model
PROMPT = "a red circle"


@contextmanager
def torch_threads(count: int):
    """Run with `count` intra-op threads (they change low bits on CPU), then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Clock:
    """A monotonic clock that only moves when a test sets `now`."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def use_models_folder(tmp_path, monkeypatch, *subfolders: str):
    """A models folder under `tmp_path` with `subfolders` made, given as a user gives it (SEEDLAB_MODELS_DIR), and
    SeedLab's hash cache beside it; nothing kept in memory from another test's folder."""
    from seedlab.engine.weights import library

    models = tmp_path / "models"
    for subfolder in subfolders or ("",):
        (models / subfolder).mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv(library.ENV, str(models))
    monkeypatch.setenv("SEEDLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(library, "_configured", None)
    monkeypatch.setattr(library, "_HASHES", library._HashCache())
    return models


def cli_here(capsys, *args):
    """The command line run in this process, as a test would run `python -m seedlab` in another (a new process costs
    ~5 s of CPU for its imports): a CompletedProcess with its exit status and what it printed. `reproduce`, which pins
    a baseline and a thread count before torch computes, and a real process's exit status are tested in processes."""
    capsys.readouterr()
    return run_here(*args)


def run_here(*args):
    """cli_here without pytest's capsys (for module-scoped fixtures): stdout and stderr caught as the command runs."""
    import io
    import subprocess
    from contextlib import redirect_stderr, redirect_stdout

    from seedlab.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(arg) for arg in args])
    return subprocess.CompletedProcess(["seedlab", *args], code, out.getvalue(), err.getvalue())


def tiny_prompted(tmp_path_factory):
    """A tiny random-weight SD pipeline and its prompt pair ("a red circle", negative "blue square"), encoded once:
    the sampler tests' model and conditioning."""
    import torch

    from tests.tiny import tiny_pipeline

    pipe = tiny_pipeline(tmp_path_factory.mktemp("tok"))
    with torch.inference_mode():
        cond, uncond = pipe.encode_prompt("a red circle", "cpu", 1, True, "blue square")
    return pipe, cond, uncond


def pixels(image) -> np.ndarray:
    """An image's RGB values: of a Result, a PIL image, or an image file's path."""
    if isinstance(image, (str, Path)):
        with Image.open(image) as opened:
            return np.asarray(opened.convert("RGB"))
    return np.asarray(getattr(image, "image", image).convert("RGB"))


def compvis_alphas_cumprod() -> np.ndarray:
    """SD 1.x's alphas_cumprod as CompVis computes them (A1111 and ComfyUI keep them): float64, scaled_linear betas."""
    betas = (torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=torch.float64) ** 2).numpy()
    return np.cumprod(1 - betas)


def solo(model, **fields):
    """The reference: one recipe generated alone, in this process, with the app's thread count."""
    from seedlab import Recipe, generate
    from tests.conftest import APP_THREADS

    with torch_threads(APP_THREADS):
        fields = {"guidance_scale": model.default_guidance, **fields}  # the app starts from the model's default
        # and reads typed prompts as A1111 does (the page's default for SD 1.x/2.x models)
        return generate(model, Recipe(model=model.name, num_inference_steps=STEPS, prompt_syntax="a1111", **fields))


def grid(app, request=None, **values):
    """The page's grid handler on `app` (a WebApp): its updates, one per step and cell."""
    return app.grid({"prompt": PROMPT, **values}, request, lambda *args, **kwargs: None)


def last(updates):
    """A generating handler's final update (it yields once per step, then its result)."""
    *_, final = updates
    return final


def page_request(query: str) -> SimpleNamespace:
    """What a page load brings: the page's query parameters and the page address as referer."""
    return SimpleNamespace(query_params=dict(parse_qsl(query, keep_blank_values=True)), session_hash="s",
                           headers={"referer": f"http://seedlab.example/?{query}"})


def read_parameters(text: str):
    """An A1111 `parameters` text as (recipe, fingerprint if SeedLab wrote it, notes), read as a PNG's chunk is."""
    from seedlab.files.metadata import read_chunks, recipe_from_reading

    reading = read_chunks({"parameters": text})
    return recipe_from_reading(reading), reading.fingerprint, list(reading.notes)
