"""SeedLab web UI: start-up and arguments around the page (webui/page.py: its layout and events; handlers in webui/).

Run `python app.py` (honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT), or with `--model`, `--device`, `--threads`,
`--lanes`, `--dtype` (also SEEDLAB_MODEL, SEEDLAB_DEVICE, SEEDLAB_THREADS, SEEDLAB_LANES, SEEDLAB_DTYPE).
SEEDLAB_MODELS (comma-separated) allows more models beside the default one; SEEDLAB_BASE_URL sets where image links
point when the address the browser used is not the public one. Per-request limits, the compute budget and queue
settings come from SEEDLAB_MAX_* and friends (see seedlab/serving/limits.py). On a ZeroGPU Space (the `spaces`
package is importable) the generation runs inside `spaces.GPU`; elsewhere nothing changes.
"""

import argparse
import atexit
import os
import signal
import sys

import torch
from starlette.middleware import Middleware

from seedlab import ModelStore, configure_process, resolve_device
from seedlab.engine import cpu
from seedlab.engine.models import default_lanes
from seedlab.engine.recipe import DEFAULT_MODEL, DTYPES, NEW_IMAGE_MODEL, embedded_here, new_image_model
from seedlab.engine.weights import checkpoint_files, library
from seedlab.scale.workers import Workers
from seedlab.serving.admission import Admission, measure_speed
from seedlab.serving.limits import Limits
from webui.i18n import I18N
from webui.page import build_app
from webui.queue_cap import cap_queued
from webui.uploads import LinkGuard, PeerStamp, UploadGuard
from webui.visitors import proxy_hops
from webui.wiring import CSS, page_js

MAX_UPLOAD = "4mb"  # a dropped PNG: SeedLab's own are a few kB to a few MB at the default size limit


