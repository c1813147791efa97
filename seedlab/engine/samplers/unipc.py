"""UniPC (Zhao et al. 2023): the multistep predictor-corrector ComfyUI and A1111 both copied from wl-zhao/UniPC.

Both run the original's B(h) update on data predictions (predict_x0, no thresholding), lower order at the start
and at the end, and no corrector on the last step; they differ around it, and each difference changes bits:

- time: ComfyUI's is the sigma itself (comfy/extra_samplers/uni_pc.py SigmaConvert: alpha = 1 / sqrt(1 + sigma^2));
  A1111's is DPM-Solver's continuous t in (0, 1], the model's log alphas interpolated linearly (NoiseScheduleVP).
- the model: ComfyUI turns its KSampler's denoised latents into noise at the VP input; A1111 asks its CFG denoiser
  for the UNet's noise at timestep (t - 1/1000) * 1000 (engine/samplers/timesteps.py).
- the times: ComfyUI walks the KSampler's sigmas (a last 0 becomes 0.001), A1111 N + 1 evenly spaced t from 1 to
  0.001; the order: ComfyUI min(3, steps - 1), A1111 3; the residual sums: ComfyUI torch.tensordot, A1111
  torch.einsum (another summation order).

Both call the model once a step. Written from ComfyUI's file at Comfy-Org/ComfyUI a125cd84 (2025-10-12) and A1111
1.10's modules/models/diffusion/uni_pc/uni_pc.py; tests/test_unipc.py and tests/test_a1111_timesteps.py compare
them bit for bit with the references (tests/reference/unipc.py, tests/reference/a1111_timesteps.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import kdiffusion

DataFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x, t of shape (batch,)) -> predicted x0
Contract = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (differences (b, k, c, h, w), weights (k,))


class SigmaTime:
    """ComfyUI's SigmaConvert: a VP schedule whose time is the sigma, log alpha = log(1 / (sigma^2 + 1)) / 2."""

    def log_alpha(self, sigma: torch.Tensor) -> torch.Tensor:
        return 0.5 * torch.log(1 / ((sigma * sigma) + 1))


class DiscreteTime:
    """DPM-Solver's NoiseScheduleVP('discrete', alphas_cumprod): t_n = (n + 1) / N, log alpha linear between."""

    def __init__(self, alphas_cumprod: torch.Tensor):
        log_alphas = 0.5 * torch.log(alphas_cumprod)
        self.total = len(log_alphas)
        self.times = torch.linspace(0., 1., self.total + 1)[1:].reshape((1, -1))
        self.log_alphas = log_alphas.reshape((1, -1))

    def log_alpha(self, t: torch.Tensor) -> torch.Tensor:
        return _interpolate(t.reshape((-1, 1)), self.times.to(t.device), self.log_alphas.to(t.device)).reshape(-1)


def _interpolate(x: torch.Tensor, xp: torch.Tensor, yp: torch.Tensor) -> torch.Tensor:
    """DPM-Solver's interpolate_fn: y on the line through the keypoints around x (the end ones past the ends).

    x is placed among the keypoints by sorting them together, as the original does, so that an x equal to a
    keypoint takes the segment the original takes (the two give values a rounding apart)."""
    merged = torch.cat([x.unsqueeze(2), xp.unsqueeze(0).repeat((x.shape[0], 1, 1))], dim=2)
    place = torch.argmin(torch.sort(merged, dim=2)[1], dim=2)  # keypoints sorted before x
    left = torch.clamp(place - 1, 0, xp.shape[1] - 2)
    x0, x1, y0, y1 = xp[0][left], xp[0][left + 1], yp[0][left], yp[0][left + 1]
    return y0 + (x - x0) * (y1 - y0) / (x1 - x0)


def alpha(schedule, t: torch.Tensor) -> torch.Tensor:
    return torch.exp(schedule.log_alpha(t))


