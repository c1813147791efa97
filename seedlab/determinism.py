"""Determinism: where noise comes from, the full-determinism switches, and the environment record.

- Noise is drawn from a `torch.Generator` seeded with the recipe's seed, one fresh generator per
  image, on the CPU by default: diffusers' `randn_tensor` then draws on the CPU and moves the
  noise to the device, so a seed gives the same starting noise on any hardware. Torch's global
  RNG (`torch.manual_seed`) is never used: concurrent requests would corrupt each other.
- `full_determinism` applies the switches for one generation and restores what was there before,
  so one request's settings never leak into another's. The switches are process-wide torch state,
  so the context also holds a process-wide lock: two generations never run with mixed settings.
"""

from __future__ import annotations

import os
import platform
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

CUBLAS_WORKSPACE_CONFIG = ":16:8"

# Serialises generations: the switches below are process-global, and so is a device's throughput.
_GENERATION_LOCK = threading.RLock()


def configure_process(threads: int | None = None) -> None:
    """Process start-up settings: call once, before any model is loaded.

    cuBLAS reads CUBLAS_WORKSPACE_CONFIG only when CUDA initialises it, so it must be set before
    the first CUDA call for full determinism to be possible later; it only reserves a small
    workspace. The intra-op thread count changes low bits of CPU results (1 vs 2 threads differ
    by +-1 level), so a host can pin it to match the machine a link was made on.
    """
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


def make_generator(seed: int, rng: str, device: torch.device) -> torch.Generator:
    """A fresh generator for one image: on the CPU for rng="cpu", on the model's device for "device"."""
    where = torch.device("cpu") if rng == "cpu" else device
    return torch.Generator(device=where).manual_seed(seed)


@dataclass(frozen=True)
class Switches:
    """The torch settings that decide whether kernels are deterministic."""

    deterministic_algorithms: bool
    deterministic_warn_only: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool
    matmul_tf32: bool
    cudnn_tf32: bool

    @classmethod
    def current(cls) -> Switches:
        return cls(
            deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
            deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
            cudnn_deterministic=torch.backends.cudnn.deterministic,
            cudnn_benchmark=torch.backends.cudnn.benchmark,
            matmul_tf32=torch.backends.cuda.matmul.allow_tf32,
            cudnn_tf32=torch.backends.cudnn.allow_tf32,
        )

    def apply(self) -> None:
        torch.use_deterministic_algorithms(self.deterministic_algorithms, warn_only=self.deterministic_warn_only)
        torch.backends.cudnn.deterministic = self.cudnn_deterministic
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        torch.backends.cuda.matmul.allow_tf32 = self.matmul_tf32
        torch.backends.cudnn.allow_tf32 = self.cudnn_tf32


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

    Yields the switches actually in force, for the environment record.
    """
    with _GENERATION_LOCK:
        before = Switches.current()
        try:
            if enabled:
                FULLY_DETERMINISTIC.apply()
            yield Switches.current()
        finally:
            before.apply()


@dataclass(frozen=True)
class Environment:
    """What an image was made with, beyond its recipe: enough to explain why pixels differ."""

    seedlab: str
    diffusers: str
    torch: str
    device: str
    dtype: str
    threads: int
    cublas_workspace_config: str
    switches: Switches

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Environment:
        """Read an environment from untrusted JSON (a PNG chunk, an API call): ValueError if malformed."""
        if not isinstance(data, dict) or not isinstance(data.get("switches"), dict):
            raise ValueError("environment must be an object with a switches object")
        expected = {f.name: f.type for f in fields(cls) if f.name != "switches"}
        switches = {f.name for f in fields(Switches)}
        if set(data) != {*expected, "switches"} or set(data["switches"]) != switches:
            raise ValueError(f"environment must have exactly the keys {', '.join(sorted([*expected, 'switches']))}")
        for name, kind in expected.items():  # field types are "str" or "int" (annotations are strings here)
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, {"str": str, "int": int}[kind]):
                raise ValueError(f"environment {name} must be {kind}, got {value!r}")
        if not all(isinstance(value, bool) for value in data["switches"].values()):
            raise ValueError("environment switches must be true or false")
        return cls(**{**data, "switches": Switches(**data["switches"])})

    def differences(self, other: Environment) -> list[str]:
        """Human-readable differences ("torch: 2.13.0 here, 2.12.0 there"), empty when the same."""
        mine, theirs = self.to_dict(), other.to_dict()
        mine.update(mine.pop("switches")), theirs.update(theirs.pop("switches"))
        return [f"{key}: {mine[key]} here, {theirs.get(key)} there" for key in mine if mine[key] != theirs.get(key)]


def current_environment(device: torch.device, dtype: torch.dtype, switches: Switches) -> Environment:
    """The environment in force right now, on `device`, with `switches` applied."""
    import diffusers

    from . import __version__

    return Environment(
        seedlab=__version__,
        diffusers=diffusers.__version__,
        torch=str(torch.__version__),
        device=device_name(device),
        dtype=str(dtype).removeprefix("torch."),
        threads=torch.get_num_threads(),
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
        switches=switches,
    )


def device_name(device: torch.device) -> str:
    """A readable device name: "cuda: NVIDIA H100 80GB HBM3", "cpu: x86_64"."""
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    if device.type == "cpu":
        return f"cpu: {platform.machine() or 'unknown'}"
    return device.type
