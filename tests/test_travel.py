"""Seed travel: strengths along a curve, frames as recipes, exact ends, `python -m seedlab travel` end to end."""

import json

import pytest
import torch
from PIL import Image

import seedlab
from seedlab.engine.models import ModelStore
from seedlab.explore.travel import steps_draw_noise, strengths, travel_recipes
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from tests.helpers import cli_here, run_here, torch_threads


def cli(*args):
    """`python -m seedlab` in this process (run_here): a process start costs ~5 s; test_cli covers the process."""
    return run_here(*args)


@pytest.fixture(scope="module")
def admission(tiny_model_dir):
    return Admission(ModelStore([str(tiny_model_dir)], torch.device("cpu")), Limits(max_images=16))


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return seedlab.load_model(str(tiny_model_dir), torch.device("cpu"))


def test_strengths_run_from_0_to_1_along_the_curve():
    assert strengths(5) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert strengths(2) == [0.0, 1.0]
    ease_in, ease_out, both = strengths(5, "ease-in"), strengths(5, "ease-out"), strengths(5, "ease-in-out")
    assert ease_in[2] < 0.5 < ease_out[2] and both[2] == 0.5
    for values in (ease_in, ease_out, both):
        assert values[0] == 0.0 and values[-1] == 1.0 and values == sorted(values)
    with pytest.raises(ValueError, match="curve must be one of linear, ease-in"):
        strengths(5, "bounce")
    with pytest.raises(ValueError, match="frames must be a whole number from 2"):
        strengths(1)


def test_segments_chain_and_their_ends_are_the_seeds_own_recipes(admission):
    recipes = travel_recipes(admission, {"prompt": "a red circle", "num_inference_steps": 2}, [3, 7, 9], 3)
    assert [(r.seed, r.variation_seed, r.variation_strength) for r in recipes] == [
        (3, 0, 0.0), (3, 7, 0.5), (7, 0, 0.0), (7, 9, 0.5), (9, 0, 0.0)]
    assert {r.scheduler for r in recipes} == {"EulerDiscreteScheduler"}


@pytest.mark.parametrize(
    ("values", "seeds", "frames", "message"),
    [
        ({}, [3], 5, "at least two seeds"),
        ({}, [3, 3], 5, "3 follows itself"),
        ({"variation_strength": 0.5}, [3, 7], 5, "travel sets variation_strength itself"),
        ({}, [3, 7], 20, "at most 16 images, and 2 seeds at 20 frames per segment make 20"),
        ({"num_inference_steps": 0}, [3, 7], 5, "num_inference_steps must be"),
    ],
)
def test_bad_travels_are_refused(admission, values, seeds, frames, message):
    with pytest.raises(ValueError, match=message):
        travel_recipes(admission, {"prompt": "x", **values}, seeds, frames)


def test_strength_1_is_the_variation_seeds_own_image(admission, model):
    """What the last frame's recipe (seed B alone) stands for: slerp at 1 gives B's noise exactly."""
    base = admission.recipe({"prompt": "a red circle", "num_inference_steps": 2, "seed": 7})
    with torch_threads(1):
        plain = seedlab.generate(model, base)
        travelled = seedlab.generate(model, base.replace(seed=3, variation_seed=7, variation_strength=1.0))
    assert travelled.fingerprint == plain.fingerprint


