"""Plots: the axis syntax, cells as admitted recipes, cell == solo, and `python -m seedlab plot` end to end."""

import json
import random
import subprocess
import sys

import pytest
import torch
from PIL import Image

import seedlab
from seedlab.engine.models import ModelStore
from seedlab.engine.seeds import random_seeds
from seedlab.explore.axes import A1111_AXES, parse_axis
from seedlab.explore.plot import plot_recipes
from seedlab.explore.render import render
from seedlab.files.sheets import PLOT_KEY
from seedlab.serving.admission import Admission
from seedlab.serving.budget import IMAGE_CALLS, Speed
from seedlab.serving.limits import Limits
from tests.helpers import cli_here, run_here, torch_threads


def cli(*args):
    """`python -m seedlab` in this process (run_here): a process start costs ~5 s; test_cli covers the process."""
    return run_here(*args)


def cli_process(*args):
    return subprocess.run([sys.executable, "-m", "seedlab", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def admission(tiny_model_dir):
    return Admission(ModelStore([str(tiny_model_dir)], torch.device("cpu")), Limits(max_images=16))


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return seedlab.load_model(str(tiny_model_dir), torch.device("cpu"))


# The value syntax.


@pytest.mark.parametrize(
    ("text", "name", "values"),
    [
        ("seed: 1, 5, 9", "seed", [1, 5, 9]),
        ("seed: 1-5", "seed", [1, 2, 3, 4, 5]),
        ("seed: 5-1", "seed", [5, 4, 3, 2, 1]),
        ("seed: 1-5 (+2)", "seed", [1, 3, 5]),
        ("seed: 10-1 (-3)", "seed", [10, 7, 4, 1]),
        ("Steps: 1-10 [5]", "num_inference_steps", [1, 3, 6, 8, 10]),  # evenly spaced, rounded
        ("seed: 0-18446744073709551615 [3]", "seed", [0, 2**63, 2**64 - 1]),  # exact past a float's integers
        ("CFG Scale: 0.1-0.5 (+0.1)", "guidance_scale", [0.1, 0.2, 0.3, 0.4, 0.5]),
        ("guidance_scale: 1-2 [3]", "guidance_scale", [1.0, 1.5, 2.0]),
        ("Var. strength: 0, 0.25, 1", "variation_strength", [0.0, 0.25, 1.0]),
        ("Var. seed: 7, 8", "variation_seed", [7, 8]),
        ('Prompt S/R: red, "blue, green"', "prompt_sr", ["red", "blue, green"]),
        ('negative_prompt: "", "blurry, dark", square', "negative_prompt", ["blurry, dark", "square"]),
        ("Size: 64x64, 32X48", "size", [(64, 64), (32, 48)]),
        ("width: 32, 64", "width", [32, 64]),
        ("height: 32-64 (+32)", "height", [32, 64]),
        ("Sampler: Euler a, DPM++ 2M Karras, DDIM, DDIMScheduler", "scheduler",
         ["Euler a", "DPM++ 2M Karras", "DDIMScheduler", "DDIMScheduler"]),  # A1111's own run as A1111 runs them
        ("Schedule type: Karras, exponential, SGMUniform", "schedule", ["Karras", "Exponential", "SGM Uniform"]),
        ("Hires upscaler: Latent, Latent (nearest-exact)", "hires_upscaler", ["Latent", "Latent (nearest-exact)"]),
        ("Denoising: 0.3-0.7 [3]", "denoising_strength", [0.3, 0.5, 0.7]),
        ("Checkpoint name: embedded, other/model", "model", ["embedded", "other/model"]),
        ("RNG source: cpu, numpy-pcg64", "rng", ["cpu", "numpy-pcg64"]),
        ("seed_resize_from: 32x32, 64x48", "seed_resize_from", [(32, 32), (64, 48)]),
        ("deterministic: on, off", "deterministic", [True, False]),
        ("dtype: float32", "dtype", ["float32"]),
        ("prompt: a red circle, a blue square", "prompt", ["a red circle", "a blue square"]),
    ],
)
def test_axis_values(text, name, values):
    axis = parse_axis(text)
    assert axis.name == name
    assert list(axis.values) == values
    assert len(axis.texts) == len(values)


def test_every_a1111_label_is_an_alias_whatever_its_case():
    for label, field in A1111_AXES.items():
        value = {"size": "64x64", "prompt_sr": "a, b", "scheduler": "Euler", "model": "embedded", "rng": "cpu",
                 "negative_prompt": "x", "schedule": "Karras", "hires_sampler": "Euler",
                 "hires_upscaler": "Latent"}.get(field, "1")
        assert parse_axis(f"{label.upper()}: {value}").name == field
        assert parse_axis(f"  {label.lower()} : {value}").name == field


def test_minus_one_on_a_seed_axis_draws_a_seed_and_keeps_it():
    axis = parse_axis("seed: -1, 3", rng=random.Random(5))
    drawn = random_seeds(1, random.Random(5))[0]
    assert axis.values == (drawn, 3) and axis.texts == (str(drawn), "3")
    assert parse_axis("Var. seed: -1", rng=random.Random(5)).values == (drawn,)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("steps: 0", ["--x: Steps value '0'", "from 1 to 200"]),
        ("Steps: 2.5", ["--x: Steps value '2.5'", "whole number from 1 to 200"]),
        ("CFG Scale: 99", ["--x: Guidance scale value '99'", "from 0 to 50"]),
        ("Var. strength: 0-2 (+0.5)", ["--x: Variation strength value '0-2 (+0.5)'", "from 0 to 1"]),
        ("size: 65x64", ["--x: Size value '65x64'", "multiple of 8"]),
        ("size: big", ["--x: Size value 'big'", "WIDTHxHEIGHT"]),
        ("seed: 5-1 (+1)", ["--x: Seed value '5-1 (+1)'", "never goes from 5 to 1"]),
        ("seed: 0-99999", ["--x: Seed value '0-99999'", "more than 1000"]),
        ("seed: -2", ["--x: Seed value '-2'", "from 0 to 18446744073709551615"]),
        ("rng: gpu", ["--x: RNG source value 'gpu'", "one of cpu, device"]),
        ("deterministic: maybe", ["--x: Full determinism value 'maybe'", "true or false"]),
        ("Prompt S/R: red", ["--x: Prompt S/R needs the text to find"]),
        ("colour: red", ["--x: 'colour' is not an axis", "CFG Scale"]),
        ("seed 1-5", ['--x must be "NAME: VALUES"']),
        ("seed: , ,", ["--x: Seed needs at least one value"]),
    ],
)
def test_bad_axes_name_the_option_the_axis_the_value_and_what_is_allowed(text, words):
    with pytest.raises(ValueError) as caught:
        parse_axis(text, "--x")
    for word in words:
        assert word in str(caught.value)


