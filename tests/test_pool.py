"""The worker pool: the same pixels as in-process generation, and no result lost when a worker dies."""

import os
import signal
import threading

import numpy as np
import pytest
import torch

from seedlab import Recipe, configure_process, generate, load_model
from seedlab.engine.generation import Cancelled, Progress
from seedlab.scale.pool import Done, Failed, Pool

SCHEDULERS = ["default", "EulerAncestralDiscreteScheduler", "DDIMScheduler"]


@pytest.fixture(scope="module")
def pool(tiny_model_dir):
    with Pool(str(tiny_model_dir), workers=2, threads=1) as pool:
        yield pool


@pytest.fixture(scope="module")
def reference(tiny_model_dir):
    """In-process generation at a given thread count, the way a single process would make each image."""
    configure_process()  # as in the workers: the same environment record
    model = load_model(str(tiny_model_dir), torch.device("cpu"))

    def make(recipe: Recipe, threads: int):
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return generate(model, recipe)
        finally:
            torch.set_num_threads(before)

    return make


def recipes(model_dir, seeds, steps=3) -> list[Recipe]:
    return [Recipe(prompt=f"a red circle {seed}", seed=seed, model=str(model_dir), num_inference_steps=steps,
                   scheduler=SCHEDULERS[seed % len(SCHEDULERS)]) for seed in seeds]


def assert_same_image(item, expected, threads: int) -> None:
    assert isinstance(item, Done), item
    assert item.recipe == expected.recipe
    assert np.array_equal(item.pixels, np.asarray(expected.image))
    assert item.fingerprint == expected.fingerprint
    assert item.environment.threads == threads and item.environment == expected.environment
    result = item.result()
    assert np.array_equal(np.asarray(result.image), np.asarray(expected.image)) and result.recipe == expected.recipe


def test_the_pool_makes_exactly_the_in_process_images_at_the_same_thread_count(pool, reference, tiny_model_dir):
    asked = recipes(tiny_model_dir, [0, 1, 2, 5, 2**32 - 1])
    items = list(pool.map(asked))
    assert sorted(item.index for item in items) == list(range(len(asked)))
    for item in items:
        assert_same_image(item, reference(asked[item.index], 1), threads=1)


def test_ordered_results_come_in_input_order_and_threads_can_be_pinned_per_call(pool, reference, tiny_model_dir):
    asked = recipes(tiny_model_dir, [7, 3, 9])
    items = list(pool.map(asked, ordered=True, threads=2))
    assert [item.index for item in items] == [0, 1, 2]
    for item, recipe in zip(items, asked):
        assert_same_image(item, reference(recipe, 2), threads=2)


def test_model_info_describes_the_loaded_model(pool, tiny_model_dir):
    info = pool.model_info()
    assert info.name == str(tiny_model_dir) and info.native_size == (64, 64)
    assert "EulerAncestralDiscreteScheduler" in info.schedulers


def test_a_bad_recipe_fails_alone_with_its_message(pool, tiny_model_dir):
    asked = recipes(tiny_model_dir, [1, 2, 3])
    asked[1] = asked[1].replace(scheduler="NoSuchScheduler")
    items = list(pool.map(asked, ordered=True))
    assert isinstance(items[1], Failed) and "NoSuchScheduler" in items[1].error and items[1].recipe == asked[1]
    assert isinstance(items[0], Done) and isinstance(items[2], Done)


def test_a_recipe_for_another_model_is_refused(pool, tiny_model_dir):
    with pytest.raises(ValueError, match="this pool serves"):
        list(pool.map([Recipe(prompt="x", model="embedded")]))


def test_a_killed_worker_fails_only_its_recipe_and_is_replaced(pool, reference, tiny_model_dir):
    asked = recipes(tiny_model_dir, range(6), steps=40)  # long enough to be killed mid-image
    victim = pool.pids[0]
    items = []
    for item in pool.map(asked, progress=True):
        if isinstance(item, Progress):
            if item.done == 1:  # both workers hold an image now
                os.kill(victim, signal.SIGKILL)
        else:
            items.append(item)
    assert sorted(item.index for item in items) == list(range(6))  # one answer per recipe, none twice
    failed = [item for item in items if isinstance(item, Failed)]
    assert len(failed) == 1 and "died" in failed[0].error, failed
    for item in items:
        if isinstance(item, Done):
            assert_same_image(item, reference(asked[item.index], 1), threads=1)
    assert victim not in pool.pids and len(pool.pids) == 2
    again = list(pool.map([asked[failed[0].index]]))  # the replacement works
    assert_same_image(again[0], reference(asked[failed[0].index], 1), threads=1)


def test_cancel_stops_the_map_and_leaves_the_pool_usable(pool, reference, tiny_model_dir):
    asked = recipes(tiny_model_dir, range(8), steps=30)
    seen = []
    with pytest.raises(Cancelled):
        for item in pool.map(asked, progress=True):
            seen.append(item)
            if isinstance(item, Progress) and item.done == 3:
                threading.Thread(target=pool.cancel).start()  # as a UI's stop button would, from another thread
    assert [item.done for item in seen if isinstance(item, Progress)][:3] == [1, 2, 3]
    assert not any(isinstance(item, Failed) for item in seen)  # cancelled images are not failures
    assert sum(isinstance(item, Done) for item in seen) < len(asked)
    stream = pool.map(asked)  # a consumer that leaves after the first image
    first = next(stream)
    stream.close()
    assert isinstance(first, Done)
    fresh = recipes(tiny_model_dir, [11, 12])
    items = list(pool.map(fresh, ordered=True))  # nothing left over from the abandoned maps
    for item, recipe in zip(items, fresh, strict=True):
        assert_same_image(item, reference(recipe, 1), threads=1)


def test_workers_and_threads_must_be_positive(tiny_model_dir):
    for bad in ({"workers": 0}, {"workers": 1, "threads": 0}, {"workers": True}):
        with pytest.raises(ValueError, match="must be a positive integer"):
            Pool(str(tiny_model_dir), **bad)
