"""Hires fix's latent upscalers: A1111's interpolation modes and ComfyUI's LatentUpscale methods, bislerp included.

A recipe's `hires_upscaler` names one of recipe.LATENT_UPSCALERS. All but one are torch's interpolate with a mode
(and A1111's antialias flag). ComfyUI's "bislerp" (comfy/utils.py) is its own: bilinear in where it samples, but
each pair of neighbouring latent vectors (all channels of one position, a row of C values) is blended by spherical
interpolation of their directions, with the length blended linearly; first along the width, then along the height.
tests/test_comfy_samplers.py compares it tensor for tensor with tests/reference/comfyui.py.

Under the universal CPU baseline an upscaler computes in float64 and rounds its result to the latents' dtype once:
an interpolation's multiply-adds (fused on AVX2 builds, not elsewhere) and bislerp's acos and sines (vectorised
or scalar by the CPU) round differently from machine to machine. `separable` applies the interpolation's weights
with elementwise float64 operations in a fixed order, so its bits are the same everywhere; bislerp in float64
differs by far less than float32's spacing.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch
from torch.nn import functional

from .. import cpu
from ..recipe import LATENT_UPSCALERS


def upscale_latents(latents: torch.Tensor, height: int, width: int, upscaler: str) -> torch.Tensor:
    """`latents` (N, C, H, W) enlarged to (height, width) latent pixels by the hires upscaler named `upscaler`."""
    mode, antialias = LATENT_UPSCALERS[upscaler]
    if mode == "bislerp":
        return bislerp(latents, height, width)
    if cpu.is_universal() and latents.device.type == "cpu":
        return separable(latents, height, width, mode, antialias)
    return functional.interpolate(latents, size=(height, width), mode=mode, antialias=antialias)


def separable(latents: torch.Tensor, height: int, width: int, mode: str, antialias: bool) -> torch.Tensor:
    """torch's interpolate as per-axis weights, applied in float64 and rounded once (universal baseline).

    Every mode here is separable: an output value is a sum over rows and columns of weight(row) * weight(column)
    * input. Each axis is resampled by elementwise float64 products and sums in a fixed order (IEEE: the same
    bits on every machine); a GEMM would sum in the order its kernel blocks, and a result 1 ulp apart can round
    to another float32 where the exact value is a tie.
    """
    wide = _resampled(latents.double(), _weights(latents.shape[-1], width, mode, antialias), -1)
    return _resampled(wide, _weights(latents.shape[-2], height, mode, antialias), -2).to(latents.dtype)


def _resampled(values: torch.Tensor, weights: torch.Tensor, dim: int) -> torch.Tensor:
    """`values` resampled along `dim` by `weights` (new, old): each output the sum of its taps, in index order."""
    rows = [[(index, weight) for index, weight in enumerate(row.tolist()) if weight] or [(0, 0.0)]
            for row in weights]
    view = [1] * values.dim()
    view[dim] = len(rows)
    total = None
    for tap in range(max(len(row) for row in rows)):
        taken = [row[tap] if tap < len(row) else (row[0][0], 0.0) for row in rows]
        indices = torch.tensor([index for index, _ in taken])
        scale = torch.tensor([weight for _, weight in taken], dtype=values.dtype).view(view)
        term = values.index_select(dim, indices) * scale
        total = term if total is None else total + term
    return total


def _weights(old: int, new: int, mode: str, antialias: bool) -> torch.Tensor:
    """(new, old): how much each of `old` positions weighs in each of `new`, as interpolate computes it.

    Linear and cubic weights are computed exactly (fractions) and rounded once: torch's own come out of a
    multiply-add that AVX2 builds fuse (0.49999999999999994 there, 0.5 elsewhere), and a weight of one half
    makes a float32 tie that the two round apart. Nearest and area weights are exact in torch already; the
    antialiased filters are torch's, in float64.
    """
    if mode in ("bilinear", "bicubic") and not antialias:
        return torch.tensor(_exact_weights(old, new, cubic=mode == "bicubic"), dtype=torch.float64)
    identity = torch.eye(old, dtype=torch.float64).view(1, old, 1, old)
    if mode == "area":  # adaptive average pooling, which takes no antialias
        return functional.interpolate(identity, size=(1, new), mode=mode).view(old, new).T
    return functional.interpolate(identity, size=(1, new), mode=mode, antialias=antialias).view(old, new).T


def bislerp(latents: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """ComfyUI's bislerp: the width first, then the height, computed in float32 (float64 under the universal
    baseline), returned in the input's dtype."""
    wide = cpu.is_universal() and latents.device.type == "cpu"
    dtype, samples = latents.dtype, latents.to(torch.float64 if wide else torch.float32)
    widened = _along(samples, width, dim=-1)
    return _along(widened, height, dim=-2).to(dtype)


