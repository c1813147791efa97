"""The code stays clean under the lint rules written in pyproject.toml ([tool.ruff] and [tool.ruff.lint])."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -r requirements-dev.txt)")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"ruff check . found something:\n{done.stdout}{done.stderr}"
