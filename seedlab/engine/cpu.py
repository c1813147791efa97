"""The CPU baseline: which instruction set CPU kernels may use, so that pixels match across x86-64 machines.

Three libraries inside torch pick their kernels by the CPU they find, and the kernels round differently:
ATen's vectorised ops (AVX2 or AVX-512 builds of the same loops), oneDNN's convolutions (JIT code per
ISA) and MKL's SGEMM (every Linear layer and attention product, and one-thread convolutions through
im2col). Measured with torch 2.13 CPU (docs/determinism.md has the tables):
- on an AMD EPYC with AVX-512, capping ATen alone or oneDNN alone left 3 of 7 old fixtures different and
  capping both made all 7 exact; small SDXL and SD3 pipelines also needed MKL_CBWR=AVX2 there;
- on an AMD EPYC with AVX2 only (bench/bench_cpu_settings.py), every AVX2 cap equals native for every
  family, and MKL_CBWR=COMPATIBLE changes the pixels of the embedded model, SD 1.x and SDXL: MKL does
  act on its code-branch setting on AMD CPUs;
- with MKL's vendor check answered "Intel" on the AVX-512 machine, SGEMM took its AVX-512 branch unless
  MKL_CBWR=AVX2, and that branch differed from MKL's AMD path in 3 of 5 shapes.
So the baseline caps all three:

- `avx2` (default): ATen and oneDNN at AVX2, MKL's AVX2 branch (conditional numerical reproducibility).
  The same pixels on AVX2 and AVX-512 CPUs of one vendor (measured on AMD; on Intel through the emulation
  above). MKL's AVX2 branch on Intel and its AMD path round differently, so Intel and AMD hosts can differ
  in low bits.
- `portable`: as avx2, with MKL's COMPATIBLE (SSE2) branch, the one MKL runs the same on Intel and AMD;
  SGEMM is about 2.3x slower.
- `native`: nothing capped (fastest; pixels depend on the CPU).
- `universal`: nothing capped either; instead every model call computes in float64 and rounds its output
  to the recipe's float32 (wide.py), so the kernels' rounding stops reaching the pixels: the same pixels on
  x86-64 CPUs of every vendor and instruction set, on ARM, at any thread count. No cap tells it apart, so
  it is known by SEEDLAB_CPU_ISA alone.

The settings are environment variables that each library reads once, when it first computes; they must
be in place before torch runs its first operation. Importing seedlab puts the requested baseline in place
(`SEEDLAB_CPU_ISA`, default avx2), and child processes (worker pools, Ray actors) inherit it; a child
asked for another baseline (a reproduction retried natively) starts from the shell's own settings. What was in
force is read back for the environment record, so a record never claims a baseline that did not apply.
"""

from __future__ import annotations

import json
import os
import platform