# Cells: admitted recipes.


def test_cells_are_full_recipes_in_x_y_z_order(admission, tiny_model_dir):
    plot = plot_recipes(admission, {"prompt": "a red circle", "num_inference_steps": 3},
                        parse_axis("seed: 1, 2, 3"), parse_axis("Prompt S/R: red, blue"),
                        parse_axis("size: 64x64, 32x48"))
    assert len(plot.cells) == 12
    assert [(c.x, c.y, c.z) for c in plot.cells[:4]] == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0)]
    last = plot.cells[-1].recipe
    assert (last.seed, last.prompt, last.width, last.height) == (3, "a blue circle", 32, 48)
    assert {c.recipe.num_inference_steps for c in plot.cells} == {3}
    assert {c.recipe.scheduler for c in plot.cells} == {"EulerDiscreteScheduler"}  # named as generation records it
    assert {c.recipe.model for c in plot.cells} == {str(tiny_model_dir)}
    assert plot.texts(plot.cells[-1]) == {"x": "3", "y": "blue", "z": "32x48"}


def test_a_server_refusal_names_the_axis_and_the_value(admission):
    with pytest.raises(ValueError, match=r"^--y: Steps value '60': num_inference_steps must be at most 50"):
        plot_recipes(admission, {"prompt": "x"}, parse_axis("seed: 1"), parse_axis("Steps: 2, 60"),
                     options=("--x", "--y", "--z"))
    with pytest.raises(ValueError, match=r"^x: Scheduler value 'NoSuch': scheduler must be one of"):
        plot_recipes(admission, {"prompt": "x"}, parse_axis("sampler: NoSuch"))


