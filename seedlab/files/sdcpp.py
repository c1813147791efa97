"""stable-diffusion.cpp's A1111-style text: its RNG words and its `Sampler: <method> [<scheduler>]`.

sd.cpp (examples/common/common.cpp `get_image_params`, read at leejet/stable-diffusion.cpp 97d29908) writes
`..., RNG: cuda, [Sampler RNG: ..., ]Sampler: euler_a karras, ..., Version: stable-diffusion.cpp, SDCPP: {...}`:
the RNG is `rng_type_to_str` (std_default, cuda, cpu), the scheduler follows the method after a space and only
when one was chosen (else sd.cpp's default: discrete for SD 1.x / 2.x, lcm for lcm and tcd, simple for
ddim_trailing). infotext.py reads the rest of the text.
"""

from __future__ import annotations

from typing import Any

from ..engine.samplers.names import SDCPP, SDCPP_SAMPLERS

VERSION = "stable-diffusion.cpp"
# rng_type_to_str -> SeedLab's rng. cuda: sd.cpp's PhiloxRNG re-creates torch's CUDA Philox, but its Box-Muller
# (src/core/rng_philox.hpp) casts each 32-bit word to float and takes logf / sqrtf / sinf in float32, where
# engine/philox.py (curand's values) computes in float64 and rounds once: values can differ in their last bits.
SDCPP_RNG = {"cuda": "cuda-philox", "std_default": "std-libstdc++", "cpu": "cpu"}
_RNG_NOTES = {
    "cuda": "RNG cuda is sd.cpp's Philox, rng cuda-philox here; sd.cpp computes its Box-Muller step in float32 "
            "(cast words, logf, sinf), SeedLab as curand does in float64 rounded once, so a value can differ in its "
            "last float32 bits",
    "std_default": "RNG std_default is the C++ library's std::normal_distribution, which the file does not name: "
                   "rng std-libstdc++ (a Linux build) is used; a macOS build draws std-libc++ and a Windows build "
                   "std-msvc: choose that rng if the file was made there",
}
# sd.cpp's methods that SeedLab does not run as sd.cpp does, and why; the A1111 sampler with the same math, if any.
# (euler_a and dpm++2s_a run as sd.cpp's: their step noise continues the latents' rng, engine/samplers/sdcpp.py.)
_NOT_RUN = {
    "lms": ("LMS", "not written here yet"),
}
_SCHEDULES = {"discrete": "Automatic", "karras": "Karras"}
_ALL_SCHEDULES = ("discrete", "karras", "exponential", "ays", "gits", "sgm_uniform", "simple", "smoothstep",
                  "kl_optimal", "lcm", "bong_tangent", "ltx2", "logit_normal", "flux2", "flux", "beta")


def is_sdcpp_text(by_key: dict[str, Any]) -> bool:
    return str(by_key.get("Version", "")).strip() == VERSION


def read_rng(value: str, notes: list[str]) -> str:
    """sd.cpp's RNG word as SeedLab's rng, with a note where it is not exact."""
    if value in _RNG_NOTES:
        notes.append(_RNG_NOTES[value])
    return SDCPP_RNG[value]


def read_sampler(name: str, fields: dict[str, Any], notes: list[str]) -> bool:
    """`euler karras` as scheduler "euler (sd.cpp)" and schedule Karras; what is not run here in a note."""
    parts = name.split()
    method, schedule = (parts[0], parts[1]) if len(parts) == 2 and parts[1] in _ALL_SCHEDULES else (name.strip(), "")
    if method + SDCPP in SDCPP_SAMPLERS:
        fields["scheduler"], fields["schedule"] = method + SDCPP, _SCHEDULES.get(schedule, "Automatic")
        if schedule and schedule not in _SCHEDULES:
            notes.append(f"sd.cpp's {schedule} schedule is not run here: its discrete schedule is used, so the "
                         "image differs")
        return True
    fallback, why = _NOT_RUN.get(method, ("default", "not written here yet"))
    fields["scheduler"] = fallback
    if fallback != "default":  # A1111's Uniform is sd.cpp's discrete in math
        fields["schedule"] = {"": "Uniform", "discrete": "Uniform", "karras": "Karras"}.get(schedule, "Automatic")
    instead = "the model's default scheduler" if fallback == "default" else f"A1111's {fallback}"
    notes.append(f"sd.cpp's sampler {method[:40]!r}{' ' + schedule if schedule else ''} is not run as sd.cpp runs it "
                 f"({why}): {instead} runs instead, so the image differs")
    return True
