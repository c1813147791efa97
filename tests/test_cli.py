"""The CLI as other tools script it: a real subprocess, real files, JSON lines, exit codes."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import seedlab
from seedlab.cli import main
from tests.tiny import save_tiny_pipeline


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_pipeline(tmp_path_factory.mktemp("tiny"))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "seedlab", *args], capture_output=True, text=True, timeout=300)


def test_grid_writes_one_png_per_seed_matching_the_python_api(tiny_dir, tmp_path):
    run = cli("grid", "--prompt", "a red circle", "--seeds", "3, 0-1", "--out", str(tmp_path),
              "--model", str(tiny_dir), "--steps", "4", "--scheduler", "EulerAncestralDiscreteScheduler", "--json")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["seed"] for line in lines] == [3, 0, 1]
    model = seedlab.load_model(str(tiny_dir), torch.device("cpu"))
    for line in lines:
        assert {"seed", "prompt", "path", "fingerprint"} <= set(line)
        assert line["prompt"] == "a red circle"
        saved = np.asarray(Image.open(line["path"]).convert("RGB"))
        assert seedlab.fingerprint(saved) == line["fingerprint"]
        recipe = seedlab.Recipe.from_dict(line["recipe"])
        assert seedlab.generate(model, recipe).fingerprint == line["fingerprint"]


def test_vary_runs_base_and_every_variation_from_the_seed(tiny_dir, tmp_path):
    run = cli("vary", "--prompt", "a red circle", "--seed", "7", "--variation", ", on a blue background",
              "--variation", "large", "--out", str(tmp_path), "--model", str(tiny_dir), "--steps", "3", "--json")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["prompt"] for line in lines] == ["a red circle", "a red circle, on a blue background",
                                                  "a red circle, large"]
    assert {line["seed"] for line in lines} == {7}
    assert len({line["path"] for line in lines}) == 3 and len(list(tmp_path.glob("*.png"))) == 3


def test_plain_output_without_json(tiny_dir, tmp_path):
    run = cli("grid", "--prompt", "x", "--seeds", "5", "--out", str(tmp_path), "--model", str(tiny_dir), "--steps", "2")
    assert run.returncode == 0 and "seed 5" in run.stdout


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--seeds", "abc"], "--seeds"),
        (["--seeds", "-3"], "--seeds"),
        (["--seeds", "0-1000"], "--seeds"),
        (["--seeds", "1", "--steps", "0"], "--steps"),
        (["--seeds", "1", "--guidance", "x"], "--guidance"),
        (["--seeds", "1", "--guidance", "99"], "--guidance"),
        (["--seeds", "1", "--width", "65"], "--width"),
        (["--seeds", "1", "--rng", "gpu"], "--rng"),
        (["--seeds", "1", "--model", "/no/such/folder"], "--model"),
        (["--seeds", "1", "--scheduler", "NoSuch"], "--scheduler"),
        ([], "--seeds"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_naming_the_option(tiny_dir, tmp_path, capsys, args, option):
    if "--model" not in args:
        args = [*args, "--model", str(tiny_dir)]
    assert main(["grid", "--prompt", "x", "--out", str(tmp_path), *args]) == 2
    message = capsys.readouterr().err.strip().splitlines()
    assert len(message) == 1 and option in message[0], message
    assert not list(tmp_path.glob("*.png"))


def test_bad_arguments_exit_status_from_a_real_process(tmp_path):
    run = cli("vary", "--prompt", "x", "--seed", "-1", "--variation", "y", "--out", str(tmp_path))
    assert run.returncode == 2
    assert run.stderr.strip() == "seedlab: error: --seed must be an integer from 0 to 4294967295, got -1"
