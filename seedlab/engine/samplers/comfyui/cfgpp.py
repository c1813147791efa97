"""ComfyUI's CFG++ samplers (comfy/k_diffusion/sampling.py, October 2025): the step follows the negative prompt's
denoised latents and the guidance is added back as the difference of the two predictions.

Each reads `model.uncond_denoised` after every call: engine/samplers/comfyui.py's ComfyGuided keeps it when asked
(keep_uncond), as ComfyUI's post-CFG hook hands it over, and then evaluates the negative prompt at cfg 1 too
(disable_cfg1_optimization). res_multistep_cfg_pp and gradient_estimation_cfg_pp live in multistep.py.
"""

from __future__ import annotations

import torch

from .. import kdiffusion
from ..kdiffusion import Denoiser, NoiseFn


def euler_ancestral_cfg_pp(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    """sample_euler_ancestral_cfg_pp (sample_euler_cfg_pp at eta 0, s_noise 0: no draw)."""
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        alpha_s = sigmas[i] * kdiffusion.sigma_to_t(sigmas[i]).exp()  # sigma * exp(-log sigma): 1 within rounding
        alpha_t = sigmas[i + 1] * kdiffusion.sigma_to_t(sigmas[i + 1]).exp()
        d = kdiffusion.to_d(x, sigmas[i], alpha_s * model.uncond_denoised)
        sigma_down, sigma_up = kdiffusion.ancestral_step(sigmas[i] / alpha_s, sigmas[i + 1] / alpha_t, eta)
        x = alpha_t * denoised + (alpha_t * sigma_down) * d
        if eta > 0 and s_noise > 0:
            x = x + alpha_t * noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def dpmpp_2s_ancestral_cfg_pp(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 1.0, s_noise: float = 1.0):
    """sample_dpmpp_2s_ancestral_cfg_pp as of October 2025: its second update reads the midpoint call's uncond."""
    ones = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        sigma_down, sigma_up = kdiffusion.ancestral_step(sigmas[i], sigmas[i + 1], eta)
        if sigma_down == 0:
            x = denoised + kdiffusion.to_d(x, sigmas[i], model.uncond_denoised) * sigma_down
        else:
            t, t_next = kdiffusion.sigma_to_t(sigmas[i]), kdiffusion.sigma_to_t(sigma_down)
            h = t_next - t
            s = t + 1 / 2 * h
            guided = x + (denoised - model.uncond_denoised)
            x_2 = ((kdiffusion.t_to_sigma(s) / kdiffusion.t_to_sigma(t)) * guided
                   - kdiffusion.expm1(-h * (1 / 2)) * denoised)
            denoised_2 = model(x_2, kdiffusion.t_to_sigma(s) * ones)  # replaces model.uncond_denoised, read again below
            guided = x + (denoised - model.uncond_denoised)
            x = (kdiffusion.t_to_sigma(t_next) / kdiffusion.t_to_sigma(t)) * guided - kdiffusion.expm1(-h) * denoised_2
        if sigmas[i + 1] > 0:
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def dpmpp_2m_cfg_pp(model: Denoiser, x, sigmas, noise: NoiseFn):
    """sample_dpmpp_2m_cfg_pp: DPM-Solver++(2M) on the uncond, the guidance added as denoised - uncond."""
    ones = x.new_ones([x.shape[0]])
    old_uncond = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        uncond = model.uncond_denoised
        t, t_next = kdiffusion.sigma_to_t(sigmas[i]), kdiffusion.sigma_to_t(sigmas[i + 1])
        h = t_next - t  # inf at the last step: exp(-h) is 0 and x becomes the denoised latents
        mix = -torch.exp(-h) * uncond
        if old_uncond is not None and sigmas[i + 1] != 0:
            r = (t - kdiffusion.sigma_to_t(sigmas[i - 1])) / h
            mix = mix - kdiffusion.expm1(-h) * (1 / (2 * r)) * (denoised - old_uncond)
        x = denoised + mix + torch.exp(-h) * x
        old_uncond = uncond
    return x