@pytest.fixture(scope="module")
def travel_run(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("travel")
    run = cli("travel", "--prompt", "a red circle", "--seeds", "3,7", "--frames", "5", "--steps", "2",
              "--model", str(tiny_model_dir), "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()], out


def test_cli_travel_frames_start_and_end_at_the_seeds_solo_images(travel_run, model):
    lines, _ = travel_run
    frames = lines[:-1]
    assert [line["frame"] for line in frames] == [0, 1, 2, 3, 4]
    assert [line["strength"] for line in frames] == [0.0, 0.25, 0.5, 0.75, 0.0]
    assert [line["seed"] for line in frames] == ["3", "3", "3", "3", "7"]
    assert [line["variation_seed"] for line in frames[1:4]] == ["7", "7", "7"]
    assert len({line["fingerprint"] for line in frames}) == 5
    with torch_threads(1):  # the CLI's thread count on a CPU
        solo = {seed: seedlab.generate(model, seedlab.Recipe.from_dict({**frames[0]["recipe"], "seed": seed}))
                for seed in (3, 7)}
        assert frames[0]["fingerprint"] == solo[3].fingerprint
        assert frames[-1]["fingerprint"] == solo[7].fingerprint
        middle = seedlab.Recipe.from_dict(frames[2]["recipe"])
        assert seedlab.generate(model, middle).fingerprint == frames[2]["fingerprint"]
    for line in frames:
        assert seedlab.fingerprint(Image.open(line["path"])) == line["fingerprint"]
        assert seedlab.decode_link(line["link"])[1] == line["fingerprint"]


def test_cli_travel_writes_a_lossless_webp_and_a_gif_of_every_frame(travel_run):
    lines, out = travel_run
    animations = lines[-1]["animations"]
    assert lines[-1]["frames"] == 5
    with Image.open(animations["webp"]) as webp:
        assert webp.n_frames == 5 and webp.is_animated
        for index, line in enumerate(lines[:-1]):
            webp.seek(index)
            assert seedlab.fingerprint(webp.convert("RGB")) == line["fingerprint"]  # lossless: the frames exactly
    with Image.open(animations["gif"]) as gif:
        assert gif.n_frames == 5


@pytest.mark.parametrize(("fields", "draws"), [
    ({"scheduler": "DDIM (A1111)"}, False),
    ({"scheduler": "DDIM (A1111)", "eta_ddim": 0.5}, True),  # A1111's Eta DDIM: noise at every step
    ({"scheduler": "Euler a"}, True),
    ({"scheduler": "Euler a", "eta": 0.0}, False),  # an ancestral sampler at eta 0 draws nothing
    ({"scheduler": "Euler", "s_churn": 1.0}, True),
    ({"scheduler": "DPM++ 2M", "s_churn": 1.0}, False),  # takes no churn
    ({"scheduler": "DPM++ 2M", "hires_scale": 2.0, "hires_sampler": "Euler a"}, True),  # the second pass draws
    ({"scheduler": "DPM++ 2M", "hires_scale": 2.0}, False),
    ({"scheduler": "euler_ancestral"}, True),  # ComfyUI's, by its name
    ({"scheduler": "EulerAncestralDiscreteScheduler"}, True),
    ({"scheduler": "EulerDiscreteScheduler"}, False),
])
def test_travel_knows_which_recipes_draw_noise_while_stepping(admission, tiny_model_dir, fields, draws):
    assert steps_draw_noise(admission, seedlab.Recipe(prompt="x", model=str(tiny_model_dir), **fields)) is draws


def test_cli_travel_refuses_an_ancestral_scheduler_unless_allowed(tiny_model_dir, tmp_path):
    args = ["travel", "--prompt", "x", "--seeds", "3, 7", "--frames", "3", "--steps", "2", "--model",
            str(tiny_model_dir), "--scheduler", "EulerAncestralDiscreteScheduler"]
    run = cli(*args, "--out", str(tmp_path / "refused"))
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "draws noise at every step" in lines[0] and "--allow-ancestral" in lines[0]
    assert not (tmp_path / "refused").exists()
    run = cli(*args, "--out", str(tmp_path / "allowed"), "--allow-ancestral")
    assert run.returncode == 0, run.stderr
    assert "seedlab: note: --scheduler EulerAncestralDiscreteScheduler draws noise" in run.stderr
    assert len(list((tmp_path / "allowed" / "frames").glob("*.png"))) == 3


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--seeds", "3", "--frames", "5"], "--seeds: travel needs at least two seeds"),
        (["--seeds", "3, x", "--frames", "5"], "--seeds: 'x' is not a seed"),
        (["--seeds", "3, 7", "--frames", "1"], "--frames must be a whole number from 2"),
        (["--seeds", "3, 7", "--frames", "5", "--variation-seed", "4"], "travel sets variation_seed itself"),
    ],
)
def test_cli_bad_travels_exit_2_with_one_line(tiny_model_dir, tmp_path, capsys, args, words):
    run = cli_here(capsys, "travel", "--prompt", "x", "--model", str(tiny_model_dir), "--out", str(tmp_path / "out"),
                   *args)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
