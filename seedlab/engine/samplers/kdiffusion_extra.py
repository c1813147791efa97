"""A1111's samplers that do not walk a list of sigmas step by step: DPM fast, DPM adaptive and Restart.

- DPM fast and DPM adaptive are k-diffusion 0.1.1's DPM-Solver (`DPMSolver.dpm_solver_fast` and
  `dpm_solver_adaptive`, https://arxiv.org/abs/2206.00927): they integrate in log-SNR time t = -log(sigma)
  from sigma_max down to sigma_min with first-, second- and third-order steps built from the noise prediction
  eps = (x - denoised) / sigma. DPM fast splits the span into equal steps whose orders add up to the step
  count (one model call per order); DPM adaptive picks its own step sizes, comparing a second- and a
  third-order step and growing or shrinking the next step with an integral controller, so it makes as many
  model calls as the image needs. With eta > 0 (A1111's default) both add ancestral noise after each step.
- Restart is A1111's own (modules/sd_samplers_extra.py, restart_sampler, after Xu et al. 2023): Heun steps
  down the sigmas and, from 20 steps on, back up to sigma 2 with fresh noise and down to 0.1 again, once or
  twice, on Karras sigmas of its own.

The arithmetic is k-diffusion's and A1111's term for term and in the same order, so the latents are the same
to the bit; tests/test_ksamplers.py compares them with those functions driven as A1111 drives them. This
module imports nothing from engine/samplers/kdiffusion.py, which registers these functions in its SAMPLER_FUNCTIONS.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch

from .sigmas import karras

Denoiser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
NoiseFn = Callable[[torch.Tensor | None, torch.Tensor | None], torch.Tensor]

# DPM adaptive's settings: k-diffusion's defaults, which A1111 and ComfyUI's KSampler leave as they are.
ADAPTIVE_RTOL, ADAPTIVE_ATOL, ADAPTIVE_H_INIT, ADAPTIVE_ACCEPT_SAFETY = 0.05, 0.0078, 0.05, 0.81
ADAPTIVE_CALLS_PER_STEP = 3  # a third-order step with its second-order twin: three model calls, tried or taken


class TooManyCalls(ValueError):
    """DPM adaptive needed more model calls than it was allowed (its bound, which the compute budget priced)."""


def _t(sigma):  # log-SNR time
    return sigma.log().neg()


def _sigma(t):
    return t.neg().exp()


def _ancestral(sigma_from, sigma_to, eta: float):
    """k-diffusion's get_ancestral_step (as kdiffusion.ancestral_step): (sigma_down, sigma_up)."""
    sigma_up = min(sigma_to, eta * (sigma_to ** 2 * (sigma_from ** 2 - sigma_to ** 2) / sigma_from ** 2) ** 0.5)
    return (sigma_to ** 2 - sigma_up ** 2) ** 0.5, sigma_up


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
    return _t(torch.as_tensor(sigma_max)), _t(torch.as_tensor(sigma_min))


class _Eps:
    """The model as a noise prediction at log-SNR time t: eps = (x - denoised) / sigma. Counts its calls."""

    def __init__(self, model: Denoiser, x: torch.Tensor):
        self.model, self.ones, self.calls = model, x.new_ones([x.shape[0]]), 0

    def __call__(self, x, t):
        self.calls += 1
        return (x - self.model(x, _sigma(t) * self.ones)) / _sigma(t)


def _first_order(x, t, t_next, eps):
    return x - _sigma(t_next) * (t_next - t).expm1() * eps


def _second_order(x, t, t_next, eps, eps_1, r1):
    """DPM-Solver-2's update, given eps at t and eps_1 at t + r1 * h."""
    h = t_next - t
    return x - _sigma(t_next) * h.expm1() * eps - _sigma(t_next) / (2 * r1) * h.expm1() * (eps_1 - eps)


def _midpoint(x, t, h, eps, r):
    """(s, u): the time r of the way along h, and x carried there by a first-order step."""
    s = t + r * h
    return s, x - _sigma(s) * (r * h).expm1() * eps


def _third_order(model: _Eps, x, t, t_next, eps, r1=1 / 3, r2=2 / 3):
    """DPM-Solver-3: (its update, and eps at t + r1 * h, from which the second-order twin is made)."""
    h = t_next - t
    s1, u1 = _midpoint(x, t, h, eps, r1)
    eps_1 = model(u1, s1)
    s2 = t + r2 * h
    u2 = x - _sigma(s2) * (r2 * h).expm1() * eps - _sigma(s2) * (r2 / r1) * ((r2 * h).expm1() / (r2 * h) - 1) * (
        eps_1 - eps)
    eps_2 = model(u2, s2)
    return x - _sigma(t_next) * h.expm1() * eps - _sigma(t_next) / r2 * (h.expm1() / h - 1) * (eps_2 - eps), eps_1


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
    sigma_down = _ancestral(_sigma(t), _sigma(t_next), eta)[0]
    target = torch.minimum(t_end, _t(sigma_down))
    return target, (_sigma(t_next) ** 2 - _sigma(target) ** 2) ** 0.5


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
            x = x + sigma_up * s_noise * noise(_sigma(t), _sigma(t_next))
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
                               f"sigma {_sigma(s).item():.4g} of {_sigma(t_end).item():.4g}), more than SeedLab "
                               "allows it: choose DPM fast or another sampler")
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
                x = x + sigma_up * s_noise * noise(_sigma(s), _sigma(t))
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
