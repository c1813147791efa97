"""The k-diffusion samplers that A1111 and ComfyUI run, written for SeedLab.

Each sampler takes a denoiser `model(x, sigma) -> denoised` (the prediction of the clean latents,
classifier-free guidance already applied), the starting latents `x` (already scaled to the first
sigma), a float32 list of sigmas ending in 0, and `noise(sigma, sigma_next) -> tensor`, the source
of every random draw after the starting noise (A1111 and ComfyUI decide what that source is: the
image's generator, a generator seeded with seed + ENSD, or a Brownian tree).

The arithmetic follows k-diffusion 0.1.1 (crowsonkb/k-diffusion, `k_diffusion/sampling.py`) term
for term and in the same order, so that the result is the same to the bit; tests/test_ksamplers.py
compares every sampler with k-diffusion's own function driven the way A1111 drives it.

DPM fast and DPM adaptive, k-diffusion's DPM-Solver (`DPMSolver.dpm_solver_fast` and `dpm_solver_adaptive`,
https://arxiv.org/abs/2206.00927), do not walk the sigmas step by step: they integrate in log-SNR time
t = -log(sigma) from sigma_max down to sigma_min with first-, second- and third-order steps built from the noise
prediction eps = (x - denoised) / sigma. DPM fast splits the span into equal steps whose orders add up to the step
count (one model call per order); DPM adaptive picks its own step sizes, comparing a second- and a third-order step
and growing or shrinking the next with an integral controller, so it makes as many model calls as the image needs.
With eta > 0 (A1111's default) both add ancestral noise after each step. Restart is A1111's own
(modules/sd_samplers_extra.py, restart_sampler, after Xu et al. 2023): Heun steps down the sigmas and, from 20
steps on, back up to sigma 2 with fresh noise and down to 0.1 again, once or twice, on Karras sigmas of its own.

The helpers every family's samplers share (ComfyUI's, CFG++, multistep) are public here: `to_d`, `ancestral_step`,
`sigma_to_t` and `t_to_sigma`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch

from .. import cpu
from .names import CHURNING
from .sigmas import karras

Denoiser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
NoiseFn = Callable[[torch.Tensor | None, torch.Tensor | None], torch.Tensor]


def to_d(x: torch.Tensor, sigma: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
    """The ODE's derivative dx/dsigma at (x, sigma)."""
    return (x - denoised) / sigma


def ancestral_step(sigma_from, sigma_to, eta: float = 1.0):
    """(sigma_down, sigma_up): the level to step down to and the noise to add back to reach sigma_to."""
    if not eta:
        return sigma_to, 0.0
    sigma_up = min(sigma_to, eta * (sigma_to ** 2 * (sigma_from ** 2 - sigma_to ** 2) / sigma_from ** 2) ** 0.5)
    return (sigma_to ** 2 - sigma_up ** 2) ** 0.5, sigma_up


def sigma_to_t(sigma):
    """Log-SNR time: t = -log(sigma)."""
    return sigma.log().neg()


def t_to_sigma(t):
    """The sigma of log-SNR time t: exp(-t)."""
    return t.neg().exp()


def expm1(h: torch.Tensor) -> torch.Tensor:
    """exp(h) - 1. torch's float32 expm1 rounds by the CPU's build (AVX2 and scalar kernels differ, even for one
    value), so under the universal baseline it is computed in float64 and rounded once."""
    return h.double().expm1().to(h.dtype) if cpu.is_universal() else h.expm1()


def lerp(start: torch.Tensor, end: torch.Tensor, weight) -> torch.Tensor:
    """torch.lerp, whose float32 multiply-add an AVX2 build fuses and others do not: in float64 and rounded once
    under the universal baseline."""
    if not cpu.is_universal():
        return torch.lerp(start, end, weight)
    weight = weight.double() if isinstance(weight, torch.Tensor) else weight
    return torch.lerp(start.double(), end.double(), weight).to(start.dtype)


