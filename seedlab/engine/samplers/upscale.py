"""Hires fix's latent upscalers: A1111's interpolation modes and ComfyUI's LatentUpscale methods, bislerp included.

A recipe's `hires_upscaler` names one of recipe.LATENT_UPSCALERS. All but one are torch's interpolate with a mode
(and A1111's antialias flag). ComfyUI's "bislerp" (comfy/utils.py) is its own: bilinear in where it samples, but
each pair of neighbouring latent vectors (all channels of one position, a row of C values) is blended by spherical
interpolation of their directions, with the length blended linearly; first along the width, then along the height.
tests/test_comfy_samplers.py compares it tensor for tensor with tests/reference/comfyui.py.
"""

from __future__ import annotations

import torch
from torch.nn import functional

from ..recipe import LATENT_UPSCALERS


def upscale_latents(latents: torch.Tensor, height: int, width: int, upscaler: str) -> torch.Tensor:
    """`latents` (N, C, H, W) enlarged to (height, width) latent pixels by the hires upscaler named `upscaler`."""
    mode, antialias = LATENT_UPSCALERS[upscaler]
    if mode == "bislerp":
        return bislerp(latents, height, width)
    return functional.interpolate(latents, size=(height, width), mode=mode, antialias=antialias)


def bislerp(latents: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """ComfyUI's bislerp: the width first, then the height, computed in float32, returned in the input's dtype."""
    dtype, samples = latents.dtype, latents.float()
    wide = _along(samples, width, dim=-1)
    return _along(wide, height, dim=-2).to(dtype)


def _along(samples: torch.Tensor, size: int, dim: int) -> torch.Tensor:
    """Resample one axis (-1: width, -2: height) to `size`: each output position slerps its two bilinear taps."""
    ratio, first, second = _taps(samples.shape[dim], size, samples.device)
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


def _taps(old: int, new: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For each of `new` positions: the blend ratio and the two source indices (the second one clamped to the
    last), found by bilinear interpolation of the indices themselves, as ComfyUI finds them."""
    def resampled(values: torch.Tensor) -> torch.Tensor:
        return functional.interpolate(values.view(1, 1, 1, -1), size=(1, new), mode="bilinear").view(-1)

    positions = resampled(torch.arange(old, dtype=torch.float32, device=device))
    nexts = torch.arange(old, dtype=torch.float32, device=device) + 1
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
