"""Links and PNGs made before the recipe redesign keep opening with the same pixels.

The fixtures were made by SeedLab at commit eba1e63 with the embedded model (tests/fixtures/links_v1.json
says how); each link carries the thread count it was made with, which changes low bits on CPU. They were
made on an AMD CPU running AVX2 kernels, before links recorded either: the avx2 baseline (seedlab/cpu.py)
reproduces them on AMD CPUs with AVX2 or AVX-512; on an Intel CPU MKL rounds its own way, so they are
skipped there (tests/test_cpu.py's portable fixtures cover every x86-64 CPU).
"""

import json
from pathlib import Path

import pytest
import torch

from seedlab import cpu, generate, load_model, original_from_link, original_from_png
from seedlab.models import EMBEDDED_MODEL_DIR
from tests.helpers import torch_threads

FIXTURES = Path(__file__).parent / "fixtures"
LINKS = json.loads((FIXTURES / "links_v1.json").read_text())["links"]

pytestmark = [
    pytest.mark.skipif(not (EMBEDDED_MODEL_DIR / "model_index.json").exists(), reason="needs the embedded model"),
    pytest.mark.skipif(cpu.vendor() != "AMD" or cpu.in_force() != "avx2",
                       reason="made on an AMD CPU under what is now the avx2 baseline; MKL rounds differently on "
                              "other vendors"),
]


@pytest.fixture(scope="module")
def embedded():
    return load_model("embedded", torch.device("cpu"))


@pytest.mark.parametrize("case", LINKS, ids=[f"link{i}" for i in range(len(LINKS))])
def test_v1_link_regenerates_the_same_pixels(embedded, case):
    original = original_from_link(case["link"])
    assert original.fingerprint == case["fingerprint"]
    with torch_threads(case["threads"]):
        result = generate(embedded, original.recipe)
    assert result.fingerprint == case["fingerprint"]


def test_v1_png_regenerates_the_same_pixels(embedded):
    original = original_from_png(FIXTURES / "seedlab_v1.png")
    assert original.recipe.seed == 31337 and original.recipe.negative_prompt == "blurry, dark"
    with torch_threads(1):
        result = generate(embedded, original.recipe)
    assert result.fingerprint == original.fingerprint