def test_prompt_sr_needs_its_first_value_in_the_prompt(admission):
    with pytest.raises(ValueError, match="Prompt S/R looks for 'green' in the prompt"):
        plot_recipes(admission, {"prompt": "a red circle"}, parse_axis("Prompt S/R: green, blue"))


def test_two_axes_may_not_set_one_field(admission):
    with pytest.raises(ValueError, match="y: Size sets width, which x sets too"):
        plot_recipes(admission, {"prompt": "x"}, parse_axis("width: 32, 64"), parse_axis("size: 64x64"))


def test_the_count_limit_and_the_budget_count_every_cell(tiny_model_dir):
    store = ModelStore([str(tiny_model_dir)], torch.device("cpu"))
    small = Admission(store, Limits(max_images=16))
    axes = parse_axis("seed: 1-5"), parse_axis("Steps: 1-4")
    with pytest.raises(ValueError, match="at most 16 images, and 5 x 4 axis values make 20"):
        plot_recipes(small, {"prompt": "x"}, *axes)
    assert len(plot_recipes(small, {"prompt": "x"}, *axes, max_cells=20).cells) == 20
    # One second per model call: 16 cells of 1 to 4 steps (40 calls) and 2 calls each besides (32) pass the 120 s
    # request limit, 4 times as many steps do not.
    priced = Admission(store, Limits(max_images=16), speed=Speed(a=1 / 4096, b=0.0, measured=4096))
    plot = plot_recipes(priced, {"prompt": "x"}, parse_axis("seed: 1-4"), parse_axis("Steps: 1-4"))
    charged = priced.charge(plot.recipes, "visitor")
    assert charged == pytest.approx(sum(priced.speed.seconds(recipe, priced.noise_per_pixel(recipe.model))
                                             for recipe in plot.recipes))
    assert 40 + 16 * IMAGE_CALLS <= charged < 40 + 16 * IMAGE_CALLS + 0.1  # every cell priced, its noise nearly free
    plot = plot_recipes(priced, {"prompt": "x"}, parse_axis("seed: 1-4"), parse_axis("Steps: 4, 8, 12, 16"))
    with pytest.raises(ValueError, match="would take about"):
        priced.charge(plot.recipes, "other visitor")


def test_expensive_axes_change_least_often(admission):
    plot = plot_recipes(admission, {"prompt": "x", "num_inference_steps": 2},
                        parse_axis("Sampler: Euler, DDIMScheduler"), parse_axis("seed: 1, 2, 3"))
    order = plot.generation_order()
    schedulers = [plot.cells[number].recipe.scheduler for number in order]
    assert schedulers == ["Euler"] * 3 + ["DDIMScheduler"] * 3  # A1111's Euler, run as A1111 runs it
    assert sorted(order) == list(range(6))


def test_every_cell_is_its_recipe_made_solo(admission, model, tmp_path):
    plot = plot_recipes(admission, {"prompt": "a red circle", "num_inference_steps": 2, "seed": 1, "variation_seed": 2},
                        parse_axis("Var. strength: 0, 0.5"), parse_axis("Sampler: Euler, DDIMScheduler"),
                        parse_axis("size: 64x64, 32x48"))
    paths = [tmp_path / f"{number}.png" for number in range(len(plot.cells))]
    with torch_threads(1):
        made = {number: item for number, item, _ in render(admission.store, plot.recipes, paths, threads=1,
                                                          order=plot.generation_order(), progress=False)}
        assert len(made) == 8 and len({item.fingerprint for item in made.values()}) == 8
        for number, cell in enumerate(plot.cells):
            solo = seedlab.generate(model, cell.recipe)
            assert made[number].recipe == cell.recipe
            assert made[number].fingerprint == solo.fingerprint
            assert seedlab.fingerprint(Image.open(paths[number])) == solo.fingerprint


