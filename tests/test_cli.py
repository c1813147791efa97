"""The CLI as other tools script it: a real subprocess, real files, JSON lines, exit codes."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from PIL.PngImagePlugin import PngInfo

import seedlab
from seedlab.cli import main
from tests.helpers import cli_here, run_here, torch_threads
from tests.tiny import save_tiny_pipeline


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_pipeline(tmp_path_factory.mktemp("tiny"))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "seedlab", *args], capture_output=True, text=True, timeout=300)


def test_grid_writes_one_png_per_seed_matching_the_python_api(tiny_dir, tmp_path, capsys):
    run = cli_here(capsys, "grid", "--prompt", "a red circle", "--seeds", "3, 0-1", "--out", str(tmp_path),
                   "--model", str(tiny_dir), "--steps", "4", "--scheduler", "EulerAncestralDiscreteScheduler", "--json")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["seed"] for line in lines] == ["3", "0", "1"]  # seeds are text in JSON: exact past 2**53
    model = seedlab.load_model(str(tiny_dir), torch.device("cpu"))
    for line in lines:
        assert {"seed", "prompt", "path", "fingerprint"} <= set(line)
        assert line["prompt"] == "a red circle"
        assert line["environment"]["threads"] == 1  # the CLI's default on a CPU, as the app's
        saved = np.asarray(Image.open(line["path"]).convert("RGB"))
        assert seedlab.fingerprint(saved) == line["fingerprint"]
        recipe = seedlab.Recipe.from_dict(line["recipe"])
        with torch_threads(1):
            assert seedlab.generate(model, recipe).fingerprint == line["fingerprint"]


def test_vary_runs_base_and_every_variation_from_the_seed(tiny_dir, tmp_path, capsys):
    run = cli_here(capsys, "vary", "--prompt", "a red circle", "--seed", "7", "--variation", ", on a blue background",
                   "--variation", "large", "--out", str(tmp_path), "--model", str(tiny_dir), "--steps", "3", "--json")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["prompt"] for line in lines] == ["a red circle", "a red circle, on a blue background",
                                                  "a red circle, large"]
    assert {line["seed"] for line in lines} == {"7"}
    assert len({line["path"] for line in lines}) == 3 and len(list(tmp_path.glob("*.png"))) == 3


def test_plain_output_without_json(tiny_dir, tmp_path, capsys):
    run = cli_here(capsys, "grid", "--prompt", "x", "--seeds", "5", "--out", str(tmp_path), "--model", str(tiny_dir),
                   "--steps", "2")
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


def test_an_out_folder_that_cannot_be_made_exits_2_with_one_line(tiny_dir, tmp_path, capsys):
    taken = tmp_path / "a-file"
    taken.write_text("not a folder")
    for out in (taken, taken / "sub"):
        assert main(["grid", "--prompt", "x", "--seeds", "1", "--model", str(tiny_dir), "--out", str(out)]) == 2
        message = capsys.readouterr().err.strip().splitlines()
        assert len(message) == 1 and message[0].startswith("seedlab: error: --out "), message


def test_bad_arguments_exit_status_from_a_real_process(tmp_path):
    run = cli("vary", "--prompt", "x", "--seed", "-1", "--variation", "y", "--out", str(tmp_path))
    assert run.returncode == 2
    assert run.stderr.strip() == "seedlab: error: --seed must be a whole number from 0 to 18446744073709551615, got -1"


# Links, PNG metadata and `reproduce`.


@pytest.fixture(scope="module")
def grid_run(tiny_dir, tmp_path_factory):
    """One CLI grid, shared by the reproduction tests: (JSON lines, output folder)."""
    out = tmp_path_factory.mktemp("grid")
    run = run_here("grid", "--prompt", "a red circle", "--seeds", "4-5", "--out", out, "--model", tiny_dir,
                   "--steps", "3", "--json", "--base-url", "https://seedlab.example/app/")
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()], out


def test_grid_lines_carry_links_and_the_pngs_carry_their_recipe(grid_run):
    lines, _ = grid_run
    for line in lines:
        assert line["link"].startswith("https://seedlab.example/app/?v=1&prompt=a+red+circle&seed=")
        recipe, print_, environment = seedlab.decode_link(line["link"])
        assert (recipe.to_json(), print_) == (line["recipe"], line["fingerprint"])
        assert environment.threads == line["environment"]["threads"]
        recipe, print_, environment, notes = seedlab.read_png(line["path"])
        assert (recipe.to_json(), print_, environment.to_dict(), notes) == (
            line["recipe"], line["fingerprint"], line["environment"], [])


def test_reproduce_a_link_is_exact_with_exit_0(grid_run, tiny_dir):
    """In a process of its own, as a user runs it: it pins the link's baseline and threads before torch computes."""
    lines, _ = grid_run
    run = cli("reproduce", lines[1]["link"], "--model", str(tiny_dir))
    assert run.returncode == 0, run.stderr
    assert "exact" in run.stdout.lower()


