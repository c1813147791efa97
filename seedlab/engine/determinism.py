"""Determinism: the process settings, the full-determinism switches, and the environment record.

- `full_determinism` applies the switches for one generation and restores what was there before,
  so one request's settings never leak into another's. The switches are process-wide torch state:
  generation.py holds its lock around every generation, so two never run with mixed settings.
- Where noise comes from is noise.py's job; torch's global RNG (`torch.manual_seed`) is never used.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from . import cpu
from .environment import Environment, Switches
from .version import __version__

CUBLAS_WORKSPACE_CONFIG = ":16:8"


def configure_process(threads: int | None = None, cpu_isa: str | None = None) -> None:
    """Process start-up settings: call once, before any model is loaded.

    cuBLAS reads CUBLAS_WORKSPACE_CONFIG only when CUDA initialises it, so it must be set before
    the first CUDA call for full determinism to be possible later; it only reserves a small
    workspace. The intra-op thread count changes low bits of CPU results (1 vs 2 threads differ
    by +-1 level), so a host can pin it to match the machine a link was made on. So does the CPU's
    instruction set: `cpu_isa` (default: SEEDLAB_CPU_ISA, else "avx2") is cpu.py's baseline, which
    only takes hold before torch's first operation.
    """
    cpu.apply(cpu.check_level(cpu_isa, "--cpu-isa") if cpu_isa is not None else cpu.requested())
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG)
    _quiet_libraries()
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads}")
        torch.set_num_threads(threads)


def _quiet_libraries() -> None:
    """No loading progress bars or hub chatter on the console of a server or a script."""
    import diffusers
    import transformers

    diffusers.utils.logging.disable_progress_bar()
    diffusers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def current_switches() -> Switches:
    """The determinism switches in force now."""
    return Switches(
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
        cudnn_deterministic=torch.backends.cudnn.deterministic,
        cudnn_benchmark=torch.backends.cudnn.benchmark,
        matmul_tf32=torch.backends.cuda.matmul.allow_tf32,
        cudnn_tf32=torch.backends.cudnn.allow_tf32,
    )


def apply_switches(switches: Switches) -> None:
    """Put `switches` in force (process-wide torch state)."""
    torch.use_deterministic_algorithms(switches.deterministic_algorithms, warn_only=switches.deterministic_warn_only)
    torch.backends.cudnn.deterministic = switches.cudnn_deterministic
    torch.backends.cudnn.benchmark = switches.cudnn_benchmark
    torch.backends.cuda.matmul.allow_tf32 = switches.matmul_tf32
    torch.backends.cudnn.allow_tf32 = switches.cudnn_tf32


FULLY_DETERMINISTIC = Switches(
    deterministic_algorithms=True,
    deterministic_warn_only=False,
    cudnn_deterministic=True,
    cudnn_benchmark=False,
    matmul_tf32=False,
    cudnn_tf32=False,
)


@contextmanager
def full_determinism(enabled: bool) -> Iterator[Switches]:
    """Run a generation with the full-determinism switches on (or untouched), then restore them.

    Yields the switches actually in force, for the environment record. The switches are process-wide:
    the caller holds generation's lock so that two generations never run with mixed settings.
    """
    before = current_switches()
    try:
        if enabled:
            apply_switches(FULLY_DETERMINISTIC)
        yield current_switches()
    finally:
        apply_switches(before)


def current_environment(device: torch.device, dtype: torch.dtype, switches: Switches) -> Environment:
    """The environment in force right now, on `device`, with `switches` applied."""
    import diffusers


    return Environment(
        seedlab=__version__,
        diffusers=diffusers.__version__,
        torch=str(torch.__version__),
        device=device_name(device),
        dtype=str(dtype).removeprefix("torch."),
        threads=torch.get_num_threads(),
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
        switches=switches,
        cpu_isa=cpu.in_force() if device.type == "cpu" else None,
        cpu_vendor=cpu.vendor() if device.type == "cpu" else None,
    )


def device_name(device: torch.device) -> str:
    """A readable device name: "cuda: NVIDIA H100 80GB HBM3", "cpu: x86_64"."""
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    if device.type == "cpu":
        return f"cpu: {platform.machine() or 'unknown'}"
    return device.type
