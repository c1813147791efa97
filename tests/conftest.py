"""Shared fixtures: a tiny model folder, and the real app (`python app.py`) serving it."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP_THREADS = 1  # the thread count changes low bits of CPU results: reference runs in tests use the same
START_TIMEOUT_S = 180  # importing torch, diffusers and gradio on a busy 2-core machine is slow


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A diffusers folder with a tiny random-weight SD pipeline, loadable with `--model DIR`."""
    from tests.tiny import save_tiny_pipeline

    return save_tiny_pipeline(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def app_url(tiny_model_dir, tmp_path_factory) -> str:
    """The URL of `python app.py --model <tiny>` started in a subprocess, stopped after the session."""
    port = _free_port()
    folder = tmp_path_factory.mktemp("app")
    log = folder / "app.log"
    env = {
        **os.environ,
        "TMPDIR": str(folder),  # the app's PNGs and Gradio's cache stay in pytest's temp folder
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HUB_OFFLINE": "1",
    }
    command = [sys.executable, "app.py", "--model", str(tiny_model_dir), "--device", "cpu",
               "--threads", str(APP_THREADS)]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_up(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"app.py exited with code {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/gradio_api/info", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"app.py did not answer within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
