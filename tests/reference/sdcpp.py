"""stable-diffusion.cpp's txt2img sampling re-created line by line from its C++ (leejet/stable-diffusion.cpp 97d29908).

src/stable-diffusion.cpp `calculate_alphas_cumprod` and `refresh_compvis_denoiser_sigmas`; src/runtime/denoiser.hpp
CompVisDenoiser (t_to_sigma, sigma_to_t, get_scalings), DiscreteScheduler, KarrasScheduler, sample_euler,
sample_heun, sample_dpm2, sample_dpmpp_2m, sample_dpmpp_2m_v2, get_ancestral_step, sample_euler_ancestral,
sample_dpmpp_2s_ancestral (`randn_like(x, rng)`: `rng()` here, the caller's continued stream); the denoise
lambda of `sample` (x * c_in, one UNet call per condition, ClassifierFreeGuidance on the outputs,
`guided * c_out + x * c_skip`). Every C++ `float` is a numpy float32 here; sd::Tensor<float> arithmetic with a
scalar is float32 torch arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import torch

f32 = np.float32


def compvis_tables(linear_start=0.00085, linear_end=0.012):
    ls_sqrt, le_sqrt = f32(math.sqrt(f32(linear_start))), f32(math.sqrt(f32(linear_end)))
    amount, product = f32(le_sqrt - ls_sqrt), f32(1.0)
    sigmas, log_sigmas = [], []
    for i in range(1000):
        beta = f32(ls_sqrt + f32(amount * f32(f32(i) / f32(999))))
        product = f32(product * f32(f32(1.0) - f32(beta * beta)))
        sigma = f32(np.sqrt(f32(f32(1 - product) / product)))
        sigmas.append(sigma)
        log_sigmas.append(f32(np.log(sigma)))
    return sigmas, log_sigmas


def t_to_sigma(log_sigmas, t):
    low_idx, high_idx = int(math.floor(t)), int(math.ceil(t))
    w = f32(t - f32(low_idx))
    return f32(np.exp(f32(f32(f32(1.0) - w) * log_sigmas[low_idx]) + f32(w * log_sigmas[high_idx])))


def sigma_to_t(log_sigmas, sigma):
    log_sigma = f32(np.log(sigma))
    low_idx = sum(1 for value in log_sigmas if f32(log_sigma - value) >= 0)
    low_idx = min(max(low_idx - 1, 0), 998)
    low, high = log_sigmas[low_idx], log_sigmas[low_idx + 1]
    w = f32(max(f32(0), min(f32(1), f32(f32(low - log_sigma) / f32(low - high)))))
    return f32(f32(f32(1.0) - w) * f32(low_idx)) + f32(w * f32(low_idx + 1))


def discrete_sigmas(log_sigmas, n):
    step = f32(f32(999) / f32(n - 1))
    return [t_to_sigma(log_sigmas, f32(999 - f32(step * f32(i)))) for i in range(n)] + [f32(0)]


def karras_sigmas(sigmas_table, n):
    rho = f32(7.0)
    sigma_min, sigma_max = max(sigmas_table[0], f32(1e-6)), sigmas_table[999]
    min_inv_rho, max_inv_rho = f32(sigma_min ** f32(f32(1) / rho)), f32(sigma_max ** f32(f32(1) / rho))
    result = []
    for i in range(n):
        frac = f32(f32(i) / f32(f32(n) - f32(1)))
        result.append(f32(f32(max_inv_rho + f32(frac * f32(min_inv_rho - max_inv_rho))) ** rho))
    return result + [f32(0)]


def make_denoise(unet, log_sigmas, cond, uncond, cfg, v_prediction=False):
    def denoise(x, sigma):
        sq = f32(f32(sigma * sigma) + f32(1.0))
        if v_prediction:
            c_skip, c_out = f32(f32(1.0) / sq), f32(f32(-sigma * f32(1.0)) / f32(np.sqrt(sq)))
        else:
            c_skip, c_out = f32(1.0), f32(-sigma)
        c_in = f32(f32(1.0) / f32(np.sqrt(sq)))
        timesteps = torch.tensor([float(sigma_to_t(log_sigmas, sigma))], dtype=torch.float32)
        noised_input = x * float(c_in)
        cond_out = unet(noised_input, timesteps, encoder_hidden_states=cond, return_dict=False)[0]
        uncond_out = unet(noised_input, timesteps, encoder_hidden_states=uncond, return_dict=False)[0]
        guided = uncond_out + float(f32(cfg)) * (cond_out - uncond_out)
        return guided * float(c_out) + x * float(c_skip)
    return denoise


def sample_euler(model, x, sigmas):
    for i in range(len(sigmas) - 1):
        sigma = sigmas[i]
        d = (x - model(x, sigma)) / float(sigma)
        x = x + d * float(f32(sigmas[i + 1] - sigma))
    return x


def sample_heun(model, x, sigmas):
    for i in range(len(sigmas) - 1):
        d = (x - model(x, sigmas[i])) / float(sigmas[i])
        dt = f32(sigmas[i + 1] - sigmas[i])
        if sigmas[i + 1] == 0:
            x = x + d * float(dt)
            continue
        x2 = x + d * float(dt)
        d = (d + (x2 - model(x2, sigmas[i + 1])) / float(sigmas[i + 1])) / 2.0
        x = x + d * float(dt)
    return x


def sample_dpm2(model, x, sigmas):
    for i in range(len(sigmas) - 1):
        d = (x - model(x, sigmas[i])) / float(sigmas[i])
        if sigmas[i + 1] == 0:
            x = x + d * float(f32(sigmas[i + 1] - sigmas[i]))
            continue
        sigma_mid = f32(np.exp(f32(f32(0.5) * f32(f32(np.log(sigmas[i])) + f32(np.log(sigmas[i + 1]))))))
        dt_1, dt_2 = f32(sigma_mid - sigmas[i]), f32(sigmas[i + 1] - sigmas[i])
        x2 = x + d * float(dt_1)
        x = x + ((x2 - model(x2, sigma_mid)) / float(sigma_mid)) * float(dt_2)
    return x


def _t_fn(sigma):
    with np.errstate(divide="ignore"):
        return f32(-np.log(sigma))


def sample_dpmpp_2m(model, x, sigmas, v2=False):
    old_denoised = x
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        t, t_next = _t_fn(sigmas[i]), _t_fn(sigmas[i + 1])
        h, a = f32(t_next - t), f32(sigmas[i + 1] / sigmas[i])
        if i == 0 or sigmas[i + 1] == 0:
            b = f32(f32(np.exp(-h)) - f32(1))
            x = float(a) * x - float(b) * denoised
        else:
            h_last = f32(t - _t_fn(sigmas[i - 1]))
            if v2:
                h_min, h_max = min(h_last, h), max(h_last, h)
                r, b = f32(h_max / h_min), f32(f32(np.exp(-f32(f32(h_max + h_min) / f32(2)))) - f32(1))
            else:
                r, b = f32(h_last / h), f32(f32(np.exp(-h)) - f32(1))
            c = f32(f32(1) / f32(f32(2) * r))
            denoised_d = float(f32(f32(1) + c)) * denoised - float(c) * old_denoised
            x = float(a) * x - float(b) * denoised_d
        old_denoised = denoised
    return x


def get_ancestral_step(sigma_from, sigma_to, eta):
    sigma_up, sigma_down = f32(0), sigma_to
    if eta <= 0:
        return sigma_down, sigma_up
    sigma_from_sq, sigma_to_sq = f32(sigma_from * sigma_from), f32(sigma_to * sigma_to)
    if sigma_from_sq > 0:
        term = f32(f32(sigma_to_sq * f32(sigma_from_sq - sigma_to_sq)) / sigma_from_sq)
        sigma_up = min(sigma_to, f32(eta * f32(np.sqrt(max(term, f32(0))))))
    sigma_down_sq = f32(sigma_to_sq - f32(sigma_up * sigma_up))
    sigma_down = f32(np.sqrt(sigma_down_sq)) if sigma_down_sq > 0 else f32(0)
    return sigma_down, sigma_up


def sample_euler_ancestral(model, x, sigmas, rng, eta):
    for i in range(len(sigmas) - 1):
        sigma, sigma_to = sigmas[i], sigmas[i + 1]
        denoised = model(x, sigma)
        if sigma_to == f32(0):
            x = denoised
        elif eta == f32(0):
            sigma_ratio = f32(sigma_to / sigma)
            x = float(sigma_ratio) * x + float(f32(np.float64(1.0) - np.float64(sigma_ratio))) * denoised
        else:
            sigma_down, sigma_up = get_ancestral_step(sigma, sigma_to, eta)
            sigma_ratio = f32(sigma_down / sigma)
            x = float(sigma_ratio) * x + float(f32(f32(1.0) - sigma_ratio)) * denoised
            if sigma_up > 0:
                x = x + rng() * float(sigma_up)
    return x


def sample_dpmpp_2s_ancestral(model, x, sigmas, rng, eta):
    def sigma_fn(t):
        return f32(np.exp(-t))

    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        sigma_down, sigma_up = get_ancestral_step(sigmas[i], sigmas[i + 1], eta)
        if sigma_down == 0:
            x = denoised
        else:
            t, t_next = _t_fn(sigmas[i]), _t_fn(sigma_down)
            h = f32(t_next - t)
            s = f32(t + f32(f32(0.5) * h))
            sigma_s = sigma_fn(s)
            x2 = float(f32(sigma_s / sigma_fn(t))) * x - float(f32(f32(np.exp(f32(-h * f32(0.5)))) - f32(1))) * denoised
            denoised2 = model(x2, sigma_s)
            x = float(f32(sigma_fn(t_next) / sigma_fn(t))) * x - float(f32(f32(np.exp(-h)) - f32(1))) * denoised2
        if sigmas[i + 1] > 0:
            x = x + rng() * float(sigma_up)
    return x


SAMPLERS = {"euler": sample_euler, "heun": sample_heun, "dpm2": sample_dpm2, "dpm++2m": sample_dpmpp_2m,
            "dpm++2mv2": lambda model, x, sigmas: sample_dpmpp_2m(model, x, sigmas, v2=True),
            "euler_a": sample_euler_ancestral, "dpm++2s_a": sample_dpmpp_2s_ancestral}
ANCESTRAL = ("euler_a", "dpm++2s_a")


def sdcpp_txt2img(unet, config, cond, uncond, noise, steps, cfg, method, scheduler, rng=None, eta=1.0):
    """sd.cpp's txt2img latents for SD 1.x: x_t = 0 + noise * sigmas[0], then the method (an ancestral one draws each
    step's noise with `rng()`, sd.cpp's rng object's next `randn` call)."""
    sigmas_table, log_sigmas = compvis_tables(config.get("beta_start", 0.00085), config.get("beta_end", 0.012))
    sigmas = karras_sigmas(sigmas_table, steps) if scheduler == "karras" else discrete_sigmas(log_sigmas, steps)
    model = make_denoise(unet, log_sigmas, cond, uncond, cfg, config.get("prediction_type") == "v_prediction")
    if method in ANCESTRAL:
        return SAMPLERS[method](model, noise * float(sigmas[0]), sigmas, rng, f32(eta))
    return SAMPLERS[method](model, noise * float(sigmas[0]), sigmas)
