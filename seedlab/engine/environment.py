"""The environment an image was made in: versions, device, threads and determinism switches.

One torch-free shape, read from a result, a PNG chunk, an API call or a link. A link carries a
compact form without `cublas_workspace_config` (set at process start), so that part may be None:
unknown parts are never reported as differences. `cpu_isa` and `cpu_vendor` (cpu.py) are None in
records made before SeedLab recorded them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any

from . import cpu

OPTIONAL = ("cublas_workspace_config", "cpu_isa", "cpu_vendor")  # keys a record may lack


@dataclass(frozen=True)
class Switches:
    """The torch settings that decide whether kernels are deterministic (see determinism.py)."""

    deterministic_algorithms: bool
    deterministic_warn_only: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool
    matmul_tf32: bool
    cudnn_tf32: bool


SWITCH_NAMES = tuple(field.name for field in dataclasses.fields(Switches))


@dataclass(frozen=True)
class Environment:
    """What an image was made with, beyond its recipe: enough to explain why pixels differ."""

    seedlab: str
    diffusers: str
    torch: str
    device: str
    dtype: str
    threads: int
    cublas_workspace_config: str | None  # None: not recorded (a link leaves it out)
    switches: Switches
    cpu_isa: str | None = None  # "avx2" (the baseline), "portable", "universal", "native:avx512", ... (cpu.in_force)
    cpu_vendor: str | None = None  # "AMD", "Intel": MKL rounds differently on each unless portable

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Environment:
        """Read an environment from untrusted JSON (a PNG chunk, an API call): ValueError if malformed."""
        if not isinstance(data, dict) or not isinstance(data.get("switches"), dict):
            raise ValueError("environment must be an object with a switches object")
        names = {field.name for field in dataclasses.fields(cls)}
        if not names - set(OPTIONAL) <= set(data) <= names:
            raise ValueError(f"environment must have the keys {', '.join(sorted(names))}")
        if set(data["switches"]) != set(SWITCH_NAMES):
            raise ValueError(f"environment switches must have the keys {', '.join(SWITCH_NAMES)}")
        for name in ("seedlab", "diffusers", "torch", "device", "dtype"):
            if not isinstance(data[name], str) or len(data[name]) > 200:
                raise ValueError(f"environment {name} must be text of at most 200 characters, "
                                 f"got {str(data[name])[:60]!r}")
        threads = data["threads"]
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 4096:
            raise ValueError(f"environment threads must be a whole number from 1 to 4096, got {str(threads)[:40]!r}")
        cublas = data.get("cublas_workspace_config")
        if cublas is not None and (not isinstance(cublas, str) or len(cublas) > 40):
            raise ValueError("environment cublas_workspace_config must be short text or null")
        if not all(isinstance(value, bool) for value in data["switches"].values()):
            raise ValueError("environment switches must be true or false")
        found = {name: data.get(name) for name in ("cpu_isa", "cpu_vendor")}
        for name, value in found.items():
            if value is not None and name == "cpu_isa":
                cpu.check_record(value, f"environment {name}")
            elif value is not None and (not isinstance(value, str) or len(value) > 40 or not value.isprintable()):
                raise ValueError(f"environment {name} must be printable text of at most 40 characters")
        return cls(**{**data, **found, "cublas_workspace_config": cublas, "switches": Switches(**data["switches"])})

    def flat(self) -> dict[str, Any]:
        """One level: the switches beside the other parts."""
        values = {key: value for key, value in self.to_dict().items() if key != "switches"}
        return {**values, **asdict(self.switches)}

    def differences(self, other: Environment) -> list[str]:
        """Readable differences ("threads: 2 here, 1 there"); parts unknown on either side are skipped."""
        mine, theirs = self.flat(), other.flat()
        found = []
        for key in mine:
            if mine[key] is None or theirs[key] is None or mine[key] == theirs[key]:
                continue
            if key == "cpu_isa":
                found.append(f"CPU kernels: computed with {cpu.describe(mine[key])}, "
                             f"the original with {cpu.describe(theirs[key])}")
            elif key == "cpu_vendor" and "portable" not in (mine["cpu_isa"], theirs["cpu_isa"]) and not (
                    mine["cpu_isa"] == theirs["cpu_isa"] == cpu.UNIVERSAL):  # universal: the vendor changes nothing
                found.append(f"CPU vendor: {mine[key]} here, {theirs[key]} there (MKL rounds differently on each; "
                             "the portable baseline does not)")
            elif key != "cpu_vendor":
                found.append(f"{key}: {mine[key]} here, {theirs[key]} there")
        return found
