"""Small helpers shared by tests: a pinned torch thread count, and a clock tests move by hand."""

from contextlib import contextmanager

import torch


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
    import subprocess

    from seedlab.cli import main

    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["seedlab", *args], code, out, err)


def tiny_prompted(tmp_path_factory):
    """A tiny random-weight SD pipeline and its prompt pair ("a red circle", negative "blue square"), encoded once:
    the sampler tests' model and conditioning."""
    import torch

    from tests.tiny import tiny_pipeline

    pipe = tiny_pipeline(tmp_path_factory.mktemp("tok"))
    with torch.inference_mode():
        cond, uncond = pipe.encode_prompt("a red circle", "cpu", 1, True, "blue square")
    return pipe, cond, uncond