def _churned(x, sigmas, i, noise: NoiseFn, churn: dict):
    """Karras et al.'s churn: raise the noise level of step i by gamma. Draws every step, as k-diffusion does."""
    inside = churn["s_tmin"] <= sigmas[i] <= churn["s_tmax"]
    gamma = min(churn["s_churn"] / (len(sigmas) - 1), 2 ** 0.5 - 1) if inside else 0.0
    eps = noise(None, None) * churn["s_noise"]
    sigma_hat = sigmas[i] * (gamma + 1)
    if gamma > 0:
        x = x + eps * (sigma_hat ** 2 - sigmas[i] ** 2) ** 0.5
    return x, sigma_hat


def euler(model: Denoiser, x, sigmas, noise: NoiseFn, **churn):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        x, sigma_hat = _churned(x, sigmas, i, noise, churn)
        d = to_d(x, sigma_hat, model(x, sigma_hat * ones))
        x = x + d * (sigmas[i + 1] - sigma_hat)
    return x


def heun(model: Denoiser, x, sigmas, noise: NoiseFn, **churn):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        x, sigma_hat = _churned(x, sigmas, i, noise, churn)
        d = to_d(x, sigma_hat, model(x, sigma_hat * ones))
        dt = sigmas[i + 1] - sigma_hat
        if sigmas[i + 1] == 0:
            x = x + d * dt
            continue
        x_2 = x + d * dt
        d_2 = to_d(x_2, sigmas[i + 1], model(x_2, sigmas[i + 1] * ones))
        x = x + (d + d_2) / 2 * dt
    return x


def dpm_2(model: Denoiser, x, sigmas, noise: NoiseFn, **churn):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        x, sigma_hat = _churned(x, sigmas, i, noise, churn)
        d = to_d(x, sigma_hat, model(x, sigma_hat * ones))
        if sigmas[i + 1] == 0:
            x = x + d * (sigmas[i + 1] - sigma_hat)
            continue
        x = _dpm_2_step(model, x, d, sigma_hat, sigmas[i + 1], ones)
    return x


def _dpm_2_step(model: Denoiser, x, d, sigma, sigma_to, ones):
    """DPM-Solver-2: the derivative at the midpoint in log sigma carries x from sigma to sigma_to."""
    sigma_mid = lerp(sigma.log(), sigma_to.log(), 0.5).exp()
    x_2 = x + d * (sigma_mid - sigma)
    d_2 = to_d(x_2, sigma_mid, model(x_2, sigma_mid * ones))
    return x + d_2 * (sigma_to - sigma)


