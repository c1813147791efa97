"""The app's worker processes: a grid's images on several processes, bit for bit the in-process ones."""

import threading
import time
from pathlib import Path

import pytest
import torch

import seedlab
from seedlab import Recipe
from seedlab.scale.workers import Workers
from tests.conftest import APP_THREADS, AppServer
from tests.helpers import torch_threads


@pytest.fixture(scope="module")
def workers(app_model):
    pool = Workers(app_model, workers=2, threads=APP_THREADS)
    assert pool.wait_ready(180), pool.error
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def local(app_model):
    return seedlab.load_model(app_model, torch.device("cpu"))


def test_workers_stream_every_step_and_each_image_in_order_as_the_app_process_makes_it(workers, local):
    recipes = [Recipe(prompt="a red circle", model=local.name, seed=seed, num_inference_steps=3,
                      guidance_scale=local.default_guidance, width=local.native_size[0], height=local.native_size[1])
               for seed in (5, 6, 7)]
    assert workers.serves(recipes) and not workers.serves(recipes[:1])  # one image: no IPC to pay
    events = list(workers.stream(recipes))
    results = [e for e in events if isinstance(e, seedlab.Result)]
    done = [e.done for e in events if isinstance(e, seedlab.Progress)]
    with torch_threads(APP_THREADS):
        solo = [seedlab.generate(local, recipe).fingerprint for recipe in recipes]
    assert [r.fingerprint for r in results] == solo
    assert [r.recipe.seed for r in results] == [5, 6, 7] and all(r.environment.threads == APP_THREADS for r in results)
    assert done == sorted(done) and done[-1] == 9


def test_a_stopped_request_raises_cancelled_and_the_workers_carry_on(workers, local):
    recipe = Recipe(prompt="a red circle", model=local.name, num_inference_steps=200,
                    guidance_scale=local.default_guidance, width=local.native_size[0], height=local.native_size[1])
    cancel, started = threading.Event(), time.monotonic()
    with pytest.raises(seedlab.Cancelled):
        for _event in workers.stream([recipe.replace(seed=s) for s in range(4)], cancel=cancel):
            cancel.set()
    assert time.monotonic() - started < 30
    after = [e for e in workers.stream([recipe.replace(seed=s, num_inference_steps=2) for s in (1, 2)])
             if isinstance(e, seedlab.Result)]
    assert len(after) == 2


def test_the_apps_grid_runs_on_its_workers_with_the_same_pixels(app_model, local, tmp_path):
    from gradio_client import Client

    server = AppServer(app_model, tmp_path, extra_env={"SEEDLAB_WORKERS": "2"})
    server.start()
    try:
        log = tmp_path / "app.log"
        deadline = time.monotonic() + 180
        while "worker processes ready" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        children = [int(pid) for pid in Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
                    .read_text().split()]
        busy_before = sum(cpu_ticks(pid) for pid in children)
        _, results = Client(server.url, verbose=False).predict(prompt="a red circle", seeds="3-6",
                                                               num_inference_steps=4, api_name="/grid")
        assert sum(cpu_ticks(pid) for pid in children) > busy_before + 10, "the workers made the images"
    finally:
        server.stop()
    with torch_threads(APP_THREADS):
        solo = [seedlab.generate(local, Recipe.from_dict(r["recipe"])).fingerprint for r in results]
    assert [r["fingerprint"] for r in results] == solo


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of a process, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
