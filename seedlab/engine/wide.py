"""Wide models: under the universal CPU baseline every model call computes in float64 and returns float32.

A CPU's kernels round float32 arithmetic their own way: MKL's code path (another vendor's CPU), ATen's
vectorised or scalar loops (AVX2, AVX-512, ARM), the thread count. Each changes the low bits of a UNet's
output, and 20 steps carry them into the pixels (about 10,000 of the embedded model's 12,288 float
values). In float64 the kernels still disagree, by ~1e-16 relative; rounding that to float32 (spacing
~6e-8) lands on the same float32 value but in rare near-ties. So a model that computes in float64 from
its first operation and rounds its outputs to float32 gives the same float32 outputs on every machine,
and the sampler's arithmetic between calls is float32 IEEE arithmetic, which rounds the same everywhere.

`widened(pipeline)` is a shallow copy of a pipeline whose model components (UNet or transformer, text
encoders, VAE) are `Wide` stand-ins: each holds a float64 copy of its module and casts floating tensor
inputs to float64 and outputs back to float32; every attribute that is not a submodule or a method
(`config`, `dtype`, `device`) is the float32 module's, so the pipeline and SeedLab's samplers see the
float32 model they were written for. A submodule reached through a stand-in (a text encoder's final
layer norm for clip skip, its token embedding for a textual-inversion hook) is a stand-in too.

Inside diffusers' models a few values are made in float32 whatever the model's dtype: the sinusoidal
timestep embedding of every `Timesteps` module (the UNet's time_proj, SD3's, Flux's and PixArt's
combined embeddings), the first value that differed on ARM. The float64 copies compute it in float64
(`WideTimesteps`). Flux's rotary frequencies are float64 already (diffusers' choice on a CPU); its
rotation multiplies and adds float32 values elementwise, which rounds the same on every machine.

A diffusers scheduler computes its betas with a float32 `torch.linspace`, whose multiply-adds an AVX2 build
fuses and others do not (the embedded model's alphas_cumprod differ under ATEN_CPU_CAPABILITY=default):
`exact_betas` gives it betas computed in float64 and rounded once, from which it derives the rest as usual.

Between model calls the samplers (diffusers' schedulers, A1111's, ComfyUI's) compute in float32. Elementwise
+, -, *, / are IEEE everywhere; torch's float32 transcendentals are not: on aarch64 (PyPI's torch 2.13.0, under
../shared/arm-lab) `exp`, `log`, `sqrt` and `x ** 0.5` of one value or of a vector differ from x86's, and on x86
`expm1`, `lerp`, `linspace` and others differ between AVX2 and scalar builds; the same functions in float64,
rounded to float32, agree. `ExactMath` is a torch function mode that computes them so while an image is made.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from diffusers.models.embeddings import Timesteps
from torch.overrides import TorchFunctionMode

WIDE = torch.float64
NARROW = torch.float32  # the interfaces' dtype: the only one the universal baseline runs (check_dtype)
COMPONENTS = ("unet", "transformer", "text_encoder", "text_encoder_2", "text_encoder_3", "vae")
_twins: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # pipeline -> its widened copy, made once
_lock = threading.Lock()


def check_dtype(dtype: str, device: torch.device | str = "cpu") -> str:
    """`dtype` when the universal baseline can honour it on `device`, else ValueError naming both."""
    if torch.device(device).type == "cpu" and dtype != "float32":
        raise ValueError(f"dtype must be float32 under the universal CPU baseline (it computes every model in "
                         f"float64 and hands back float32), got {str(dtype)[:40]!r}; use --dtype float32, or "
                         "another --cpu-isa")
    return dtype


def widened(pipeline):
    """`pipeline` with its models computing in float64 (a shallow copy, kept while `pipeline` lives)."""
    with _lock:
        twin = _twins.get(pipeline)
        if twin is None:
            twin = copy.copy(pipeline)
            for name in COMPONENTS:
                module = getattr(pipeline, name, None)
                if isinstance(module, torch.nn.Module):
                    # Not the pipeline's own setattr, which would register the stand-in in the copy's config.
                    object.__setattr__(twin, name, Wide(module, wide_copy(module)))
            _twins[pipeline] = twin
        return twin


def wide_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of `module` (its tensors copied, the original untouched), timestep embeddings included."""
    with torch.no_grad():
        wide = copy.deepcopy(module).to(WIDE)
    wide.requires_grad_(False)
    for parent in list(wide.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is Timesteps:
                setattr(parent, name, WideTimesteps(child))
    return wide


def exact_betas(scheduler):
    """`scheduler` made again from betas computed in float64 and rounded once, where it makes them with linspace."""
    config = dict(scheduler.config)
    kind = config.get("beta_schedule")
    takes = "trained_betas" in inspect.signature(type(scheduler).__init__).parameters
    if not takes or config.get("trained_betas") is not None or kind not in ("linear", "scaled_linear"):
        return scheduler  # given betas, a cosine schedule of Python floats, or flow matching: nothing to widen
    start, end, count = config["beta_start"], config["beta_end"], config["num_train_timesteps"]
    betas = np.linspace(start, end, count) if kind == "linear" else np.linspace(start ** 0.5, end ** 0.5, count) ** 2
    return type(scheduler).from_config({**config, "trained_betas": betas.astype(np.float32).tolist()})


class Wide:
    """Stands in for a float32 module: calls run its float64 copy, with float32 in and out."""

    def __init__(self, narrow: torch.nn.Module, wide: torch.nn.Module):
        self.narrow, self.wide = narrow, wide
        self._parts: dict[str, Wide] = {}

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("narrow", "wide", "_parts"):  # copy and pickle ask before __init__
            raise AttributeError(name)
        value = getattr(self.wide, name)
        if isinstance(value, torch.nn.Module):
            if name not in self._parts:
                self._parts[name] = Wide(getattr(self.narrow, name), value)
            return self._parts[name]
        if inspect.ismethod(value) and value.__self__ is self.wide:
            return casting(value)  # decode, encode, register_forward_hook: run on the float64 copy
        return getattr(self.narrow, name)  # config, dtype, device, training: the float32 module's

    def __call__(self, *args, **kwargs):
        return casting(self.wide)(*args, **kwargs)


def casting(function: Callable) -> Callable:
    """`function` called with its floating tensors in float64, and its results' in float32."""

    def call(*args, **kwargs):
        return cast(function(*cast(args, WIDE), **cast(kwargs, WIDE)), NARROW)

    return call


def cast(value: Any, dtype: torch.dtype) -> Any:
    """`value` with every floating tensor in it (tuples, lists, dicts, model outputs, distributions) in `dtype`."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(cast(item, dtype) for item in value)
    if isinstance(value, dict):  # diffusers' BaseOutput and transformers' ModelOutput are dicts, built by keyword
        items = {key: cast(item, dtype) for key, item in value.items()}
        return items if type(value) is dict else type(value)(**items)
    if hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module) and not callable(value) and any(
            isinstance(item, torch.Tensor) for item in vars(value).values()):
        # A VAE's DiagonalGaussianDistribution: its mean and std computed in float64, then each rounded.
        made = copy.copy(value)
        vars(made).update({key: cast(item, dtype) for key, item in vars(value).items()})
        return made
    return value


class WideTimesteps(torch.nn.Module):
    """diffusers' Timesteps (get_timestep_embedding), with its sinusoid built in float64 instead of float32."""

    def __init__(self, narrow: Timesteps):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = narrow.num_channels, narrow.flip_sin_to_cos
        self.downscale_freq_shift, self.scale = narrow.downscale_freq_shift, narrow.scale

    def forward(self, timesteps: torch.Tensor) -> torch.Tensor:
        half = self.num_channels // 2
        exponent = -math.log(10000) * torch.arange(0, half, dtype=WIDE, device=timesteps.device)
        exponent = exponent / (half - self.downscale_freq_shift)
        emb = timesteps[:, None].to(WIDE) * torch.exp(exponent)[None, :]
        emb = self.scale * emb
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
        if self.flip_sin_to_cos:
            emb = torch.cat([emb[:, half:], emb[:, :half]], dim=-1)
        if self.num_channels % 2 == 1:
            emb = torch.nn.functional.pad(emb, (0, 1, 0, 0))
        return emb


# torch functions whose float32 result depends on the CPU's build (measured: bench/check_universal.py, arm-lab).
_NAMES = ("exp", "log", "sqrt", "rsqrt", "expm1", "log1p", "log2", "log10", "exp2", "sin", "cos", "tan", "asin",
          "acos", "atan", "sinh", "cosh", "tanh", "sigmoid", "erf", "lerp", "addcmul", "addcdiv", "pow")
WIDENED = frozenset([getattr(torch, name) for name in _NAMES] + [getattr(torch.Tensor, name) for name in _NAMES]
                    + [torch.Tensor.__pow__, torch.Tensor.__rpow__])


class ExactMath(TorchFunctionMode):
    """While active (in this thread): WIDENED functions of float32 CPU tensors, and float32 linspace, computed in
    float64 and rounded once, so that they give the same float32 on every machine."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.linspace and kwargs.get("dtype") in (None, NARROW) and "out" not in kwargs:
            return func(*args, **{**kwargs, "dtype": WIDE}).to(kwargs.get("dtype") or torch.get_default_dtype())
        if func in WIDENED and "out" not in kwargs and _narrow(args):
            return func(*cast(args, WIDE), **cast(kwargs, WIDE)).to(NARROW)
        return func(*args, **kwargs)


def _narrow(args: tuple) -> bool:
    """Whether a call's tensors are float32 on a CPU (and at least one is a tensor)."""
    tensors = [value for value in args if isinstance(value, torch.Tensor)]
    return bool(tensors) and all(t.dtype == NARROW and t.device.type == "cpu" for t in tensors)


def exact_math(enabled: bool):
    """ExactMath when `enabled` (the universal baseline on a CPU), else a context that changes nothing."""
    return ExactMath() if enabled else contextlib.nullcontext()
