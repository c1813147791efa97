"""ComfyUI's own copies of k-diffusion's samplers where they differ from k-diffusion 0.1.1 (kdiffusion.py has the
others).

comfy/k_diffusion/sampling.py: the last step of euler_ancestral, lms and the DPM++ SDE samplers is the denoised
latents; DPM++ SDE runs in half-log-SNR with alpha factors, and the multistep SDE samplers scale by alpha_t and
exp(-h * eta). loop.py runs them.
"""

from __future__ import annotations

import torch

from .. import kdiffusion


def euler_ancestral(model, x, sigmas, noise: kdiffusion.NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    """ComfyUI's: the last step (sigma_down 0) is the denoised latents, the others one expression."""
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        sigma_down, sigma_up = kdiffusion.ancestral_step(sigmas[i], sigmas[i + 1], eta)
        if sigma_down == 0:
            x = denoised
        else:
            drift = (x - denoised) / sigmas[i]
            x = x + drift * (sigma_down - sigmas[i]) + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def lms(model, x, sigmas, order: int = 4):
    """ComfyUI's linear multistep: k-diffusion's weights, and the denoised latents at the last step."""
    ones = x.new_ones([x.shape[0]])
    levels = sigmas.detach().cpu().numpy()
    derivatives: list[torch.Tensor] = []
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        derivatives = [*derivatives, (x - denoised) / sigmas[i]][-order:]
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        current = min(i + 1, order)
        weights = [kdiffusion.lms_weight(current, levels, i, j) for j in range(current)]
        x = x + sum(weight * d for weight, d in zip(weights, reversed(derivatives)))
    return x


def dpmpp_sde(model, x, sigmas, noise: kdiffusion.NoiseFn, eta: float = 1.0, s_noise: float = 1.0, r: float = 1 / 2):
    """ComfyUI's rewrite in half-log-SNR with alpha factors; the last step is the denoised latents."""
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        lam_s, lam_t = kdiffusion.sigma_to_t(sigmas[i]), kdiffusion.sigma_to_t(sigmas[i + 1])
        lam_mid, weight = lam_s + r * (lam_t - lam_s), 1 / (2 * r)
        sigma_mid = lam_mid.neg().exp()
        alpha_s, alpha_mid, alpha_t = sigmas[i] * lam_s.exp(), sigma_mid * lam_mid.exp(), sigmas[i + 1] * lam_t.exp()
        down, up = kdiffusion.ancestral_step(lam_s.neg().exp(), lam_mid.neg().exp(), eta)
        step = down.log().neg() - lam_s
        x_2 = (alpha_mid / alpha_s) * (-step).exp() * x - alpha_mid * kdiffusion.expm1(-step) * denoised
        if eta > 0 and s_noise > 0:
            x_2 = x_2 + alpha_mid * noise(sigmas[i], sigma_mid) * s_noise * up
        denoised_2 = model(x_2, sigma_mid * ones)
        down, up = kdiffusion.ancestral_step(lam_s.neg().exp(), lam_t.neg().exp(), eta)
        step = down.log().neg() - lam_s
        mixed = (1 - weight) * denoised + weight * denoised_2
        x = (alpha_t / alpha_s) * (-step).exp() * x - alpha_t * kdiffusion.expm1(-step) * mixed
        if eta > 0 and s_noise > 0:
            x = x + alpha_t * noise(sigmas[i], sigmas[i + 1]) * s_noise * up
    return x


def dpmpp_multistep_sde(model, x, sigmas, noise: kdiffusion.NoiseFn, order: int = 2, heun: bool = False,
                        eta: float = 1.0, s_noise: float = 1.0):
    """ComfyUI's DPM++ 2M SDE (midpoint or heun, order 2) and 3M SDE (order 3): alpha_t factors and the
    sigma ratio times exp(-h * eta); the last step is the denoised latents."""
    ones = x.new_ones([x.shape[0]])
    denoised_1 = denoised_2 = h = h_1 = h_2 = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            lam_s, lam_t = kdiffusion.sigma_to_t(sigmas[i]), kdiffusion.sigma_to_t(sigmas[i + 1])
            h = lam_t - lam_s
            h_eta = h * (eta + 1)  # with alpha_t and the sigma ratio times exp(-h * eta), unlike k-diffusion
            alpha_t, phi_2 = sigmas[i + 1] * lam_t.exp(), kdiffusion.expm1(h_eta.neg()) / h_eta + 1
            x = sigmas[i + 1] / sigmas[i] * (-h * eta).exp() * x + alpha_t * kdiffusion.expm1(-h_eta).neg() * denoised
            if order == 3 and h_2 is not None:
                r0, r1 = h_1 / h, h_2 / h
                d1_0, d1_1 = (denoised - denoised_1) / r0, (denoised_1 - denoised_2) / r1
                d1 = d1_0 + (d1_0 - d1_1) * r0 / (r0 + r1)
                d2 = (d1_0 - d1_1) / (r0 + r1)
                x = x + (alpha_t * phi_2) * d1 - (alpha_t * (phi_2 / h_eta - 0.5)) * d2
            elif order == 3 and h_1 is not None:
                x = x + (alpha_t * phi_2) * ((denoised - denoised_1) / (h_1 / h))
            elif order == 2 and denoised_1 is not None:
                if heun:  # 2M SDE, r = h_1 / h
                    x = x + alpha_t * (kdiffusion.expm1(-h_eta).neg() / (-h_eta) + 1) * (1 / (h_1 / h)) \
                        * (denoised - denoised_1)
                else:
                    x = x + 0.5 * alpha_t * kdiffusion.expm1(-h_eta).neg() * (1 / (h_1 / h)) * (denoised - denoised_1)
            if eta > 0 and s_noise > 0:
                x = x + (noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1]
                         * kdiffusion.expm1(-2 * h * eta).neg().sqrt() * s_noise)
        denoised_1, denoised_2 = denoised, denoised_1
        h_1, h_2 = h, h_1
    return x
