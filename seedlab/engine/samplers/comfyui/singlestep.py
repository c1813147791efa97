"""ComfyUI's other single-step samplers (comfy/k_diffusion/sampling.py, October 2025): Heun++ (heunpp2), DDPM, LCM
and the SEEDS exponential solvers (seeds_2, seeds_3) with their SDE noise carried between stages.

Terms are written in ComfyUI's order so that the latents are the same to the bit (tests/test_comfy_samplers_more.py).
`noise(sigma, sigma_next)` is ComfyUI's default_noise_sampler (engine/samplers/comfyui.py's _seeded_noise).
"""

from __future__ import annotations

import torch

from .. import kdiffusion
from ..kdiffusion import Denoiser, NoiseFn


def heunpp2(model: Denoiser, x, sigmas, noise: NoiseFn):
    """sample_heunpp2 without churn: three calls a step, two before the last, one at the last. (ComfyUI draws an
    unused randn_like from the global generator every step; without churn it changes nothing, so none is drawn.)"""
    ones, last = x.new_ones([x.shape[0]]), sigmas[-1]
    for i in range(len(sigmas) - 1):
        d = kdiffusion.to_d(x, sigmas[i], model(x, sigmas[i] * ones))
        dt = sigmas[i + 1] - sigmas[i]
        if sigmas[i + 1] == last:
            x = x + d * dt
            continue
        x_2 = x + d * dt
        d_2 = kdiffusion.to_d(x_2, sigmas[i + 1], model(x_2, sigmas[i + 1] * ones))
        if sigmas[i + 2] == last:  # Heun, weighted by the next sigma over twice the first
            w2 = sigmas[i + 1] / (2 * sigmas[0])
            x = x + (d * (1 - w2) + d_2 * w2) * dt
        else:  # Heun++: a third derivative two levels ahead
            x_3 = x_2 + d_2 * (sigmas[i + 2] - sigmas[i + 1])
            d_3 = kdiffusion.to_d(x_3, sigmas[i + 2], model(x_3, sigmas[i + 2] * ones))
            w2, w3 = sigmas[i + 1] / (3 * sigmas[0]), sigmas[i + 2] / (3 * sigmas[0])
            x = x + ((1 - w2 - w3) * d + w2 * d_2 + w3 * d_3) * dt
    return x


def _ddpm_step(x, sigma, sigma_next, eps, noise: NoiseFn):
    """DDPMSampler_step: the DDPM posterior's mean in VP latents, plus its noise unless sigma_next is 0."""
    cumprod, cumprod_next = 1 / ((sigma * sigma) + 1), 1 / ((sigma_next * sigma_next) + 1)
    alpha = cumprod / cumprod_next
    mean = (1.0 / alpha).sqrt() * (x - (1 - alpha) * eps / (1 - cumprod).sqrt())
    if sigma_next > 0:
        mean = mean + ((1 - alpha) * (1. - cumprod_next) / (1. - cumprod)).sqrt() * noise(sigma, sigma_next)
    return mean


def ddpm(model: Denoiser, x, sigmas, noise: NoiseFn):
    """sample_ddpm: generic_step_sampler's DDPM steps on x / sqrt(1 + sigma^2), scaled back to the next sigma."""
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        eps = (x - model(x, sigmas[i] * ones)) / sigmas[i]
        x = _ddpm_step(x / torch.sqrt(1.0 + sigmas[i] ** 2.0), sigmas[i], sigmas[i + 1], eps, noise)
        if sigmas[i + 1] != 0:
            x = x * torch.sqrt(1.0 + sigmas[i + 1] ** 2.0)
    return x


def lcm(model: Denoiser, x, sigmas, noise: NoiseFn):
    """sample_lcm: the denoised latents, noised again to the next sigma (EPS.noise_scaling, as from an empty latent)."""
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        x = model(x, sigmas[i] * ones)
        if sigmas[i + 1] > 0:
            x = noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] + x
    return x


def _carried(sde_noise, r_from: float, r_to: float, h, eta: float, noise: NoiseFn, sigma_from, sigma_to):
    """SEEDS' noise carried from the stage at r_from of the step to the one at r_to, with fresh noise for the gap."""
    factor = (r_from - r_to) * h * eta
    return sde_noise * factor.exp() + kdiffusion.expm1(factor.mul(2)).neg().sqrt() * noise(sigma_from, sigma_to)


