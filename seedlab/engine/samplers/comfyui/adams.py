"""ComfyUI's DEIS and SA-Solver (comfy/k_diffusion/deis.py, sa_solver.py and sampling.py, October 2025): multistep
samplers whose weights are integrals of the Lagrange polynomials through earlier steps (Adams' method).

DEIS integrates in a VP time of its own by a 10,000-point sum, with numpy's float32 log and autograd's derivative as
ComfyUI computes them; SA-Solver solves a Vandermonde system per step and adds noise only between 20% and 80% of
the model's sigma range. Terms follow ComfyUI's order, so the latents are the same to the bit.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import kdiffusion
from ..kdiffusion import Denoiser, NoiseFn


def _numpy_log(value: torch.Tensor) -> torch.Tensor:
    """numpy's float32 log, which deis.edm2t applies to torch tensors: it can differ from torch.log in the last bit."""
    return torch.from_numpy(np.asarray(np.log(value.numpy())))


def _vp_times(sigmas: torch.Tensor, epsilon: float = 1e-3, sigma_min: float = 0.002, sigma_max: int = 80):
    """deis.edm2t: the sigmas as times of a VP schedule through EDM's sigma range, with its beta_0 and beta_1.
    sigma_max is ComfyUI's integer 80: its log is taken in float64, which makes both betas float64."""
    log_min, log_max = _numpy_log(torch.tensor(sigma_min) ** 2 + 1), _numpy_log(torch.tensor(sigma_max) ** 2 + 1)
    beta_d = 2 * (log_min / epsilon - log_max) / (epsilon - 1)
    beta_min = log_max - 0.5 * beta_d
    times = ((beta_min ** 2 + 2 * beta_d * (sigmas.detach().cpu() ** 2 + 1).log()).sqrt() - beta_min) / beta_d
    return times, beta_min, beta_d + beta_min


def _integrand(beta_0, beta_1, taus: torch.Tensor) -> torch.Tensor:
    """deis.cal_intergrand: -1/2 d log(alpha)/d tau / sqrt(alpha (1 - alpha)), the derivative taken by autograd."""
    with torch.inference_mode(mode=False):  # autograd inside a sampler run under inference mode
        taus, beta_0, beta_1 = taus.clone(), beta_0.clone(), beta_1.clone()
        with torch.enable_grad():
            taus.requires_grad_(True)
            alpha = torch.exp(-0.5 * taus ** 2 * (beta_1 - beta_0) - taus * beta_0)
            alpha.log().sum().backward()
    return -0.5 * taus.grad / torch.sqrt(alpha * (1 - alpha))


def deis_weights(sigmas: torch.Tensor, max_order: int = 3, points: int = 10000) -> list[list[torch.Tensor]]:
    """deis.get_deis_coeff_list("tab"): per step, the weights of d and the stored derivatives (none at order 1)."""
    times, beta_0, beta_1 = _vp_times(sigmas)
    weights = []
    for i, (t, t_next) in enumerate(zip(times[:-1], times[1:])):
        order = min(i + 1, max_order)
        if order == 1:
            weights.append([])
            continue
        taus = torch.linspace(t, t_next, points)
        integrand, nodes = _integrand(beta_0, beta_1, taus), times[[i - k for k in range(order)]]
        row = []
        for j in range(order):
            lagrange = 1
            for k in range(order):
                if k != j:
                    lagrange *= (taus - nodes[k]) / (nodes[j] - nodes[k])
            row.append(torch.sum(integrand * lagrange) * ((t_next - t) / points))
        weights.append(row)
    return weights


def deis(model: Denoiser, x, sigmas, noise: NoiseFn, max_order: int = 3):
    """sample_deis (deis_mode "tab"); the last step to sigma 0 is Euler's."""
    ones, derivatives = x.new_ones([x.shape[0]]), []
    weights = deis_weights(sigmas, max_order)
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        d = (x - denoised) / sigmas[i]
        order = 1 if sigmas[i + 1] <= 0 else min(max_order, i + 1)
        if order == 1:
            x_next = x + (sigmas[i + 1] - sigmas[i]) * d
        else:
            x_next = x + weights[i][0] * d
            for k in range(1, order):
                x_next = x_next + weights[i][k] * derivatives[-k]
        x, derivatives = x_next, [*derivatives, d][-(max_order - 1):]
    return x


