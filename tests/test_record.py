"""The server's result record and PNG folder: what a link this server made opens from, and their bounds."""

import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from seedlab import Recipe, Result, fingerprint
from seedlab.engine.determinism import current_environment, current_switches
from webui.files import PngStore, ResultRecord


def result(seed: int, size: int = 16) -> Result:
    pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    environment = current_environment(torch.device("cpu"), torch.float32, current_switches())
    return Result(Recipe(prompt="a red circle", seed=seed, scheduler="EulerDiscreteScheduler"),
                  Image.fromarray(pixels), fingerprint(pixels), environment)


def test_a_recorded_recipe_is_found_with_its_pixels_and_time(tmp_path):
    pngs, record = PngStore(tmp_path), ResultRecord()
    made = result(1)
    record.add(made, pngs.save(made))
    found, entry = record.find(made.recipe)
    assert found.fingerprint == made.fingerprint == fingerprint(found.image)
    assert found.environment == made.environment and abs(entry.made_at - time.time()) < 60
    assert record.find(made.recipe.replace(seed=2)) is None
    assert record.find(made.recipe.replace(num_inference_steps=21)) is None  # any field is part of the key


def test_the_record_keeps_the_most_recently_used_recipes_only(tmp_path):
    pngs, record = PngStore(tmp_path), ResultRecord(max_entries=2)
    made = [result(seed) for seed in range(3)]
    for item in made[:2]:
        record.add(item, pngs.save(item))
    assert record.find(made[0].recipe) is not None  # now the most recently used
    record.add(made[2], pngs.save(made[2]))
    assert len(record) == 2
    assert record.find(made[1].recipe) is None
    assert record.find(made[0].recipe) is not None and record.find(made[2].recipe) is not None


def test_a_pruned_or_altered_png_is_not_served(tmp_path):
    pngs, record = PngStore(tmp_path), ResultRecord()
    gone, altered = result(1), result(2)
    for item in (gone, altered):
        record.add(item, pngs.save(item))
    (tmp_path / pngs.save(gone).split("/")[-1]).unlink()
    pixels = np.asarray(altered.image).copy()
    pixels[0, 0, 0] ^= 1
    Image.fromarray(pixels).save(pngs.save(altered))
    assert record.find(gone.recipe) is None and record.find(altered.recipe) is None
    assert len(record) == 0  # dropped: the next opening regenerates and records again


def test_the_png_folder_is_bounded_by_count_and_bytes(tmp_path):
    pngs = PngStore(tmp_path, max_files=3)
    paths = [pngs.save(result(seed)) for seed in range(5)]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(p.split("/")[-1] for p in paths[2:])
    (tmp_path / "big").mkdir()
    one = Path(paths[-1]).stat().st_size  # noise does not compress: every such PNG is about this size
    big = PngStore(tmp_path / "big", max_bytes=int(2.5 * one))
    saved = [big.save(result(seed, size=16)) for seed in range(4)]
    remaining = list((tmp_path / "big").glob("*.png"))
    assert len(remaining) == 2 and saved[-1].split("/")[-1] in {p.name for p in remaining}
    assert sum(p.stat().st_size for p in remaining) <= big.max_bytes