def seeds_2(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0, r: float = 0.5,
            solver: str = "phi_1"):
    """sample_seeds_2: SEEDS-2, data prediction in half-log-SNR time; the phi_2 update (r 1: exp_heun_2_x0 and
    exp_heun_2_x0_sde) came in December 2025 (PR 11360)."""
    ones, inject = x.new_ones([x.shape[0]]), eta > 0 and s_noise > 0
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        lambda_s, lambda_t = kdiffusion.sigma_to_t(sigmas[i]), kdiffusion.sigma_to_t(sigmas[i + 1])
        h = lambda_t - lambda_s
        h_eta = h * (eta + 1)
        lambda_1 = kdiffusion.lerp(lambda_s, lambda_t, r)
        sigma_1 = kdiffusion.t_to_sigma(lambda_1)
        x_2 = sigma_1 / sigmas[i] * (-r * h * eta).exp() * x - sigma_1 * lambda_1.exp() * kdiffusion.expm1(
            -r * h_eta) * denoised
        if inject:
            sde_noise = kdiffusion.expm1(-2 * r * h * eta).neg().sqrt() * noise(sigmas[i], sigma_1)
            x_2 = x_2 + sde_noise * sigma_1 * s_noise
        denoised_2 = model(x_2, sigma_1 * ones)
        alpha_t = sigmas[i + 1] * lambda_t.exp()
        if solver == "phi_1":
            update = alpha_t * kdiffusion.expm1(-h_eta) * kdiffusion.lerp(denoised, denoised_2, 1 / (2 * r))
        else:
            b_2 = _phi_2(-h_eta) / r
            update = alpha_t * ((kdiffusion.expm1(-h_eta) - b_2) * denoised + b_2 * denoised_2)
        x = sigmas[i + 1] / sigmas[i] * (-h * eta).exp() * x - update
        if inject:
            x = x + _carried(sde_noise, r, 1, h, eta, noise, sigma_1, sigmas[i + 1]) * sigmas[i + 1] * s_noise
    return x


def _phi_2(h):  # ei_h_phi_2: h * phi_2(h)
    return (kdiffusion.expm1(h) - h) / h


def seeds_3(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0,
            r_1: float = 1. / 3, r_2: float = 2. / 3):
    """sample_seeds_3: SEEDS-3, three model calls a step at r_1 and r_2 of it and at its start."""
    ones, inject = x.new_ones([x.shape[0]]), eta > 0 and s_noise > 0
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        lambda_s, lambda_t = kdiffusion.sigma_to_t(sigmas[i]), kdiffusion.sigma_to_t(sigmas[i + 1])
        h = lambda_t - lambda_s
        h_eta = h * (eta + 1)
        lambda_1, lambda_2 = kdiffusion.lerp(lambda_s, lambda_t, r_1), kdiffusion.lerp(lambda_s, lambda_t, r_2)
        sigma_1, sigma_2 = kdiffusion.t_to_sigma(lambda_1), kdiffusion.t_to_sigma(lambda_2)
        x_2 = sigma_1 / sigmas[i] * (-r_1 * h * eta).exp() * x - sigma_1 * lambda_1.exp() * kdiffusion.expm1(
            -r_1 * h_eta) * denoised
        if inject:
            sde_noise = kdiffusion.expm1(-2 * r_1 * h * eta).neg().sqrt() * noise(sigmas[i], sigma_1)
            x_2 = x_2 + sde_noise * sigma_1 * s_noise
        denoised_2 = model(x_2, sigma_1 * ones)
        a_2 = r_2 / r_1 * _phi_2(-r_2 * h_eta)
        a_1 = kdiffusion.expm1(-r_2 * h_eta) - a_2
        x_3 = sigma_2 / sigmas[i] * (-r_2 * h * eta).exp() * x - sigma_2 * lambda_2.exp() * (
            a_1 * denoised + a_2 * denoised_2)
        if inject:
            sde_noise = _carried(sde_noise, r_1, r_2, h, eta, noise, sigma_1, sigma_2)
            x_3 = x_3 + sde_noise * sigma_2 * s_noise
        denoised_3 = model(x_3, sigma_2 * ones)
        b_3 = _phi_2(-h_eta) / r_2
        b_1 = kdiffusion.expm1(-h_eta) - b_3
        x = sigmas[i + 1] / sigmas[i] * (-h * eta).exp() * x - sigmas[i + 1] * lambda_t.exp() * (
            b_1 * denoised + b_3 * denoised_3)
        if inject:
            x = x + _carried(sde_noise, r_2, 1, h, eta, noise, sigma_2, sigmas[i + 1]) * sigmas[i + 1] * s_noise
    return x
