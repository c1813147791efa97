"""`python -m seedlab sweep`: the manifest, resuming after interruptions, Ray, and bad input."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import seedlab
from seedlab.cli import main
from seedlab.scale.plan import MAX_IMAGES, Plan, parse_sweep_seeds

ROOT = Path(__file__).resolve().parent.parent
BASE_URL = "https://seedlab.example/"


def sweep_args(model_dir, out, seeds="0-5", *extra):
    return ["sweep", "--prompt", "a red circle", "--seeds", seeds, "--out", str(out), "--model", str(model_dir),
            "--steps", "3", "--workers", "2", "--threads", "1", "--base-url", BASE_URL, *extra]


def read_manifest(folder: Path) -> tuple[dict, list[dict]]:
    lines = (folder / "manifest.jsonl").read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def start(args, **kwargs) -> subprocess.Popen:
    """The CLI in its own session, so a signal to its group reaches it the way Ctrl+C in a terminal would."""
    # Ctrl+C's default action restored in the child: a test run whose process ignores SIGINT (a pool initializer
    # run in-process earlier) would pass that on, and the sweep would never see its Ctrl+C
    return subprocess.Popen([sys.executable, "-m", "seedlab", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)


def wait_for_lines(folder: Path, count: int, process: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        path = folder / "manifest.jsonl"
        if path.exists() and path.read_text().count("\n") > count:
            return
        time.sleep(0.05)
    raise AssertionError(f"the sweep did not list {count} images in time: {process.communicate()}")


def workers_of(pid: int) -> list[int]:
    """The pool's worker processes among `pid`'s children (not multiprocessing's resource tracker)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def file_states(folder: Path, lines: list[dict]) -> dict[str, tuple]:
    states = {}
    for line in lines:
        stat = (folder / line["path"]).stat()
        states[line["path"]] = (stat.st_ino, stat.st_mtime_ns, (folder / line["path"]).read_bytes())
    return states


# Seeds and the plan (no workers).


def test_sweep_seeds_are_ranges_not_lists():
    seeds = parse_sweep_seeds("10-19, 3; 100-1000088")
    assert len(seeds) == MAX_IMAGES and str(seeds) == "10-19, 3, 100-1000088"
    assert [seeds[i] for i in (0, 9, 10, 11, len(seeds) - 1)] == [10, 19, 3, 100, 1000088]
    for position in (0, 5, 10, 11, 500_000, len(seeds) - 1):
        assert seeds.position(seeds[position]) == position
    assert seeds.position(2) is None and seeds.position(20) is None and seeds.position(10**9) is None


@pytest.mark.parametrize(("spec", "named"), [
    ("0-1000000", "at most 1000000 images"), (f"0-{seedlab.MAX_SEED}", "at most"), ("5-3", "goes backwards"),
    ("abc", "'abc' is not a seed"), ("1, 1", "1 is given twice"), ("0-9, 5", "5 is given twice"), ("", "seeds must"),
    (f"{seedlab.MAX_SEED + 1}", "is not a seed"),
])
def test_bad_sweep_seeds_are_refused_with_the_reason(spec, named):
    with pytest.raises(ValueError, match=named):
        parse_sweep_seeds(spec)


def test_plan_numbers_every_seed_and_variation_once():
    plan = Plan.make(parse_sweep_seeds("7, 0-2"), "a red circle", [", large", "blue"])
    images = [plan.image(n) for n in range(len(plan))]
    assert images[:4] == [(7, 0), (7, 1), (7, 2), (0, 0)] and len(set(images)) == len(plan) == 12
    assert all(plan.number(*image) == n for n, image in enumerate(images))
    assert plan.prompts == ("a red circle", "a red circle, large", "a red circle, blue")
    assert len({plan.path(n) for n in range(len(plan))}) == 12
    assert plan.number(8, 0) is None and plan.number(7, 3) is None


# Running it.


@pytest.fixture(scope="module")
def local_run(tiny_model_dir, tmp_path_factory):
    """One finished local sweep with a variation: (folder, header, lines)."""
    out = tmp_path_factory.mktemp("local")
    assert main(sweep_args(tiny_model_dir, out, "0-4", "--variation", ", large",
                           "--scheduler", "EulerAncestralDiscreteScheduler")) == 0
    return out, *read_manifest(out)


def test_the_manifest_lists_every_image_once_with_its_recipe_link_and_environment(local_run, tiny_model_dir):
    out, header, lines = local_run
    assert header["parameters"]["seeds"] == "0-4" and header["parameters"]["variations"] == [", large"]
    assert header["parameters"]["threads"] == 1
    assert sorted((line["seed"], line["variation"]) for line in lines) == [(s, v) for s in range(5) for v in (0, 1)]
    for line in lines:
        pixels = np.asarray(Image.open(out / line["path"]).convert("RGB"))
        assert seedlab.fingerprint(pixels) == line["fingerprint"]
        assert line["prompt"] == ("a red circle" if line["variation"] == 0 else "a red circle, large")
        recipe, fingerprint, environment, notes = seedlab.read_png(out / line["path"])
        assert (recipe.to_dict(), fingerprint, environment.to_dict(), notes) == (
            line["recipe"], line["fingerprint"], line["environment"], [])
        assert line["environment"]["threads"] == 1
        recipe, fingerprint, environment = seedlab.decode_link(line["link"])
        assert line["link"].startswith(BASE_URL)
        assert (recipe.to_dict(), fingerprint) == (line["recipe"], line["fingerprint"])
    assert sorted(p.name for p in (out / "sheets").iterdir()) == ["sheet-00000.png"]
    assert not list((out / ".partial").iterdir())


def test_sweep_images_equal_in_process_generation(local_run, tiny_model_dir):
    _, _, lines = local_run
    seedlab.configure_process()
    model = seedlab.load_model(str(tiny_model_dir), torch.device("cpu"))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for line in lines[:4]:
            result = seedlab.generate(model, seedlab.Recipe.from_dict(line["recipe"]))
            assert (result.fingerprint, result.environment.to_dict()) == (line["fingerprint"], line["environment"])
    finally:
        torch.set_num_threads(before)


def test_a_finished_sweep_run_again_makes_nothing_and_touches_nothing(local_run, tiny_model_dir, capsys):
    out, _, lines = local_run
    states = file_states(out, lines)
    sheet = out / "sheets" / "sheet-00000.png"
    sheet_bytes = sheet.read_bytes()
    sheet.unlink()  # sheets are written again when missing
    assert main(sweep_args(tiny_model_dir, out, "0-4", "--variation", ", large",
                           "--scheduler", "EulerAncestralDiscreteScheduler")) == 0
    assert "(0 made now), 1 contact sheets written" in capsys.readouterr().err
    assert read_manifest(out)[1] == lines and file_states(out, lines) == states
    assert sheet.read_bytes() == sheet_bytes


def test_a_different_command_in_the_same_folder_is_refused(local_run, tiny_model_dir, capsys):
    out, _, lines = local_run
    assert main(sweep_args(tiny_model_dir, out, "0-4", "--variation", ", large", "--steps", "4",
                           "--scheduler", "EulerAncestralDiscreteScheduler")) == 2
    message = capsys.readouterr().err.strip().splitlines()
    assert len(message) == 1 and "--out" in message[0] and "num_inference_steps: 3 there, 4 now" in message[0], message
    assert read_manifest(out)[1] == lines


def test_interrupted_sweeps_resume_without_redoing_or_losing_an_image(tiny_model_dir, tmp_path):
    """A killed worker, then Ctrl+C, then the debris of a crash: the same command still finishes the job."""
    # Sixty images: Ctrl+C after three lands well before the last (with twenty, an idle machine made them all in the
    # ~3 s the interrupt took to end the sweep, which then ended 0 instead of 130)
    # One worker: each start of a worker process costs seconds of CPU, and one is enough to kill and replace.
    args = sweep_args(tiny_model_dir, tmp_path, "0-59", "--steps", "12", "--workers", "1")
    # 1. Ctrl+C (SIGINT to the whole process group, workers included) after a few images.
    run = start(args)
    wait_for_lines(tmp_path, 3, run)
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130 and "run the same command to continue" in err, err
    _, first = read_manifest(tmp_path)
    assert 3 <= len(first) < 58
    # 2. A worker is killed mid-sweep: its image fails, the rest are written, the exit status says so.
    run = start(args)
    wait_for_lines(tmp_path, len(first) + 2, run)
    os.kill(workers_of(run.pid)[0], signal.SIGKILL)
    _, err = run.communicate(timeout=300)
    _, second = read_manifest(tmp_path)
    assert second[:len(first)] == first
    killed_while_idle = run.returncode == 0 and len(second) == 60  # between two images: nothing to fail (rare)
    assert killed_while_idle or (run.returncode == 1 and "1 images failed" in err and "died" in err), err
    assert len(second) == 59 or killed_while_idle
    # 3. What a crash leaves: a half-written line, a half-written PNG, a listed file that vanished.
    with open(tmp_path / "manifest.jsonl", "a") as manifest:
        manifest.write('{"seed": 59, "varia')
    (tmp_path / ".partial" / "59.png").write_bytes(b"\x89PNG half")
    gone = second[-1]
    (tmp_path / gone["path"]).unlink()
    kept = file_states(tmp_path, second[:-1])
    run = start(args)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 0, err
    _, final = read_manifest(tmp_path)
    assert sorted(line["seed"] for line in final) == list(range(60))  # none missing, none twice
    assert final[:len(second) - 1] == second[:-1] and file_states(tmp_path, second[:-1]) == kept
    remade = next(line for line in final if line["seed"] == gone["seed"])
    assert remade["fingerprint"] == gone["fingerprint"]
    assert sorted(p.name for p in (tmp_path / "sheets").iterdir()) == ["sheet-00000.png"]
    assert not list((tmp_path / ".partial").iterdir())


@pytest.mark.parametrize(("extra", "option"), [
    (["--seeds", "abc"], "--seeds"), (["--seeds", "0-2000000"], "--seeds"), (["--seeds", "1, 1"], "--seeds"),
    (["--workers", "0"], "--workers"), (["--threads", "0"], "--threads"), (["--variation", " "], "--variation"),
    (["--steps", "0"], "--steps"), (["--base-url", "ftp://x"], "--base-url"), (["--width", "65"], "--width"),
    (["--ray", "nonsense"], "--ray"), (["--ray", "127.0.0.1:1"], "--ray"),
])
def test_bad_input_exits_2_with_one_line_before_any_worker_starts(tiny_model_dir, tmp_path, capsys, extra, option):
    assert main(sweep_args(tiny_model_dir, tmp_path / "out", "0-3", *extra)) == 2
    message = capsys.readouterr().err.strip().splitlines()
    assert len(message) == 1 and option in message[0], message
    assert not (tmp_path / "out" / "manifest.jsonl").exists()


def test_a_model_that_cannot_load_exits_2_with_one_line(tmp_path, capsys):
    assert main(sweep_args(tmp_path / "no-such-model", tmp_path / "out", "0-1", "--workers", "1")) == 2
    message = capsys.readouterr().err.strip().splitlines()
    assert len(message) == 1 and "no-such-model" in message[0], message


def test_ray_makes_the_same_images_as_the_local_pool(local_run, tiny_model_dir, tmp_path):
    pytest.importorskip("ray")
    _, _, local = local_run
    run = subprocess.run([sys.executable, "-m", "seedlab", *sweep_args(tiny_model_dir, tmp_path, "0-4", "--variation",
                          ", large", "--scheduler", "EulerAncestralDiscreteScheduler", "--ray")],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    _, lines = read_manifest(tmp_path)
    by_image = {(line["seed"], line["variation"]): line for line in local}
    assert len(lines) == len(local) == 10
    for line in lines:
        assert line["fingerprint"] == by_image[line["seed"], line["variation"]]["fingerprint"]
        assert line["environment"] == by_image[line["seed"], line["variation"]]["environment"]


def test_the_manifest_is_written_with_its_first_image_and_an_empty_one_counts_as_new(tmp_path):
    from seedlab.engine.determinism import current_environment, current_switches
    from seedlab.scale.manifest import Manifest
    from seedlab.scale.pool import Done

    plan = Plan.make(parse_sweep_seeds("4-5"), "x", [])
    environment = current_environment(torch.device("cpu"), torch.float32, current_switches())
    pixels = np.zeros((8, 8, 3), np.uint8)
    image = Done(0, seedlab.Recipe(prompt="x", seed=4), pixels, seedlab.fingerprint(pixels), environment)
    for before in (None, ""):  # no manifest yet; an empty one left by a run stopped before its first line
        if before is not None:
            (tmp_path / "manifest.jsonl").write_text(before)
        manifest = Manifest(tmp_path, plan, {"p": 1})
        path = tmp_path / "manifest.jsonl"
        assert (path.read_text() if path.exists() else None) == before and manifest.done == set()
        manifest.add(0, image, BASE_URL)
        manifest.close()
        header, lines = read_manifest(tmp_path)
        assert header == {"seedlab_sweep": 1, "parameters": {"p": 1}} and [line["seed"] for line in lines] == [4]
        assert Manifest(tmp_path, plan, {"p": 1}).done == {0}
        (tmp_path / "manifest.jsonl").unlink()


def test_a_header_written_before_a_recipe_field_existed_resumes_at_that_fields_default(tmp_path):
    """A folder swept before to_8bit existed (its header does not name it) made its images at the default, round."""
    from seedlab.scale.manifest import Manifest

    plan = Plan.make(parse_sweep_seeds("4-5"), "x", [])
    recipe = seedlab.Recipe(prompt="x").to_json()
    del recipe["seed"]
    parameters = {**recipe, "seeds": "4-5", "variations": [], "threads": 1, "cpu_isa": "avx2"}
    before = {key: value for key, value in parameters.items() if key != "to_8bit"}
    (tmp_path / plan.path(0)).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / plan.path(0)).write_bytes(b"an image")
    header, line = {"seedlab_sweep": 1, "parameters": before}, {"seed": 4, "variation": 0, "path": plan.path(0)}
    (tmp_path / "manifest.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n")
    assert Manifest(tmp_path, plan, parameters).done == {0}
    with pytest.raises(ValueError, match="to_8bit: None there, 'truncate' now"):  # not the default: another sweep
        Manifest(tmp_path, plan, {**parameters, "to_8bit": "truncate"})
