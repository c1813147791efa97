"""The k-diffusion samplers that A1111 and ComfyUI run, written for SeedLab.

Each sampler takes a denoiser `model(x, sigma) -> denoised` (the prediction of the clean latents,
classifier-free guidance already applied), the starting latents `x` (already scaled to the first
sigma), a float32 list of sigmas ending in 0, and `noise(sigma, sigma_next) -> tensor`, the source
of every random draw after the starting noise (A1111 and ComfyUI decide what that source is: the
image's generator, a generator seeded with seed + ENSD, or a Brownian tree).

The arithmetic follows k-diffusion 0.1.1 (crowsonkb/k-diffusion, `k_diffusion/sampling.py`) term
for term and in the same order, so that the result is the same to the bit; tests/test_ksamplers.py
compares every sampler with k-diffusion's own function driven the way A1111 drives it. DPM fast, DPM
adaptive and A1111's Restart live in engine/samplers/kdiffusion_extra.py and are registered here with the others.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .kdiffusion_extra import dpm_adaptive, dpm_fast, restart

Denoiser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
NoiseFn = Callable[[torch.Tensor | None, torch.Tensor | None], torch.Tensor]


def _d(x: torch.Tensor, sigma: torch.Tensor, denoised: torch.Tensor) -> torch.Tensor:
    """The ODE's derivative dx/dsigma at (x, sigma)."""
    return (x - denoised) / sigma


def ancestral_step(sigma_from, sigma_to, eta: float = 1.0):
    """(sigma_down, sigma_up): the level to step down to and the noise to add back to reach sigma_to."""
    if not eta:
        return sigma_to, 0.0
    sigma_up = min(sigma_to, eta * (sigma_to ** 2 * (sigma_from ** 2 - sigma_to ** 2) / sigma_from ** 2) ** 0.5)
    return (sigma_to ** 2 - sigma_up ** 2) ** 0.5, sigma_up


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
        d = _d(x, sigma_hat, model(x, sigma_hat * ones))
        x = x + d * (sigmas[i + 1] - sigma_hat)
    return x


def heun(model: Denoiser, x, sigmas, noise: NoiseFn, **churn):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        x, sigma_hat = _churned(x, sigmas, i, noise, churn)
        d = _d(x, sigma_hat, model(x, sigma_hat * ones))
        dt = sigmas[i + 1] - sigma_hat
        if sigmas[i + 1] == 0:
            x = x + d * dt
            continue
        x_2 = x + d * dt
        d_2 = _d(x_2, sigmas[i + 1], model(x_2, sigmas[i + 1] * ones))
        x = x + (d + d_2) / 2 * dt
    return x


def dpm_2(model: Denoiser, x, sigmas, noise: NoiseFn, **churn):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        x, sigma_hat = _churned(x, sigmas, i, noise, churn)
        d = _d(x, sigma_hat, model(x, sigma_hat * ones))
        if sigmas[i + 1] == 0:
            x = x + d * (sigmas[i + 1] - sigma_hat)
            continue
        x = _dpm_2_step(model, x, d, sigma_hat, sigmas[i + 1], ones)
    return x


def _dpm_2_step(model: Denoiser, x, d, sigma, sigma_to, ones):
    """DPM-Solver-2: the derivative at the midpoint in log sigma carries x from sigma to sigma_to."""
    sigma_mid = sigma.log().lerp(sigma_to.log(), 0.5).exp()
    x_2 = x + d * (sigma_mid - sigma)
    d_2 = _d(x_2, sigma_mid, model(x_2, sigma_mid * ones))
    return x + d_2 * (sigma_to - sigma)