def _along(samples: torch.Tensor, size: int, dim: int) -> torch.Tensor:
    """Resample one axis (-1: width, -2: height) to `size`: each output position slerps its two bilinear taps."""
    ratio, first, second = _taps(samples.shape[dim], size, samples.device, samples.dtype)
    channels = samples.shape[1]
    # Rows of C values in (n, h, w) order, as ComfyUI's gather / movedim / reshape makes them.
    rows_a = samples.index_select(dim, first).movedim(1, -1).reshape(-1, channels)
    rows_b = samples.index_select(dim, second).movedim(1, -1).reshape(-1, channels)
    shape = list(samples.shape)
    shape[dim] = size
    view = [1, 1, 1, 1]
    view[dim] = size
    ratios = ratio.view(view).expand(shape[0], 1, shape[2], shape[3]).movedim(1, -1).reshape(-1, 1)
    out = _slerp(rows_a, rows_b, ratios)
    return out.reshape(shape[0], shape[2], shape[3], channels).movedim(-1, 1)


def _taps(old: int, new: int, device, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For each of `new` positions: the blend ratio and the two source indices (the second one clamped to the
    last), found by bilinear interpolation of the indices themselves, as ComfyUI finds them."""
    def resampled(values: torch.Tensor) -> torch.Tensor:
        return functional.interpolate(values.view(1, 1, 1, -1), size=(1, new), mode="bilinear").view(-1)

    positions = resampled(torch.arange(old, dtype=dtype, device=device))
    nexts = torch.arange(old, dtype=dtype, device=device) + 1
    nexts[-1] -= 1
    return positions - positions.floor(), positions.to(torch.int64), resampled(nexts).to(torch.int64)


def _slerp(a: torch.Tensor, b: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor:
    """Rows a, b (N x C) blended by ratio (N x 1): the unit directions slerped, the length lerped; a where the
    directions agree, the plain lerp where they are opposite; a zero row has no direction."""
    channels = a.shape[-1]
    norm_a, norm_b = torch.norm(a, dim=-1, keepdim=True), torch.norm(b, dim=-1, keepdim=True)
    unit_a, unit_b = a / norm_a, b / norm_b
    unit_a[norm_a.expand(-1, channels) == 0.0] = 0.0
    unit_b[norm_b.expand(-1, channels) == 0.0] = 0.0
    dot = (unit_a * unit_b).sum(1)
    omega = torch.acos(dot)
    sin_omega = torch.sin(omega)
    r = ratio.squeeze(1)
    out = (torch.sin((1.0 - r) * omega) / sin_omega).unsqueeze(1) * unit_a
    out = out + (torch.sin(r * omega) / sin_omega).unsqueeze(1) * unit_b
    out *= (norm_a * (1.0 - ratio) + norm_b * ratio).expand(-1, channels)
    same, opposite = dot > 1 - 1e-5, dot < 1e-5 - 1
    out[same] = a[same]
    out[opposite] = (a * (1.0 - ratio) + b * ratio)[opposite]
    return out


CUBIC_A = Fraction(-3, 4)  # torch's bicubic convolution constant (upsample_bicubic2d)


def _exact_weights(old: int, new: int, *, cubic: bool) -> list[list[float]]:
    """torch's linear or cubic interpolation weights (align_corners False, a size given), as exact fractions."""
    rows = []
    for target in range(new):
        source = Fraction(old, new) * (target + Fraction(1, 2)) - Fraction(1, 2)
        row = [Fraction(0)] * old
        if cubic:
            first = math.floor(source)
            for offset, weight in zip(range(-1, 3), _cubic(source - first)):
                row[min(max(first + offset, 0), old - 1)] += weight
        else:
            source = max(source, Fraction(0))
            low = math.floor(source)
            high = low + (1 if low < old - 1 else 0)
            row[low] += 1 - (source - low)
            row[high] += source - low
        rows.append([float(weight) for weight in row])
    return rows


def _cubic(t: Fraction) -> tuple[Fraction, ...]:
    """The four cubic convolution coefficients at fraction t (torch's get_cubic_upsample_coefficients)."""
    a = CUBIC_A

    def near(x: Fraction) -> Fraction:
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: Fraction) -> Fraction:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return far(t + 1), near(t), near(1 - t), far(2 - t)
