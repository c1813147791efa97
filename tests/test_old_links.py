"""Links and PNGs made before the recipe redesign keep opening with the same pixels.

The fixtures were made by SeedLab at commit eba1e63 with the embedded model (tests/fixtures/links_v1.json
says how); each link carries the thread count it was made with, which changes low bits on CPU. They were
made on an AMD CPU with native kernels, before links recorded a CPU baseline. On an AMD CPU whose native
kernels are AVX2, the avx2 baseline computes what native did (the in-process checks below); on an AMD CPU
with AVX-512 it does not, and `reproduce` (no flag) then retries with native kernels in a worker process
(the CLI checks below, which run on any AMD x86-64 CPU). On an Intel CPU MKL rounds its own way, so they
are skipped there (tests/test_cpu.py's portable fixtures cover every x86-64 CPU).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from seedlab import generate, load_model, original_from_link, original_from_png
from seedlab.engine import cpu
from seedlab.engine.models import EMBEDDED_MODEL_DIR
from tests.helpers import torch_threads

FIXTURES = Path(__file__).parent / "fixtures"
LINKS = json.loads((FIXTURES / "links_v1.json").read_text())["links"]
ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(not (EMBEDDED_MODEL_DIR / "model_index.json").exists(), reason="needs the embedded model"),
    pytest.mark.skipif(cpu.vendor() != "AMD" or not cpu.is_x86(),
                       reason="made on an AMD CPU with native kernels; MKL rounds differently on other vendors"),
]
in_process = pytest.mark.skipif(cpu.in_force() != "avx2" or cpu.native_kernels() != "avx2",
                                reason="the avx2 baseline equals native kernels only on a CPU whose native kernels are "
                                       "AVX2; elsewhere reproduce retries natively (the CLI checks)")


@pytest.fixture(scope="module")
def embedded():
    return load_model("embedded", torch.device("cpu"))


@in_process
@pytest.mark.parametrize("case", LINKS, ids=[f"link{i}" for i in range(len(LINKS))])
def test_v1_link_regenerates_the_same_pixels(embedded, case):
    original = original_from_link(case["link"])
    assert original.fingerprint == case["fingerprint"]
    with torch_threads(case["threads"]):
        result = generate(embedded, original.recipe)
    assert result.fingerprint == case["fingerprint"]


@in_process
def test_v1_png_regenerates_the_same_pixels(embedded):
    original = original_from_png(FIXTURES / "seedlab_v1.png")
    assert original.recipe.seed == 31337 and original.recipe.negative_prompt == "blurry, dark"
    with torch_threads(1):
        result = generate(embedded, original.recipe)
    assert result.fingerprint == original.fingerprint


def _reproduce(source: str) -> subprocess.CompletedProcess:
    """`python -m seedlab reproduce SOURCE --model embedded --json` as a user runs it: no other option, a plain
    shell."""
    env = {key: value for key, value in os.environ.items()
           if key not in (*cpu.SETTINGS, cpu.ENV_VAR, cpu.FOUND_VAR)}
    return subprocess.run([sys.executable, "-m", "seedlab", "reproduce", source, "--model", "embedded", "--json"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


@pytest.mark.parametrize("source", [LINKS[0]["link"], LINKS[4]["link"], str(FIXTURES / "seedlab_v1.png")],
                         ids=["link0", "link4-2-threads", "png"])
def test_old_originals_are_exact_from_the_command_line_with_no_flag(source):
    done = _reproduce(source)
    verdict = json.loads(done.stdout)
    assert done.returncode == 0 and verdict["exact"], done.stdout + done.stderr
    # the verdict never claims the unrecorded baseline is the same: it names it as unknown or says what matched
    assert "same as far as known" not in verdict["summary"]