def test_reproduce_a_png_is_exact_with_exit_0(grid_run, tiny_dir):
    lines, _ = grid_run
    run = run_here("reproduce", lines[0]["path"], "--model", tiny_dir, "--json")
    assert run.returncode == 0, run.stderr
    verdict = json.loads(run.stdout)
    assert verdict["exact"] and verdict["max_difference"] == 0 and "exact" in verdict["summary"].lower()


def test_reproduce_a_png_with_altered_pixels_exits_1_with_the_max_difference(grid_run, tiny_dir, tmp_path):
    lines, _ = grid_run
    with Image.open(lines[0]["path"]) as image:
        pixels, info = np.asarray(image.convert("RGB")).copy(), image.text
    pixels[10:12, 20:23, 0] ^= 4  # six pixels, one channel each, four levels apart
    chunks = PngInfo()  # the recipe chunks, kept as they were
    for key, value in info.items():
        chunks.add_text(key, value)
    Image.fromarray(pixels).save(tmp_path / "edited.png", pnginfo=chunks)
    run = run_here("reproduce", tmp_path / "edited.png", "--model", tiny_dir)
    assert run.returncode == 1, run.stderr
    assert "max difference 4 levels, 6 pixels differ" in run.stdout
    assert "exact" not in run.stdout.lower()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda link: link.replace("steps=3", "steps=0"), "link: steps (num_inference_steps) must be"),
        (lambda link: link + "&colour=red", "link: unknown key 'colour'"),
        (lambda link: link.replace("v=1", "v=9"), "link: v=9"),
        (lambda link: link.replace("&fp=", "&fp=z"), "link: fp"),
        (lambda link: "no/such/file.png", "no/such/file.png is neither a link"),
    ],
)
def test_reproduce_a_bad_link_or_file_exits_2_with_one_line(grid_run, tiny_dir, capsys, change, named):
    lines, _ = grid_run
    assert main(["reproduce", change(lines[0]["link"]), "--model", str(tiny_dir)]) == 2
    message = capsys.readouterr().err.strip().splitlines()
    assert len(message) == 1 and named in message[0], message


def test_reproduce_a_link_without_a_fingerprint_makes_it_and_says_there_is_nothing_to_compare(grid_run, tiny_dir):
    lines, _ = grid_run
    run = run_here("reproduce", lines[0]["link"].split("&fp=")[0], "--model", tiny_dir)  # a link written by hand
    assert run.returncode == 1 and "no original fingerprint or image to compare it with" in run.stdout, run.stderr


def test_reproduce_loads_a_model_a_link_names_only_with_permission(grid_run, capsys):
    lines, _ = grid_run
    assert main(["reproduce", lines[0]["link"]]) == 2
    assert "pass --model" in capsys.readouterr().err


def test_the_seed_fields_and_a_64_bit_seed_end_to_end(tiny_dir, tmp_path, capsys):
    """--variation-seed, --variation-strength, --seed-resize-from, --rng numpy-pcg64: the PNG, the link and
    `reproduce` all carry them, and the pixels match the Python API exactly."""
    seed = "6952411511246973023"
    run = cli_here(capsys, "vary", "--prompt", "a red circle", "--seed", seed, "--variation", "large", "--out",
                   str(tmp_path), "--model", str(tiny_dir), "--steps", "3", "--scheduler", "DDIMScheduler", "--rng",
                   "numpy-pcg64", "--variation-seed", "18446744073709551615", "--variation-strength", "0.25",
                   "--seed-resize-from", "48x80", "--json")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    model = seedlab.load_model(str(tiny_dir), torch.device("cpu"))
    for line in lines:
        recipe = seedlab.Recipe.from_dict(line["recipe"])
        assert (recipe.seed, recipe.variation_seed, recipe.variation_strength, recipe.seed_resize_from, recipe.rng) == (
            int(seed), 2**64 - 1, 0.25, (48, 80), "numpy-pcg64")
        assert seedlab.read_png(line["path"])[0] == recipe
        assert seedlab.decode_link(line["link"])[0] == recipe
        assert seedlab.generate(model, recipe).fingerprint == line["fingerprint"]
    again = run_here("reproduce", lines[1]["link"], "--model", tiny_dir, "--json")
    assert again.returncode == 0, again.stderr + again.stdout
    assert json.loads(again.stdout)["exact"] is True