def euler_ancestral(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        sigma_down, sigma_up = ancestral_step(sigmas[i], sigmas[i + 1], eta)
        x = x + to_d(x, sigmas[i], denoised) * (sigma_down - sigmas[i])
        if sigmas[i + 1] > 0:
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def dpm_2_ancestral(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        sigma_down, sigma_up = ancestral_step(sigmas[i], sigmas[i + 1], eta)
        d = to_d(x, sigmas[i], denoised)
        if sigma_down == 0:
            x = x + d * (sigma_down - sigmas[i])
        else:
            x = _dpm_2_step(model, x, d, sigmas[i], sigma_down, ones)
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def lms(model: Denoiser, x, sigmas, noise: NoiseFn, order: int = 4):
    """Linear multistep: up to `order` past derivatives, weighted by integrals of Lagrange polynomials."""
    ones = x.new_ones([x.shape[0]])
    levels = sigmas.detach().cpu().numpy()
    derivatives: list[torch.Tensor] = []
    for i in range(len(sigmas) - 1):
        derivatives = [*derivatives, to_d(x, sigmas[i], model(x, sigmas[i] * ones))][-order:]
        current = min(i + 1, order)
        weights = [lms_weight(current, levels, i, j) for j in range(current)]
        x = x + sum(weight * d for weight, d in zip(weights, reversed(derivatives)))
    return x


def lms_weight(order: int, levels, i: int, j: int) -> float:
    from scipy import integrate  # imported when used: scipy is heavy

    def lagrange(tau: float) -> float:
        product = 1.0
        for k in range(order):
            if k != j:
                product *= (tau - levels[i - k]) / (levels[i - j] - levels[i - k])
        return product

    return integrate.quad(lagrange, levels[i], levels[i + 1], epsrel=1e-4)[0]


def dpmpp_2s_ancestral(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        sigma_down, sigma_up = ancestral_step(sigmas[i], sigmas[i + 1], eta)
        if sigma_down == 0:
            x = x + to_d(x, sigmas[i], denoised) * (sigma_down - sigmas[i])
        else:
            t, t_next = sigma_to_t(sigmas[i]), sigma_to_t(sigma_down)
            h = t_next - t
            s = t + 1 / 2 * h
            x_2 = (t_to_sigma(s) / t_to_sigma(t)) * x - expm1(-h * (1 / 2)) * denoised
            denoised_2 = model(x_2, t_to_sigma(s) * ones)
            x = (t_to_sigma(t_next) / t_to_sigma(t)) * x - expm1(-h) * denoised_2
        if sigmas[i + 1] > 0:
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def dpmpp_sde(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0, r: float = 1 / 2):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = x + to_d(x, sigmas[i], denoised) * (sigmas[i + 1] - sigmas[i])
            continue
        t, t_next = sigma_to_t(sigmas[i]), sigma_to_t(sigmas[i + 1])
        h = t_next - t
        s = t + h * r
        down, up = ancestral_step(t_to_sigma(t), t_to_sigma(s), eta)
        s_ = sigma_to_t(down)
        x_2 = (t_to_sigma(s_) / t_to_sigma(t)) * x - expm1(t - s_) * denoised
        x_2 = x_2 + noise(t_to_sigma(t), t_to_sigma(s)) * s_noise * up
        denoised_2 = model(x_2, t_to_sigma(s) * ones)
        down, up = ancestral_step(t_to_sigma(t), t_to_sigma(t_next), eta)
        t_next_ = sigma_to_t(down)
        mixed = (1 - 1 / (2 * r)) * denoised + 1 / (2 * r) * denoised_2
        x = (t_to_sigma(t_next_) / t_to_sigma(t)) * x - expm1(t - t_next_) * mixed
        x = x + noise(t_to_sigma(t), t_to_sigma(t_next)) * s_noise * up
    return x


def dpmpp_2m(model: Denoiser, x, sigmas, noise: NoiseFn):
    ones = x.new_ones([x.shape[0]])
    previous = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        t, t_next = sigma_to_t(sigmas[i]), sigma_to_t(sigmas[i + 1])
        h = t_next - t
        if previous is not None and sigmas[i + 1] != 0:
            r = (t - sigma_to_t(sigmas[i - 1])) / h
            target = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * previous
        else:
            target = denoised
        x = (t_to_sigma(t_next) / t_to_sigma(t)) * x - expm1(-h) * target
        previous = denoised
    return x


def dpmpp_2m_sde(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0,
                 solver_type: str = "midpoint"):
    ones = x.new_ones([x.shape[0]])
    previous = h_last = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            h = -sigmas[i + 1].log() - -sigmas[i].log()
            eta_h = eta * h
            x = sigmas[i + 1] / sigmas[i] * (-eta_h).exp() * x + expm1(-h - eta_h).neg() * denoised
            if previous is not None:
                r = h_last / h
                if solver_type == "heun":
                    x = x + (expm1(-h - eta_h).neg() / (-h - eta_h) + 1) * (1 / r) * (denoised - previous)
                else:
                    x = x + 0.5 * expm1(-h - eta_h).neg() * (1 / r) * (denoised - previous)
            if eta:
                x = x + noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * expm1(-2 * eta_h).neg().sqrt() * s_noise
        previous, h_last = denoised, h if sigmas[i + 1] != 0 else h_last
    return x


def dpmpp_3m_sde(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    ones = x.new_ones([x.shape[0]])
    denoised_1 = denoised_2 = h_1 = h_2 = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            h = -sigmas[i + 1].log() - -sigmas[i].log()
            h_eta = h * (eta + 1)
            x = torch.exp(-h_eta) * x + expm1(-h_eta).neg() * denoised
            if h_2 is not None:
                r0, r1 = h_1 / h, h_2 / h
                d1_0, d1_1 = (denoised - denoised_1) / r0, (denoised_1 - denoised_2) / r1
                d1 = d1_0 + (d1_0 - d1_1) * r0 / (r0 + r1)
                d2 = (d1_0 - d1_1) / (r0 + r1)
                phi_2 = expm1(h_eta.neg()) / h_eta + 1
                x = x + phi_2 * d1 - (phi_2 / h_eta - 0.5) * d2
            elif h_1 is not None:
                phi_2 = expm1(h_eta.neg()) / h_eta + 1
                x = x + phi_2 * ((denoised - denoised_1) / (h_1 / h))
            if eta:
                x = x + noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * expm1(-2 * h * eta).neg().sqrt() * s_noise
            h_1, h_2 = h, h_1
        denoised_1, denoised_2 = denoised, denoised_1
    return x


# DPM adaptive's settings: k-diffusion's defaults, which A1111 and ComfyUI's KSampler leave as they are.
ADAPTIVE_RTOL, ADAPTIVE_ATOL, ADAPTIVE_H_INIT, ADAPTIVE_ACCEPT_SAFETY = 0.05, 0.0078, 0.05, 0.81
ADAPTIVE_CALLS_PER_STEP = 3  # a third-order step with its second-order twin: three model calls, tried or taken


class TooManyCalls(ValueError):
    """DPM adaptive needed more model calls than it was allowed (its bound, which the compute budget priced)."""


def _span(sigmas, sigma_min, sigma_max):
    """The log-SNR times to integrate between: sigma_max (sigmas[0]) down to sigma_min (the last sigma above 0).

    A1111's txt2img passes the model's own extremes as floats; its hires pass and ComfyUI the schedule's ends.
    """
    if sigma_min is None:
        sigma_min = sigmas[-1] if sigmas[-1] != 0 else sigmas[-2]
    if sigma_max is None:
        sigma_max = sigmas[0]
    if sigma_min <= 0 or sigma_max <= 0:
        raise ValueError("DPM fast and DPM adaptive need sigma_min and sigma_max above 0")
    return sigma_to_t(torch.as_tensor(sigma_max)), sigma_to_t(torch.as_tensor(sigma_min))


class _Eps:
    """The model as a noise prediction at log-SNR time t: eps = (x - denoised) / sigma. Counts its calls."""

    def __init__(self, model: Denoiser, x: torch.Tensor):
        self.model, self.ones, self.calls = model, x.new_ones([x.shape[0]]), 0

    def __call__(self, x, t):
        self.calls += 1
        return (x - self.model(x, t_to_sigma(t) * self.ones)) / t_to_sigma(t)


def _first_order(x, t, t_next, eps):
    return x - t_to_sigma(t_next) * expm1(t_next - t) * eps


def _second_order(x, t, t_next, eps, eps_1, r1):
    """DPM-Solver-2's update, given eps at t and eps_1 at t + r1 * h."""
    h = t_next - t
    return x - t_to_sigma(t_next) * expm1(h) * eps - t_to_sigma(t_next) / (2 * r1) * expm1(h) * (eps_1 - eps)


def _midpoint(x, t, h, eps, r):
    """(s, u): the time r of the way along h, and x carried there by a first-order step."""
    s = t + r * h
    return s, x - t_to_sigma(s) * expm1(r * h) * eps


def _third_order(model: _Eps, x, t, t_next, eps, r1=1 / 3, r2=2 / 3):
    """DPM-Solver-3: (its update, and eps at t + r1 * h, from which the second-order twin is made)."""
    h = t_next - t
    s1, u1 = _midpoint(x, t, h, eps, r1)
    eps_1 = model(u1, s1)
    s2 = t + r2 * h
    u2 = x - t_to_sigma(s2) * expm1(r2 * h) * eps - t_to_sigma(s2) * (r2 / r1) * (
        expm1(r2 * h) / (r2 * h) - 1) * (eps_1 - eps)
    eps_2 = model(u2, s2)
    high = x - t_to_sigma(t_next) * expm1(h) * eps - t_to_sigma(t_next) / r2 * (expm1(h) / h - 1) * (eps_2 - eps)
    return high, eps_1


def _step(model: _Eps, x, t, t_next, order: int):
    """One DPM-Solver step of order 1, 2 or 3: that many model calls."""
    eps = model(x, t)
    if order == 1:
        return _first_order(x, t, t_next, eps)
    if order == 2:
        s1, u1 = _midpoint(x, t, t_next - t, eps, 1 / 2)
        return _second_order(x, t, t_next, eps, model(u1, s1), 1 / 2)
    return _third_order(model, x, t, t_next, eps)[0]


def _ancestral_target(t, t_next, t_end, eta: float):
    """With eta: the time a step really goes to (below sigma_next) and the noise that brings it back up."""
    sigma_down = ancestral_step(t_to_sigma(t), t_to_sigma(t_next), eta)[0]
    target = torch.minimum(t_end, sigma_to_t(sigma_down))
    return target, (t_to_sigma(t_next) ** 2 - t_to_sigma(target) ** 2) ** 0.5


def dpm_fast(model: Denoiser, x, sigmas, noise: NoiseFn, sigma_min=None, sigma_max=None, eta: float = 0.0,
             s_noise: float = 1.0):
    """DPM-Solver-Fast: len(sigmas) - 1 model calls, in equal log-SNR steps of order 3 and a last one or two lower."""
    calls = len(sigmas) - 1
    t_start, t_end = _span(sigmas, sigma_min, sigma_max)
    if eta and not t_end > t_start:
        raise ValueError("DPM fast with eta above 0 needs sigma_max above sigma_min (a pass of one hires step has "
                         "none; A1111 stops there too): give it more steps, or eta 0")
    count = calls // 3 + 1
    times = torch.linspace(t_start, t_end, count + 1, device=x.device)
    orders = [3] * (count - 2) + [2, 1] if calls % 3 == 0 else [3] * (count - 1) + [calls % 3]
    eps = _Eps(model, x)
    for i, order in enumerate(orders):
        t, t_next = times[i], times[i + 1]
        target, sigma_up = _ancestral_target(t, t_next, t_end, eta) if eta else (t_next, 0.0)
        x = _step(eps, x, t, target, order)
        if eta:  # k-diffusion draws here at eta 0 too, and adds the draw times 0: nothing to add
            x = x + sigma_up * s_noise * noise(t_to_sigma(t), t_to_sigma(t_next))
    return x


# Long: one loop that tries a step, measures its error, and takes or retries it, as dpm_solver_adaptive does
def dpm_adaptive(model: Denoiser, x, sigmas, noise: NoiseFn, sigma_min=None, sigma_max=None, eta: float = 0.0,
                 s_noise: float = 1.0, max_calls: int | None = None):
    """DPM-Solver-23 with adaptive steps: as many model calls as the image needs; TooManyCalls past max_calls.

    Each try makes a second- and a third-order step (three calls); the step is taken when the scaled
    difference between them is small enough, and the next step size follows from that error (k-diffusion's
    PIDStepSizeController with only its integral term, which is what its defaults leave).
    """
    t_start, t_end = _span(sigmas, sigma_min, sigma_max)
    forward = t_end > t_start
    if eta and not forward:
        raise ValueError("DPM adaptive cannot add noise (eta) when sampling towards more noise")
    h = abs(ADAPTIVE_H_INIT) * (1 if forward else -1)
    atol, rtol = torch.tensor(ADAPTIVE_ATOL), torch.tensor(ADAPTIVE_RTOL)
    exponent = (0.0 + 1.0 + 0.0) / (1.5 if eta else 3)  # the controller's integral coefficient over the order
    eps = _Eps(model, x)
    s, x_prev = t_start, x
    while s < t_end - 1e-5 if forward else s > t_end + 1e-5:
        if max_calls is not None and eps.calls + ADAPTIVE_CALLS_PER_STEP > max_calls:
            raise TooManyCalls(f"DPM adaptive needs more than {max_calls} model calls for this image (it stopped at "
                               f"sigma {t_to_sigma(s).item():.4g} of {t_to_sigma(t_end).item():.4g}), more than "
                               "SeedLab allows it: choose DPM fast or another sampler")
        t = torch.minimum(t_end, s + h) if forward else torch.maximum(t_end, s + h)
        target, sigma_up = _ancestral_target(s, t, t_end, eta) if eta else (t, 0.0)
        eps_s = eps(x, s)
        x_high, eps_1 = _third_order(eps, x, s, target, eps_s)
        x_low = _second_order(x, s, target, eps_s, eps_1, 1 / 3)
        delta = torch.maximum(atol, rtol * torch.maximum(x_low.abs(), x_prev.abs()))
        error = torch.linalg.norm((x_low - x_high) / delta) / x.numel() ** 0.5
        factor = 1 + math.atan((1 / (float(error) + 1e-8)) ** exponent - 1)
        h *= factor
        if factor >= ADAPTIVE_ACCEPT_SAFETY:
            x_prev = x_low
            x = x_high
            if eta:
                x = x + sigma_up * s_noise * noise(t_to_sigma(s), t_to_sigma(t))
            s = t
    return x


# Long: A1111's restart plan (which segments to run again) and its walk, kept together as in restart_sampler
def restart(model: Denoiser, x, sigmas, noise: NoiseFn, s_noise: float = 1.0):
    """A1111's Restart: Heun steps; from 20 steps on, Karras sigmas of its own with restart segments.

    With n >= 20 steps it walks n - k * times Karras sigmas between the given ends (k = 9 restart steps
    once, or n // 4 twice from 36 steps), and at the sigma nearest 0.1 jumps back up to the one nearest 2
    (noise added to reach it) and steps down again in k steps, `times` times. Below 20 steps: plain Heun
    steps on the given sigmas. Two model calls a step but the last.
    """
    ones = x.new_ones([x.shape[0]])
    steps = len(sigmas) - 1
    plan = {}
    if steps >= 20:
        restart_steps, times = (steps // 4, 2) if steps >= 36 else (9, 1)
        sigmas = karras(steps - restart_steps * times, sigmas[-2].item(), sigmas[0].item()).to(sigmas.device)
        plan = {0.1: (restart_steps + 1, times, 2)}
    plan = {int(torch.argmin(abs(sigmas - level), dim=0)): value for level, value in plan.items()}

    pairs = []
    for i in range(len(sigmas) - 1):
        pairs.append((sigmas[i], sigmas[i + 1]))
        if i + 1 in plan:
            restart_steps, times, restart_max = plan[i + 1]
            low, high = i + 1, int(torch.argmin(abs(sigmas - restart_max), dim=0))
            if high < low:
                again = karras(restart_steps, sigmas[low].item(), sigmas[high].item()).to(sigmas.device)[:-1]
                pairs += list(itertools.pairwise(again)) * times

    last = None
    for sigma, sigma_next in pairs:
        if last is not None and last < sigma:  # back up: fresh noise to the higher level
            x = x + noise(last, sigma) * s_noise * (sigma ** 2 - last ** 2) ** 0.5
        d = (x - model(x, sigma * ones)) / sigma
        dt = sigma_next - sigma
        if sigma_next == 0:
            x = x + d * dt
        else:
            x_2 = x + d * dt
            d_2 = (x_2 - model(x_2, sigma_next * ones)) / sigma_next
            x = x + (d + d_2) / 2 * dt
        last = sigma_next
    return x


SAMPLER_FUNCTIONS = {
    "euler": euler, "euler_ancestral": euler_ancestral, "heun": heun, "dpm_2": dpm_2,
    "dpm_2_ancestral": dpm_2_ancestral, "lms": lms, "dpmpp_2s_ancestral": dpmpp_2s_ancestral,
    "dpmpp_sde": dpmpp_sde, "dpmpp_2m": dpmpp_2m, "dpmpp_2m_sde": dpmpp_2m_sde, "dpmpp_3m_sde": dpmpp_3m_sde,
    "dpm_fast": dpm_fast, "dpm_adaptive": dpm_adaptive, "restart": restart,
}
# The options A1111 passes (Sampler.initialize: eta where the function takes one, sampler_extra_params); the others
# keep their defaults (Restart's s_noise 1), whatever the recipe says.
TAKES_ETA = frozenset({"euler_ancestral", "dpm_2_ancestral", "dpmpp_2s_ancestral", "dpmpp_sde", "dpmpp_2m_sde",
                       "dpmpp_3m_sde", "dpm_fast", "dpm_adaptive"})
TAKES_CHURN = frozenset(CHURNING)  # churn draws a latent every step (names.consumes_step_noise)
TAKES_S_NOISE = TAKES_CHURN | {"dpm_2_ancestral", "dpmpp_2s_ancestral", "dpmpp_sde", "dpmpp_2m_sde", "dpmpp_3m_sde",
                               "dpm_fast"}
# Samplers that integrate between two sigmas (sigma_min, sigma_max) instead of stepping through the schedule's.
TAKES_SPAN = frozenset({"dpm_fast", "dpm_adaptive"})