def euler_ancestral(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        sigma_down, sigma_up = ancestral_step(sigmas[i], sigmas[i + 1], eta)
        x = x + _d(x, sigmas[i], denoised) * (sigma_down - sigmas[i])
        if sigmas[i + 1] > 0:
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def dpm_2_ancestral(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        sigma_down, sigma_up = ancestral_step(sigmas[i], sigmas[i + 1], eta)
        d = _d(x, sigmas[i], denoised)
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
        derivatives = [*derivatives, _d(x, sigmas[i], model(x, sigmas[i] * ones))][-order:]
        current = min(i + 1, order)
        weights = [_lms_weight(current, levels, i, j) for j in range(current)]
        x = x + sum(weight * d for weight, d in zip(weights, reversed(derivatives)))
    return x


def _lms_weight(order: int, levels, i: int, j: int) -> float:
    from scipy import integrate  # imported when used: scipy is heavy

    def lagrange(tau: float) -> float:
        product = 1.0
        for k in range(order):
            if k != j:
                product *= (tau - levels[i - k]) / (levels[i - j] - levels[i - k])
        return product

    return integrate.quad(lagrange, levels[i], levels[i + 1], epsrel=1e-4)[0]


def _lam(sigma):  # log-SNR time: t = -log(sigma)
    return sigma.log().neg()


def _sig(t):
    return t.neg().exp()


def dpmpp_2s_ancestral(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        sigma_down, sigma_up = ancestral_step(sigmas[i], sigmas[i + 1], eta)
        if sigma_down == 0:
            x = x + _d(x, sigmas[i], denoised) * (sigma_down - sigmas[i])
        else:
            t, t_next = _lam(sigmas[i]), _lam(sigma_down)
            h = t_next - t
            s = t + 1 / 2 * h
            x_2 = (_sig(s) / _sig(t)) * x - (-h * (1 / 2)).expm1() * denoised
            denoised_2 = model(x_2, _sig(s) * ones)
            x = (_sig(t_next) / _sig(t)) * x - (-h).expm1() * denoised_2
        if sigmas[i + 1] > 0:
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def dpmpp_sde(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0, r: float = 1 / 2):
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = x + _d(x, sigmas[i], denoised) * (sigmas[i + 1] - sigmas[i])
            continue
        t, t_next = _lam(sigmas[i]), _lam(sigmas[i + 1])
        h = t_next - t
        s = t + h * r
        down, up = ancestral_step(_sig(t), _sig(s), eta)
        s_ = _lam(down)
        x_2 = (_sig(s_) / _sig(t)) * x - (t - s_).expm1() * denoised
        x_2 = x_2 + noise(_sig(t), _sig(s)) * s_noise * up
        denoised_2 = model(x_2, _sig(s) * ones)
        down, up = ancestral_step(_sig(t), _sig(t_next), eta)
        t_next_ = _lam(down)
        mixed = (1 - 1 / (2 * r)) * denoised + 1 / (2 * r) * denoised_2
        x = (_sig(t_next_) / _sig(t)) * x - (t - t_next_).expm1() * mixed
        x = x + noise(_sig(t), _sig(t_next)) * s_noise * up
    return x


def dpmpp_2m(model: Denoiser, x, sigmas, noise: NoiseFn):
    ones = x.new_ones([x.shape[0]])
    previous = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        t, t_next = _lam(sigmas[i]), _lam(sigmas[i + 1])
        h = t_next - t
        if previous is not None and sigmas[i + 1] != 0:
            r = (t - _lam(sigmas[i - 1])) / h
            target = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * previous
        else:
            target = denoised
        x = (_sig(t_next) / _sig(t)) * x - (-h).expm1() * target
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
            x = sigmas[i + 1] / sigmas[i] * (-eta_h).exp() * x + (-h - eta_h).expm1().neg() * denoised
            if previous is not None:
                r = h_last / h
                if solver_type == "heun":
                    x = x + ((-h - eta_h).expm1().neg() / (-h - eta_h) + 1) * (1 / r) * (denoised - previous)
                else:
                    x = x + 0.5 * (-h - eta_h).expm1().neg() * (1 / r) * (denoised - previous)
            if eta:
                x = x + noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * (-2 * eta_h).expm1().neg().sqrt() * s_noise
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
            x = torch.exp(-h_eta) * x + (-h_eta).expm1().neg() * denoised
            if h_2 is not None:
                r0, r1 = h_1 / h, h_2 / h
                d1_0, d1_1 = (denoised - denoised_1) / r0, (denoised_1 - denoised_2) / r1
                d1 = d1_0 + (d1_0 - d1_1) * r0 / (r0 + r1)
                d2 = (d1_0 - d1_1) / (r0 + r1)
                phi_2 = h_eta.neg().expm1() / h_eta + 1
                x = x + phi_2 * d1 - (phi_2 / h_eta - 0.5) * d2
            elif h_1 is not None:
                phi_2 = h_eta.neg().expm1() / h_eta + 1
                x = x + phi_2 * ((denoised - denoised_1) / (h_1 / h))
            if eta:
                x = x + noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * (-2 * h * eta).expm1().neg().sqrt() * s_noise
            h_1, h_2 = h, h_1
        denoised_1, denoised_2 = denoised, denoised_1
    return x


SAMPLER_FUNCTIONS = {
    "euler": euler, "euler_ancestral": euler_ancestral, "heun": heun, "dpm_2": dpm_2,
    "dpm_2_ancestral": dpm_2_ancestral, "lms": lms, "dpmpp_2s_ancestral": dpmpp_2s_ancestral,
    "dpmpp_sde": dpmpp_sde, "dpmpp_2m": dpmpp_2m, "dpmpp_2m_sde": dpmpp_2m_sde, "dpmpp_3m_sde": dpmpp_3m_sde,
    "dpm_fast": dpm_fast, "dpm_adaptive": dpm_adaptive, "restart": restart,  # engine/samplers/kdiffusion_extra.py
}
# The options A1111 passes (Sampler.initialize: eta where the function takes one, sampler_extra_params); the others
# keep their defaults (Restart's s_noise 1), whatever the recipe says.
TAKES_ETA = frozenset({"euler_ancestral", "dpm_2_ancestral", "dpmpp_2s_ancestral", "dpmpp_sde", "dpmpp_2m_sde",
                       "dpmpp_3m_sde", "dpm_fast", "dpm_adaptive"})
TAKES_CHURN = frozenset({"euler", "heun", "dpm_2"})
TAKES_S_NOISE = TAKES_CHURN | {"dpm_2_ancestral", "dpmpp_2s_ancestral", "dpmpp_sde", "dpmpp_2m_sde", "dpmpp_3m_sde",
                               "dpm_fast"}
# Samplers that integrate between two sigmas (sigma_min, sigma_max) instead of stepping through the schedule's.
TAKES_SPAN = frozenset({"dpm_fast", "dpm_adaptive"})