def test_a_plot_made_again_keeps_its_cells_unless_the_cpu_baseline_changed(admission, tmp_path, monkeypatch):
    """Kernels change low bits as thread counts do: a cell made under another baseline is made again."""
    plot = plot_recipes(admission, {"prompt": "a red circle", "num_inference_steps": 1}, parse_axis("seed: 1, 2"))
    paths = [tmp_path / f"{number}.png" for number in range(len(plot.cells))]

    def made_now() -> list[bool]:
        with torch_threads(1):
            return [now for _, _, now in render(admission.store, plot.recipes, paths, threads=1, progress=False)]

    assert made_now() == [True, True]
    assert made_now() == [False, False]  # kept: same recipe, threads and baseline, pixels as recorded
    monkeypatch.setattr(seedlab.engine.cpu, "in_force", lambda: "native:avx512")
    assert made_now() == [True, True]


# The command line.


@pytest.fixture(scope="module")
def plot_run(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("plot")
    run = cli("plot", "--prompt", "a red circle", "--x", "seed: 1-5 (+2)", "--y", "num_inference_steps: 2, 3",
              "--model", str(tiny_model_dir), "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()], out


def test_cli_plot_makes_every_cell_as_its_solo_image(plot_run, model):
    lines, out = plot_run
    assert [(line["x"], line["y"], line["z"]) for line in lines] == [
        ("1", "2", None), ("3", "2", None), ("5", "2", None), ("1", "3", None), ("3", "3", None), ("5", "3", None)]
    assert [line["seed"] for line in lines] == ["1", "3", "5"] * 2
    with torch_threads(1):  # the CLI's thread count on a CPU
        for line in lines:
            recipe = seedlab.Recipe.from_dict(line["recipe"])
            assert recipe.num_inference_steps == int(line["y"]) and recipe.seed == int(line["x"])
            assert seedlab.generate(model, recipe).fingerprint == line["fingerprint"]
            assert seedlab.fingerprint(Image.open(line["path"])) == line["fingerprint"]
            assert seedlab.decode_link(line["link"])[:2] == (recipe, line["fingerprint"])


def test_cli_plot_writes_a_labelled_sheet_listing_every_cell(plot_run):
    lines, out = plot_run
    with Image.open(out / "sheet.png") as sheet:
        chunk = json.loads(sheet.text[PLOT_KEY])
        assert sheet.width > 3 * 128 and sheet.height > 2 * 128  # three columns, two rows of thumbnails
    assert chunk["columns"] == ["Seed: 1", "Seed: 3", "Seed: 5"]
    assert chunk["rows"] == ["Steps: 2", "Steps: 3"]
    assert [cell["fingerprint"] for cell in chunk["cells"]] == [line["fingerprint"] for line in lines]
    assert [cell["link"] for cell in chunk["cells"]] == [line["link"] for line in lines]
    assert [cell["recipe"] for cell in chunk["cells"]] == [line["recipe"] for line in lines]
    viewer = (out / "plot.html").read_text()
    assert "Every cell is exact and linkable" in viewer
    assert all(line["fingerprint"] in viewer for line in lines)


def test_cli_plot_run_again_keeps_the_cells_already_made(plot_run, tiny_model_dir):
    lines, out = plot_run
    before = {line["path"]: (out / line["path"]).stat().st_mtime_ns for line in lines}
    run = cli("plot", "--prompt", "a red circle", "--x", "seed: 1-5 (+2)", "--y", "num_inference_steps: 2, 3",
              "--model", str(tiny_model_dir), "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    assert [json.loads(line) for line in run.stdout.splitlines()] == lines
    assert {path: (out / path).stat().st_mtime_ns for path in before} == before


def test_cli_prompt_sr_replaces_the_first_value(tiny_model_dir, tmp_path):
    run = cli("plot", "--prompt", "a red circle", "--x", "prompt_sr: red, blue", "--steps", "1",
              "--model", str(tiny_model_dir), "--out", str(tmp_path), "--json")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["recipe"]["prompt"] for line in lines] == ["a red circle", "a blue circle"]
    assert [line["x"] for line in lines] == ["red", "blue"]
    assert lines[0]["fingerprint"] != lines[1]["fingerprint"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--x", "steps: 0"], "--x: Steps value '0'"),
        (["--x", "seed: 1", "--y", "colour: red"], "--y: 'colour' is not an axis"),
        (["--x", "seed: 1", "--z", "Prompt S/R: green, blue"], "--z: Prompt S/R looks for 'green'"),
        (["--x", "seed: 1", "--y", "Sampler: NoSuch"], "--y: Scheduler value 'NoSuch'"),
        (["--x", "seed: 0-999", "--y", "seed: 1"], "--y: Seed sets seed, which --x sets too"),
        (["--x", "seed: 1", "--workers", "0"], "--workers must be a positive integer"),
    ],
)
def test_cli_bad_axes_exit_2_with_one_line_naming_the_option(tiny_model_dir, tmp_path, capsys, args, words):
    run = cli_here(capsys, "plot", "--prompt", "a red circle", "--model", str(tiny_model_dir), "--out",
                   str(tmp_path / "out"), *args)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seedlab: error: ") and words in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_viewer_keeps_recipe_text_out_of_the_markup(admission, tmp_path):
    from seedlab.explore.viewer import write_viewer

    prompt = 'a red circle</script><img src=x onerror="alert(1)">&amp;'
    recipe = seedlab.Recipe(prompt=prompt)
    cell = {"x": 0, "y": 0, "z": 0, "path": "cells/x0-y0-z0.png", "fingerprint": "0" * 64,
            "link": "http://127.0.0.1:7860/?v=1", "recipe": recipe.to_json()}
    page = write_viewer(tmp_path, prompt, {"x": parse_axis("seed: 1").to_json(), "y": None, "z": None},
                        [cell]).read_text()
    assert "</script><img" not in page and "onerror=\"alert" not in page
    data = page.split('id="plot-data">')[1].split("</script>")[0]
    assert json.loads(data)["cells"][0]["recipe"]["prompt"] == prompt


def test_cli_plot_on_worker_processes_makes_the_same_cells(plot_run, tiny_model_dir, tmp_path):
    lines, _ = plot_run
    run = cli_process("plot", "--prompt", "a red circle", "--x", "seed: 1-5 (+2)", "--y", "num_inference_steps: 2, 3",
                      "--model", str(tiny_model_dir), "--out", str(tmp_path), "--json", "--workers", "2")
    assert run.returncode == 0, run.stderr
    pooled = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["fingerprint"] for line in pooled] == [line["fingerprint"] for line in lines]
    assert [line["recipe"] for line in pooled] == [line["recipe"] for line in lines]


def test_a_huge_number_in_a_range_is_refused_with_one_line_not_an_overflow():
    for text in ("guidance_scale: 1-" + "9" * 309, "CFG Scale: 1-2 (+" + "9" * 309 + ")", "seed: 1-" + "9" * 309):
        with pytest.raises(ValueError, match="at most 40 characters") as error:
            parse_axis(text, "--x")  # before: OverflowError (exit 1 and "a kind SeedLab does not support")
        assert type(error.value) is ValueError and error.value.args[0].startswith("--x: ")


def test_an_axis_is_measured_before_it_is_split():
    import tracemalloc

    text = "seed: " + "1," * 2_000_000  # 4 MB; before: split into two million strings first
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="characters long; at most 100,000 are read"):
            parse_axis(text, "--x")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MB"