def _std(schedule, t: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(1. - torch.exp(2. * schedule.log_alpha(t)))


def _lambda(schedule, t: torch.Tensor) -> torch.Tensor:
    """Half the log signal-to-noise ratio."""
    log_alpha = schedule.log_alpha(t)
    return log_alpha - 0.5 * torch.log(1. - torch.exp(2. * log_alpha))


def _column(v: torch.Tensor, dims: int) -> torch.Tensor:
    return v[(...,) + (None,) * (dims - 1)]


def data_from_noise(schedule, x: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """UniPC.data_prediction_fn: x0 = (x - sigma_t * noise) / alpha_t."""
    return (x - _column(_std(schedule, t), x.dim()) * noise) / _column(alpha(schedule, t), x.dim())


def tensordot(differences: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """ComfyUI's weighted sum of the history."""
    return torch.tensordot(differences, weights, dims=([1], [0]))


def einsum(differences: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """A1111's (the original's) weighted sum of the history."""
    return torch.einsum("k,bkchw->bchw", weights, differences)


def _coefficients(hh: torch.Tensor, rks: list, order: int, variant: str, device) -> tuple:
    """The B(h) step's R matrix (powers of the history's step ratios), b vector and B(h) (bh1: h, bh2: e^h - 1)."""
    ratios = torch.tensor([float(rk) for rk in rks] + [1.0], device=device)
    b_h = hh if variant == "bh1" else kdiffusion.expm1(hh)
    phi, factorial, rows, b = kdiffusion.expm1(hh) / hh - 1, 1, [], []
    for i in range(1, order + 1):
        rows.append(torch.pow(ratios, i - 1))
        b.append(phi * factorial / b_h)
        factorial *= i + 1
        phi = phi / hh - 1 / factorial
    return torch.stack(rows), torch.tensor([float(value) for value in b], device=device), b_h


def _update(data: DataFn, schedule, x: torch.Tensor, models: list, times: list, t: torch.Tensor, order: int,
            variant: str, corrector: bool, contract: Contract) -> tuple[torch.Tensor, torch.Tensor | None]:
    """UniPC.multistep_uni_pc_bh_update: predictor from the last `order` predictions, then (corrector) one model
    call at t and the corrected x. Returns (x at t, the prediction at t or None)."""
    dims, last = x.dim(), models[-1]
    lambda_last = _lambda(schedule, times[-1])
    h = _lambda(schedule, t) - lambda_last
    rks, differences = [], []
    for i in range(1, order):
        rk = ((_lambda(schedule, times[-(i + 1)]) - lambda_last) / h)[0]
        rks.append(rk)
        differences.append((models[-(i + 1)] - last) / rk)
    hh = -h[0]
    big_r, b, b_h = _coefficients(hh, rks, order, variant, x.device)
    alpha_t = torch.exp(schedule.log_alpha(t))
    base = (_column(_std(schedule, t) / _std(schedule, times[-1]), dims) * x
            - _column(alpha_t * kdiffusion.expm1(hh), dims) * last)
    stacked = torch.stack(differences, dim=1) if differences else None
    predicted: torch.Tensor | int = 0
    if stacked is not None:
        weights = torch.tensor([0.5], device=b.device) if order == 2 else torch.linalg.solve(big_r[:-1, :-1], b[:-1])
        predicted = contract(stacked, weights)
    x_t = base - _column(alpha_t * b_h, dims) * predicted
    if not corrector:
        return x_t, None
    weights = torch.tensor([0.5], device=b.device) if order == 1 else torch.linalg.solve(big_r, b)
    model_t = data(x_t, t)
    corrected = contract(stacked, weights[:-1]) if stacked is not None else 0
    return base - _column(alpha_t * b_h, dims) * (corrected + weights[-1] * (model_t - last)), model_t


def multistep(data: DataFn, schedule, x: torch.Tensor, timesteps: torch.Tensor, order: int, variant: str,
              contract: Contract) -> torch.Tensor:
    """UniPC.sample, multistep with lower_order_final: the model at the first time, then one step to each next
    time (lower orders until `order` predictions are known, and for the last steps), the last without corrector."""
    steps = len(timesteps) - 1
    if steps < 1:
        return x
    t = timesteps[0].expand(x.shape[0])
    models, times = [data(x, t)], [t]
    for step in range(1, steps + 1) if order > 0 else ():  # order 0 (ComfyUI, one step): the model call alone
        t = timesteps[step].expand(x.shape[0])
        warming = step < order
        step_order = step if warming else min(order, steps + 1 - step)
        x, model_x = _update(data, schedule, x, models, times, t, step_order, variant, step < steps, contract)
        if warming:
            models, times = [*models, model_x], [*times, t]
        else:
            models, times = [*models[1:], model_x], [*times[1:], t]
    return x


_SIGMA_TIME = SigmaTime()


def comfy_unipc(denoiser: Callable, x: torch.Tensor, sigmas: torch.Tensor, variant: str = "bh1") -> torch.Tensor:
    """comfy/extra_samplers/uni_pc.py sample_unipc (variant bh1) and sample_unipc_bh2 on an eps model: x (the
    KSampler's scaled noise) to VP space, UniPC over the sigmas (a last 0 as 0.001), back from VP space."""
    times = sigmas.clone()
    if times[-1] == 0:
        times[-1] = 0.001

    def data(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:  # predict_eps_sigma, then the data prediction
        sigma = t.view(t.shape[:1] + (1,) * (x.ndim - 1))
        scaled = x * ((sigma ** 2 + 1.0) ** 0.5)
        return data_from_noise(_SIGMA_TIME, x, t, (scaled - denoiser(scaled, t)) / sigma)

    x = x / torch.sqrt(1.0 + times[0] ** 2.0)
    x = multistep(data, _SIGMA_TIME, x, times, min(3, len(times) - 2), variant, tensordot)
    return x / alpha(_SIGMA_TIME, times[-1])