def _exponential_integrals(s, t, order: int, tau: float) -> torch.Tensor:
    """sa_solver.compute_exponential_coeffs: (1 + tau^2) times the integrals of exp((1 + tau^2) u) u^p from s to t,
    p < order, with exp((1 + tau^2) t) factored out, by the recursion of integration by parts."""
    tau_mul = 1 + tau ** 2
    p = torch.arange(order, dtype=s.dtype, device=s.device)
    ends = t ** p - s ** p * (-tau_mul * (t - s)).exp()
    depth = p.unsqueeze(1) - p.unsqueeze(0)
    log_factorial = (p + 1).lgamma()
    recursion = log_factorial.unsqueeze(1) - log_factorial.unsqueeze(0)
    if tau > 0:
        recursion = recursion - (depth * math.log(tau_mul))
    recursion = (recursion.exp() * torch.where(depth % 2 == 0, 1.0, -1.0)).tril()
    return recursion @ ends


def _b_weights(sigma_next, nodes: torch.Tensor, lambda_s, lambda_t, tau: float) -> torch.Tensor:
    """sa_solver.compute_stochastic_adams_b_coeffs (not simple order 2): alpha_t times the integrals of the
    Lagrange polynomials through `nodes`, solved from the Vandermonde system."""
    integrals = _exponential_integrals(lambda_s, lambda_t, nodes.shape[0], tau)
    lagrange = torch.linalg.solve(torch.vander(nodes, nodes.shape[0], increasing=True).T, integrals)
    return sigma_next * lambda_t.exp() * lagrange


def _weighted(predictions: list, order: int, weights: torch.Tensor) -> torch.Tensor:
    """The last `order` predictions (batch, order, ...) contracted with their weights, as ComfyUI's tensordot."""
    return torch.tensordot(torch.stack(predictions[-order:], dim=1), weights, dims=([1], [0]))


def _tau(sigma, start: float, end: float) -> float:
    """get_tau_interval_func(start, end, eta=1): noise (tau 1) only for sigmas in [end, start]."""
    return 1.0 if start >= sigma.item() >= end else 0.0


def sa_solver(model: Denoiser, x, sigmas, noise: NoiseFn, interval: tuple[float, float], use_pece: bool = False,
              s_noise: float = 1.0, predictor_order: int = 3, corrector_order: int = 4):
    """sample_sa_solver (and _pece) as of October 2025: `interval` is the model's sigmas at 20% and 80%
    (percent_to_sigma); it returns the last corrected state, the denoised latents when the schedule ends at 0."""
    if len(sigmas) <= 1:
        return x
    ones, lambdas = x.new_ones([x.shape[0]]), kdiffusion.sigma_to_t(sigmas)
    x_pred, h, tau, drawn, predictions = x, 0.0, 0.0, 0.0, []
    lower_to_end = sigmas[-1].item() == 0
    for i in range(len(sigmas) - 1):
        denoised = model(x_pred, sigmas[i] * ones)
        predictions = [*predictions, denoised][-max(predictor_order, corrector_order):]
        p_order = min(predictor_order, len(predictions))
        c_order = 0 if i == 0 or (sigmas[i + 1] == 0 and not use_pece) else min(corrector_order, len(predictions))
        if lower_to_end:
            p_order, c_order = min(p_order, len(sigmas) - 2 - i), min(c_order, len(sigmas) - 1 - i)
        if c_order == 0:
            x = x_pred
        else:
            weights = _b_weights(sigmas[i], lambdas[i - c_order + 1:i + 1], lambdas[i - 1], lambdas[i], tau)
            x = sigmas[i] / sigmas[i - 1] * (-(tau ** 2) * h).exp() * x + _weighted(predictions, c_order, weights)
            if tau > 0 and s_noise > 0:
                x = x + drawn  # the previous predictor's noise
            if use_pece:
                denoised = model(x, sigmas[i] * ones)
                predictions[-1] = denoised
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        tau = _tau(sigmas[i + 1], *interval)
        weights = _b_weights(sigmas[i + 1], lambdas[i - p_order + 1:i + 1], lambdas[i], lambdas[i + 1], tau)
        h = lambdas[i + 1] - lambdas[i]
        x_pred = sigmas[i + 1] / sigmas[i] * (-(tau ** 2) * h).exp() * x + _weighted(predictions, p_order, weights)
        if tau > 0 and s_noise > 0:
            drawn = (noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1]
                     * kdiffusion.expm1(-2 * tau ** 2 * h).neg().sqrt() * s_noise)
            x_pred = x_pred + drawn
    return x