ENV_VAR = "SEEDLAB_CPU_ISA"
DEFAULT = "avx2"
# Each baseline's settings; `native` sets nothing. Values as each library spells them.
BASELINES: dict[str, dict[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"},
    "portable": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"},
    "native": {},
    "universal": {},  # wide models instead of caps: what the environment sets is kept, as native keeps it
}
UNIVERSAL = "universal"
LEVELS = tuple(BASELINES)
SETTINGS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
NAMES = {"avx2": "the AVX2 baseline", "portable": "the portable baseline (AVX2, MKL's SSE2 branch)",
         UNIVERSAL: "the universal baseline (float64 models, the same pixels on any CPU)"}
KERNELS = {"avx512": "AVX-512", "avx2": "AVX2", "default": "unvectorised", "zvector": "z/Arch vector"}
_ISA_TEXT = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_:-.")
# The settings as the shell gave them, so that `native` can give back what a baseline replaced. A child
# process (a worker, a retry under another baseline) inherits its parent's caps, so the first process
# that imports seedlab passes what it found on, in FOUND_VAR.
FOUND_VAR = "SEEDLAB_CPU_FOUND"


def _found() -> dict[str, str | None]:
    try:
        inherited = json.loads(os.environ.get(FOUND_VAR, ""))
    except ValueError:
        inherited = None
    if isinstance(inherited, dict) and all(isinstance(inherited.get(name), (str, type(None))) for name in SETTINGS):
        return {name: inherited.get(name) for name in SETTINGS}
    found = {name: os.environ.get(name) for name in SETTINGS}
    os.environ[FOUND_VAR] = json.dumps(found)
    return found


_FOUND = _found()


def is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def check_level(value: str, name: str = "cpu isa") -> str:
    """A baseline name, or ValueError naming `name` and the allowed values."""
    if value not in BASELINES:
        raise ValueError(f"{name} must be one of {', '.join(LEVELS)}, got {str(value)[:40]!r}")
    return value


def requested() -> str:
    """The baseline this process asks for: SEEDLAB_CPU_ISA, or the default."""
    return check_level(os.environ.get(ENV_VAR, "").strip().lower() or DEFAULT, ENV_VAR)


def apply(level: str) -> None:
    """Put `level`'s settings in the environment, for this process and the ones it starts.

    Takes effect only where torch has not computed yet (each library reads its setting once). `native`
    puts back what the process started with (a setting made by hand stays).
    """
    check_level(level)
    os.environ[ENV_VAR] = level
    if not is_x86():  # the caps name x86 instruction sets; elsewhere they mean nothing
        return
    for name in SETTINGS:
        value = BASELINES[level].get(name, _FOUND[name])
        if value is not None:
            os.environ[name] = value
        else:
            os.environ.pop(name, None)


def kernels() -> str:
    """ATen's instruction set in force ("avx2", "avx512", "default", ...); fixes it if torch has not yet."""
    import torch

    return torch.backends.cpu.get_cpu_capability().lower()


def in_force() -> str:
    """What CPU kernels compute now, for the environment record.

    A baseline's name when all its settings are in force and ATen runs them; otherwise "native:" and the
    instruction set ATen runs ("native:avx512"), including when only some caps were set by hand. Universal
    sets no caps: it is in force whenever this process asks for it (on any architecture).
    """
    if is_universal():
        return UNIVERSAL
    aten = kernels()
    for level, settings in BASELINES.items():
        if settings and is_x86() and aten == settings["ATEN_CPU_CAPABILITY"] and all(
                os.environ.get(name) == value for name, value in settings.items()):
            return level
    return f"native:{aten}"


def is_universal() -> bool:
    """Whether this process asks for the universal baseline, which models compute in float64 (wide.py)."""
    return os.environ.get(ENV_VAR, "").strip().lower() == UNIVERSAL


def vendor() -> str:
    """The CPU's maker as MKL tells them apart ("AMD", "Intel", or the vendor string; "" if unknown)."""
    text = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    text = line.partition(":")[2].strip()
                    break
    except OSError:
        text = platform.processor()
    if "AMD" in text:
        return "AMD"
    if "Intel" in text:
        return "Intel"
    return text[:40]


def check_record(value: object, name: str) -> str:
    """A recorded instruction set or vendor from an untrusted source: short plain text."""
    if not isinstance(value, str) or not 1 <= len(value) <= 40 or not set(value.lower()) <= _ISA_TEXT | {" "}:
        raise ValueError(f"{name} must be 1 to 40 letters, digits or :-_. characters, got {str(value)[:40]!r}")
    return value


def describe(isa: str) -> str:
    """How a verdict names a record: "the AVX2 baseline", "AVX-512 kernels (no baseline)"."""
    if isa in NAMES:
        return NAMES[isa]
    kind = isa.removeprefix("native:")
    return f"{KERNELS.get(kind, kind)} kernels (no baseline)"


def level_for(isa: str) -> str | None:
    """The baseline that reproduces a recorded instruction set on this machine, or None if none can.

    "native:avx2" is what SeedLab 0.1 recorded nothing for: AVX2 kernels with nothing capped, which the
    avx2 baseline reproduces (the old fixtures are exact under it). "native:avx512" needs an AVX-512 CPU.
    """
    if isa in BASELINES:
        return isa
    if isa == "native:avx2" and is_x86():
        return "avx2"
    return "native" if isa == f"native:{native_kernels()}" else None


def native_kernels() -> str:
    """The instruction set ATen picks on this CPU with nothing capped, from the CPU's flags ("" if unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            flags = next((set(line.partition(":")[2].split()) for line in info if line.startswith("flags")), set())
    except OSError:
        return ""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"} <= flags:
        return "avx512"
    return "avx2" if {"avx2", "fma"} <= flags else ("default" if flags else "")
