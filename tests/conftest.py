"""Shared fixtures: tiny models, the real app (`python app.py`) serving the embedded model, a client and a browser
for it, and its handlers run in this process."""

import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

# Under pytest-xdist (README: -n 2) two workers share the machine's cores: each computes on one thread, as the app's
# lanes do. Two workers of two OpenMP threads each on two cores spin-wait for one another (the suite took as long on
# two workers as on one). A test that needs another thread count sets it (tests/helpers.py: torch_threads).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import seedlab  # its CPU baseline must be in place before any test computes with torch

ROOT = Path(__file__).resolve().parent.parent
APP_MAX_STEPS = 150
APP_THREADS = 1  # the thread count changes low bits of CPU results: reference runs in tests use the same
START_TIMEOUT_S = 180  # importing torch, diffusers and gradio on a busy 2-core machine is slow


# The quick subset (README: `-m "not slow"`): what needs a server, a browser or another process is slow.
SLOW_FIXTURES = {"app_server", "app_url", "browser", "own_server", "strict_server", "seedlab_app", "lora_server",
                 "sdxl_server", "ddim_server", "client", "app", "reference_model"}
SLOW_FILES = {"test_sweep.py", "test_workers.py", "test_pool.py", "test_cpu.py", "test_training.py", "test_cli.py",
              "test_plot.py", "test_travel.py", "test_viewer.py", "test_families.py", "test_embedded_model.py"}


def pytest_collection_modifyitems(config, items):
    """Mark the slow tests (a server, a browser, subprocesses, every family): `-m "not slow"` is the quick subset.

    Then order the files so that two workers share the machine well: a browser test waits on the page about half
    its time, so browser files alternate with computing ones, the slow files first, the quick ones last to fill the
    end (pytest-xdist's --dist loadfile hands out files in this order). Every worker orders the same way.
    """
    files: dict[Path, list] = {}
    for item in items:
        in_browser = item.path.parent.name == "browser"  # tests/browser/: every test there drives Chromium
        if in_browser or item.path.name in SLOW_FILES or SLOW_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)
        files.setdefault(item.path, []).append(item)
    browser = [path for path in files if path.parent.name == "browser"]
    slow = [path for path in files
            if path not in browser and any(item.get_closest_marker("slow") for item in files[path])]
    slow.sort(key=lambda path: path.name not in SLOW_FILES)  # other processes first: the longest files
    quick = [path for path in files if path not in browser and path not in slow]
    ordered = [path for pair in itertools.zip_longest(browser, slow) for path in pair if path is not None] + quick
    items[:] = [item for path in ordered for item in files[path]]


@pytest.fixture(autouse=True)
def fresh_trace_allowance(monkeypatch):
    """Each test may trace as a fresh process does: a process makes at most tracing.MAX_TRACES traces (never freed),
    and a whole test run in one process would otherwise spend them in its first tests."""
    from seedlab.engine import tracing

    monkeypatch.setattr(tracing, "_made", 0)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A diffusers folder with a tiny random-weight SD pipeline, loadable with `--model DIR`."""
    from tests.tiny import save_tiny_pipeline

    return save_tiny_pipeline(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def app_model(tiny_model_dir) -> str:
    """The model the app under test serves: the embedded checkpoint (the real path), else the tiny one."""
    from seedlab.engine.models import EMBEDDED_MODEL_DIR

    return "embedded" if (EMBEDDED_MODEL_DIR / "model_index.json").exists() else str(tiny_model_dir)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny random-weight SD pipeline as a SeedLab model, built in this process (each module its own)."""
    import torch

    from tests.tiny import tiny_pipeline

    return seedlab.describe("tiny", tiny_pipeline(tmp_path_factory.mktemp("tokenizer")), torch.device("cpu"))


@pytest.fixture(scope="module")
def prompted(tmp_path_factory):
    """The sampler tests' tiny pipeline and its prompt pair, encoded once: (pipe, cond, uncond)."""
    from tests.helpers import tiny_prompted

    return tiny_prompted(tmp_path_factory)


class AppServer:
    """`python app.py --model MODEL` in a subprocess on a fixed port, which can be restarted in place."""

    def __init__(self, model: str, folder: Path, extra_env: dict[str, str] | None = None):
        self.model, self.folder, self.extra_env = model, folder, extra_env or {}
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "TMPDIR": str(self.folder),  # the app's PNGs and Gradio's cache stay in pytest's temp folder
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(self.port),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
            "SEEDLAB_MAX_STEPS": str(APP_MAX_STEPS),  # room for a long run to cancel; other limits as shipped
            # every test is the same visitor (127.0.0.1); test_budget covers the share
            "SEEDLAB_VISITOR_SECONDS": "100000",
            "SEEDLAB_WORKERS": "0",  # no worker processes (test_workers starts a server with them)
        }
        env.update(self.extra_env)
        env.pop("SEEDLAB_BASE_URL", None)  # links point at this server
        command = [sys.executable, "app.py", "--model", self.model, "--device", "cpu",
                   "--threads", str(APP_THREADS)]
        log = self.folder / "app.log"
        with open(log, "ab") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _wait_until_up(self.url, self.process, log)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        """Stop the server and start a fresh process on the same port and model: nothing in memory survives."""
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def app_server(app_model, tmp_path_factory) -> AppServer:
    """The real app serving `app_model`, stopped after the session."""
    server = AppServer(app_model, tmp_path_factory.mktemp("app"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def app_url(app_server) -> str:
    """The URL of `python app.py --model MODEL` (the same after a restart)."""
    return app_server.url


@pytest.fixture(scope="module")
def client(app_url):
    """A gradio_client for the app under test, as a Python user calls its public API."""
    from gradio_client import Client

    return Client(app_url, verbose=False)


@pytest.fixture(scope="module")
def reference_model(app_model):
    """The app's model loaded in this process, to check the server's pixels against."""
    import torch

    from seedlab import load_model

    return load_model(app_model, torch.device("cpu"))


@pytest.fixture(scope="module")
def seedlab_app(reference_model, tmp_path_factory):
    """The page's handlers (webui.handlers.WebApp) over `reference_model`, called in this process."""
    import torch

    from seedlab import ModelStore
    from seedlab.serving.admission import Admission
    from seedlab.serving.limits import Limits
    from webui.handlers import WebApp

    store = ModelStore([reference_model.name], device=torch.device("cpu"))
    store.add(reference_model)  # already loaded: no second load
    return WebApp(Admission(store, Limits()), tmp_path_factory.mktemp("png"))


@pytest.fixture(scope="module")
def tiny_page(tmp_path_factory):
    """The page built in this process over a tiny pipeline: (Blocks, WebApp, each handler's wired outputs)."""
    import torch

    from app import build_app
    from seedlab import describe
    from seedlab.engine.models import ModelStore
    from seedlab.serving.admission import Admission
    from seedlab.serving.limits import Limits
    from tests.tiny import tiny_pipeline
    from webui import wiring

    model = describe("tiny", tiny_pipeline(tmp_path_factory.mktemp("tok")), torch.device("cpu"))
    store = ModelStore(["tiny"], device=torch.device("cpu"))
    store.add(model)
    wiring.WIRED_OUTPUTS.clear()
    demo, app = build_app(Admission(store, Limits()), tmp_path_factory.mktemp("png"))
    return demo, app, dict(wiring.WIRED_OUTPUTS)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (tests/browser/pages.py: CHROMIUM), one a module."""
    from playwright.sync_api import sync_playwright

    from tests.browser.pages import CHROMIUM

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        yield browser
        browser.close()


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