def build_parser() -> argparse.ArgumentParser:
    """The app's options, each with its environment variable (a Space sets those)."""
    parser = argparse.ArgumentParser(description="SeedLab web UI")
    parser.add_argument("--model", default=os.environ.get("SEEDLAB_MODEL", new_image_model()),
                        help=f'"{DEFAULT_MODEL}" (the embedded model: the default, and what links naming no model were '
                             f'made with), "{NEW_IMAGE_MODEL}" (the default where its weights are in the checkout), '
                             'a local diffusers folder or a hub id (env SEEDLAB_MODEL)')
    parser.add_argument("--device", default=os.environ.get("SEEDLAB_DEVICE", "auto"),
                        help="auto, cpu, cuda, cuda:N or mps (env SEEDLAB_DEVICE)")
    parser.add_argument("--dtype", default=os.environ.get("SEEDLAB_DTYPE", "float32"), choices=DTYPES,
                        help="the precision every model is served in (env SEEDLAB_DTYPE)")
    parser.add_argument("--threads", type=int, default=os.environ.get("SEEDLAB_THREADS") or None,
                        help="torch intra-op threads per image; on a CPU 1 by default, which links record "
                             "(env SEEDLAB_THREADS)")
    parser.add_argument("--lanes", type=int, default=os.environ.get("SEEDLAB_LANES") or None,
                        help="images generated at once in this process; on a CPU cores / threads by default, on "
                             "a GPU 1 (env SEEDLAB_LANES)")
    parser.add_argument("--workers", type=int, default=os.environ.get("SEEDLAB_WORKERS") or None,
                        help="worker processes for multi-image requests, each loading the default model; by "
                             "default 0 (lanes) when its UNet calls are traced, else cores / threads on a CPU "
                             "(env SEEDLAB_WORKERS)")
    parser.add_argument("--cpu-isa", default=None, choices=cpu.LEVELS,
                        help="CPU kernels: avx2 (default) gives the same pixels on every x86-64 CPU of a vendor, "
                             "portable across Intel and AMD too (slower), native is fastest and CPU-bound; links "
                             "record it (env SEEDLAB_CPU_ISA)")
    parser.add_argument("--models-dir", default=os.environ.get(library.ENV) or None,
                        help="a models folder laid out as A1111's models/ or ComfyUI's: its checkpoints are offered "
                             "as models, and the LoRAs and embeddings prompts name are read from it "
                             f"(env {library.ENV})")
    parser.add_argument("--native-retry", action="store_true",
                        default=os.environ.get("SEEDLAB_NATIVE_RETRY", "") in ("1", "true", "yes"),
                        help="retry an old link or PNG that records no CPU baseline with native kernels in a worker "
                             "process of its own, priced with the process start; off on a public server (env "
                             "SEEDLAB_NATIVE_RETRY=1)")
    parser.add_argument("--mcp", action="store_true", default=os.environ.get("SEEDLAB_MCP", "") in ("1", "true", "yes"),
                        help="also serve the public endpoints (grid, vary, matrix, plot, travel, reproduce, reverify, "
                             "preview, finish) as MCP tools at /gradio_api/mcp/ (env SEEDLAB_MCP=1; needs mcp)")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Load the model once, then serve the UI (host and port from GRADIO_SERVER_NAME / _PORT)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        limits, _ = Limits.from_env(), proxy_hops()  # a bad SEEDLAB_PROXY_HOPS stops the app here, named
        device = resolve_device(args.device)
        # On a CPU, images run side by side at one thread each: a grid keeps every core busy, and a link
        # made here reproduces on any machine that pins one thread, whatever its core count.
        threads = args.threads or (1 if device.type == "cpu" else None)
        configure_process(threads, args.cpu_isa)
        library.configure(args.models_dir)
        lanes = args.lanes or default_lanes(device, torch.get_num_threads())
        workers = args.workers
        if lanes < 1 or (workers is not None and (workers < 0 or (workers and device.type != "cpu"))):
            raise ValueError(f"lanes must be a positive integer and workers 0 or more (0 on a GPU), "
                             f"got {lanes} and {workers}")
        extra = [name.strip() for name in os.environ.get("SEEDLAB_MODELS", "").split(",") if name.strip()]
        extra += checkpoint_files.checkpoint_names() if library.models_dir() is not None else []
        # The embedded models are always allowed (loaded when first asked for): a link made with either opens.
        store = ModelStore([args.model, *extra, *embedded_here()], device=device, dtype=args.dtype, lanes=lanes)
        admission = Admission(store, limits, measure_speed(store.get(store.default)), args.native_retry)
    except ValueError as error:
        parser.exit(2, f"seedlab: {error}\n")
    if workers is None:
        # A traced UNet (tracing.py) runs without the interpreter lock, so lanes keep every core busy in
        # this process (8 images: as fast as worker processes, without a model copy of ~420 MiB each).
        workers = lanes if device.type == "cpu" and not store.get(store.default).traced else 0
    demo, app = build_app(admission)
    app.cancels.max_sessions = limits.sessions
    traced = "traced UNet" if store.get(store.default).traced else "eager UNet"
    print(f"seedlab: limits {limits.describe()}", flush=True)  # the host's settings: visitors see the limits only
    print(f"seedlab: images side by side in {lanes} lane(s) of {torch.get_num_threads()} thread(s) ({traced})"
          + (f"; {workers} worker processes starting" if workers > 1 else ""), flush=True)
    if workers > 1:  # started after the speed measurement, which they would slow; ready in the background
        app.workers = Workers(store.default, workers=workers, threads=torch.get_num_threads(), dtype=args.dtype)
        atexit.register(app.workers.close)
    # One generation at a time per device (all generating events share one concurrency group);
    # the rest wait in a bounded queue and see their position.
    demo.queue(max_size=limits.queue_size, default_concurrency_limit=limits.concurrency)
    cap_queued(demo, limits.visitor_queued)  # no visitor fills the queue for the others
    local_free = not os.environ.get("SPACE_ID") and not os.environ.get(Limits.setting("visitor_uploads"))
    guards = [Middleware(PeerStamp), Middleware(LinkGuard),
              Middleware(UploadGuard, max_uploads=limits.visitor_uploads, local_free=local_free)]
    # Gradio keeps a copy of every component's config per session (10,000 sessions by default: gigabytes).
    demo.launch(css=CSS, js=page_js(app.spellings), max_file_size=MAX_UPLOAD, app_kwargs={"middleware": guards},
                state_session_capacity=limits.sessions, mcp_server=args.mcp, i18n=I18N)  # English and zh-CN


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so atexit (the PNG folder's cleanup) runs on SIGTERM too
    main()