def test_a_cuda_philox_grid_with_stealth_info_reproduces_exactly_even_stripped(tiny_dir, tmp_path, capsys):
    """--rng cuda-philox (with a variation seed) and --stealth: the PNG reproduces with exit 0, and so does a copy
    whose text chunks a site stripped, from the A1111 text hidden in its alpha channel."""
    run = cli_here(capsys, "grid", "--prompt", "a red circle", "--seeds", "11", "--out", str(tmp_path), "--model",
                   str(tiny_dir), "--steps", "3", "--rng", "cuda-philox", "--variation-seed", "12",
                   "--variation-strength", "0.3", "--stealth", "--json")
    assert run.returncode == 0, run.stderr
    (line,) = [json.loads(text) for text in run.stdout.splitlines()]
    recipe = seedlab.Recipe.from_dict(line["recipe"])
    assert (recipe.rng, recipe.variation_seed) == ("cuda-philox", 12)
    assert seedlab.read_png(line["path"])[0] == recipe
    with Image.open(line["path"]) as image:
        assert image.mode == "RGBA" and seedlab.fingerprint(image) == line["fingerprint"]
        Image.fromarray(np.asarray(image)).save(tmp_path / "stripped.png")  # pixels only, no text chunks
    model = seedlab.load_model(str(tiny_dir), torch.device("cpu"))
    with torch_threads(1):
        plain = seedlab.generate(model, recipe.replace(rng="cpu"))
        assert seedlab.generate(model, recipe).fingerprint == line["fingerprint"] != plain.fingerprint
    again = run_here("reproduce", line["path"], "--model", tiny_dir, "--json")
    assert again.returncode == 0, again.stderr + again.stdout
    assert json.loads(again.stdout)["exact"] is True
    stripped = run_here("reproduce", tmp_path / "stripped.png", "--model", tiny_dir, "--threads", "1", "--json")
    assert stripped.returncode == 0, stripped.stderr + stripped.stdout
    assert json.loads(stripped.stdout)["exact"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variation-strength", "1.5"], "--variation-strength must be a number from 0 to 1, got 1.5"),
        (["--seed-resize-from", "big"], "--seed-resize-from must be WIDTHxHEIGHT"),
        (["--rng", "numpy-pcg64", "--scheduler", "EulerAncestralDiscreteScheduler"], "--rng cannot be used here"),
        (["--rng", "cuda-philox", "--scheduler", "EulerAncestralDiscreteScheduler"], "--rng cannot be used here: rng "
                                                                                     "cuda-philox cannot drive"),
        (["--variation-seed", "-3"], "--variation-seed must be a whole number from 0 to 18446744073709551615"),
        (["--prompt", "a \udcff bad byte"], "--prompt must be valid Unicode text"),
        (["--device", "meta"], "device must be auto, cpu, cuda, cuda:N or mps"),
    ],
)
def test_bad_seed_fields_exit_2_with_one_line_naming_the_option(tiny_dir, tmp_path, capsys, args, message):
    base = ["grid", "--prompt", "x", "--seeds", "1", "--model", str(tiny_dir), "--out", str(tmp_path)]
    assert main(base + args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_reproduce_refuses_an_out_that_is_a_folder_before_generating(tiny_dir, tmp_path, capsys):
    link = seedlab.encode_link(seedlab.Recipe(prompt="x", model=str(tiny_dir)), "0" * 64, None, "http://h/")
    assert main(["reproduce", link, "--model", str(tiny_dir), "--out", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--out must be a PNG file name" in lines[0], lines


def test_a_failure_inside_a_pipeline_is_one_line_not_a_traceback(tiny_dir, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_dir, broken)
    config = json.loads((broken / "vae" / "config.json").read_text())
    (broken / "vae" / "config.json").write_text(json.dumps({**config, "scaling_factor": None}))  # decoding fails
    done = cli_here(capsys, "grid", "--model", str(broken), "--prompt", "a red circle", "--seeds", "1", "--steps", "1",
                    "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-1500:]
    assert done.stderr.startswith("seedlab: error: the generation failed (TypeError:")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("argv", [["--help"], ["grid", "--help"], ["grid", "--seeds", "1"], ["sweep", "--frames", "x"]])
def test_help_and_bad_arguments_are_answered_without_torch(argv):
    """`python -m seedlab --help` and a bad argument import no torch, diffusers or gradio (about 5 s of CPU)."""
    code = ("import runpy, sys\n"
            f"sys.argv = ['seedlab', *{argv!r}]\n"
            "try:\n    runpy.run_module('seedlab', run_name='__main__')\n"
            "except SystemExit as stop:\n    code = stop.code\n"
            "print('loaded', sorted(m for m in ('torch', 'diffusers', 'transformers', 'gradio') if m in sys.modules))\n"
            "print('exit', code)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, timeout=60)
    assert "loaded []" in out.stdout, out.stdout + out.stderr
    assert ("exit 0" if argv[-1] == "--help" else "exit 2") in out.stdout
