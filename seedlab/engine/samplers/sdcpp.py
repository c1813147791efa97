"""stable-diffusion.cpp's samplers and schedules, computed as sd.cpp computes them (src/runtime/denoiser.hpp).

sd.cpp (leejet/stable-diffusion.cpp, read at 97d29908) differs from A1111's k-diffusion in its arithmetic, not its
math: its sigma table is a float32 product of the betas (`calculate_alphas_cumprod`), `t_to_sigma` and `sigma_to_t`
interpolate in float32 scalars, CFG mixes the UNet's outputs (eps or v) before the CompVis scalings turn them into
denoised latents, prompt and negative prompt are two UNet calls, and every sampler's scalars are C++ floats. So no
sd.cpp sampler equals an A1111 one bit for bit; those whose math draws nothing while stepping run here, on the
diffusers UNet, spelled "euler (sd.cpp)" in a recipe (samplers/names.py SDCPP_SAMPLERS). Scalars are numpy
float32, as C++ floats.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..noise import make_noise
from .names import SDCPP, SDCPP_SCHEDULES

F = np.float32
TIMESTEPS = 1000
StepFn = Callable[[], None]


class SdcppSigmas:
    """sd.cpp's CompVisDenoiser table: sigmas and log sigmas from float32 alphas_cumprod (stable-diffusion.cpp)."""

    def __init__(self, config: dict):
        start, end = F(np.sqrt(F(config.get("beta_start", 0.00085)))), F(np.sqrt(F(config.get("beta_end", 0.012))))
        amount, product, alphas = F(end - start), F(1.0), []
        for i in range(TIMESTEPS):  # calculate_alphas_cumprod: product *= 1 - powf(beta, 2)
            beta = F(start + F(amount * F(F(i) / F(TIMESTEPS - 1))))
            product = F(product * F(F(1.0) - F(beta * beta)))
            alphas.append(product)
        alphas = np.array(alphas, dtype=F)
        self.sigmas = np.sqrt((F(1) - alphas) / alphas).astype(F)
        self.log_sigmas = np.log(self.sigmas).astype(F)

    def t_to_sigma(self, t: np.float32) -> np.float32:
        low, high = int(np.floor(t)), int(np.ceil(t))
        w = F(t - F(low))
        return F(np.exp(F(F(F(1) - w) * self.log_sigmas[low]) + F(w * self.log_sigmas[high])))

    def sigma_to_t(self, sigma: np.float32) -> np.float32:
        log_sigma = F(np.log(F(sigma)))
        low = min(max(int(np.sum((log_sigma - self.log_sigmas) >= 0)) - 1, 0), TIMESTEPS - 2)
        lo, hi = self.log_sigmas[low], self.log_sigmas[low + 1]
        w = F(min(max(F(F(lo - log_sigma) / F(lo - hi)), F(0)), F(1)))
        return F(F(F(1) - w) * F(low)) + F(w * F(low + 1))


def sdcpp_sigmas(table: SdcppSigmas, schedule: str, n: int) -> list[np.float32]:
    """sd.cpp's DiscreteScheduler or KarrasScheduler: n sigmas and a final 0 (denoiser.hpp)."""
    if schedule == "karras":
        rho, sigma_min, sigma_max = F(7), max(table.sigmas[0], F(1e-6)), table.sigmas[-1]
        low, high = F(sigma_min ** F(F(1) / rho)), F(sigma_max ** F(F(1) / rho))
        return [F(F(high + F(F(F(i) / F(F(n) - F(1))) * F(low - high))) ** rho) for i in range(n)] + [F(0)]
    t_max = TIMESTEPS - 1
    if n == 1:
        return [table.t_to_sigma(F(t_max)), F(0)]
    step = F(F(t_max) / F(n - 1))
    return [table.t_to_sigma(F(F(t_max) - F(step * F(i)))) for i in range(n)] + [F(0)]


class SdcppDenoiser:
    """sd.cpp's denoise callback: two UNet calls, CFG on their outputs, then the CompVis(V) scalings."""

    def __init__(self, unet, table: SdcppSigmas, cond, uncond, cfg: float, v_prediction: bool, on_step: StepFn):
        self.unet, self.table, self.cond, self.uncond = unet, table, cond, uncond
        self.cfg, self.v, self.on_step = F(cfg), v_prediction, on_step

    def __call__(self, x: torch.Tensor, sigma: np.float32) -> torch.Tensor:
        square = F(F(sigma * sigma) + F(1))
        c_in = F(F(1) / F(np.sqrt(square)))
        c_skip, c_out = (F(F(1) / square), F(F(-sigma) / F(np.sqrt(square)))) if self.v else (F(1), F(-sigma))
        t = torch.tensor([float(self.table.sigma_to_t(sigma))], dtype=torch.float32, device=x.device)
        noised = (x * float(c_in)).to(self.unet.dtype)
        cond = self.unet(noised, t, encoder_hidden_states=self.cond, return_dict=False)[0].float()
        uncond = self.unet(noised, t, encoder_hidden_states=self.uncond, return_dict=False)[0].float()
        self.on_step()
        guided = uncond + float(self.cfg) * (cond - uncond)
        return guided * float(c_out) + x * float(c_skip)


def _euler(model, x, sigmas):
    """sd.cpp's sample_euler."""
    for i in range(len(sigmas) - 1):
        d = (x - model(x, sigmas[i])) / float(sigmas[i])
        x = x + d * float(F(sigmas[i + 1] - sigmas[i]))
    return x


def _heun(model, x, sigmas):
    """sd.cpp's sample_heun."""
    for i in range(len(sigmas) - 1):
        d = (x - model(x, sigmas[i])) / float(sigmas[i])
        dt = float(F(sigmas[i + 1] - sigmas[i]))
        if sigmas[i + 1] == 0:
            x = x + d * dt
        else:
            x2 = x + d * dt
            d = (d + (x2 - model(x2, sigmas[i + 1])) / float(sigmas[i + 1])) / 2.0
            x = x + d * dt
    return x


def _dpm2(model, x, sigmas):
    """sd.cpp's sample_dpm2 (all its sigmas: it drops no penultimate one, unlike A1111's DPM2)."""
    for i in range(len(sigmas) - 1):
        d = (x - model(x, sigmas[i])) / float(sigmas[i])
        if sigmas[i + 1] == 0:
            x = x + d * float(F(sigmas[i + 1] - sigmas[i]))
        else:
            mid = F(np.exp(F(F(0.5) * F(F(np.log(sigmas[i])) + F(np.log(sigmas[i + 1]))))))
            x2 = x + d * float(F(mid - sigmas[i]))
            x = x + ((x2 - model(x2, mid)) / float(mid)) * float(F(sigmas[i + 1] - sigmas[i]))
    return x


def _dpmpp_2m(model, x, sigmas, v2: bool = False):
    """sd.cpp's sample_dpmpp_2m, and sample_dpmpp_2m_v2 (its step b from the mean of the last two h)."""
    old = x
    with np.errstate(divide="ignore"):  # -log(0) is inf, as in C++: a = 0, b = -1 at the last step
        t = [F(-np.log(s)) for s in sigmas]
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        h, a = F(t[i + 1] - t[i]), F(sigmas[i + 1] / sigmas[i])
        if i == 0 or sigmas[i + 1] == 0:
            b = F(F(np.exp(-h)) - F(1))
            x = float(a) * x - float(b) * denoised
        else:
            h_last = F(t[i] - t[i - 1])
            r, h_b = F(h_last / h), h
            if v2:
                low, high = min(h_last, h), max(h_last, h)
                r, h_b = F(high / low), F(F(high + low) / F(2))
            b = F(F(np.exp(-h_b)) - F(1))
            half = F(F(1) / F(F(2) * r))
            x = float(a) * x - float(b) * (float(F(F(1) + half)) * denoised - float(half) * old)
        old = denoised
    return x


SAMPLERS = {"euler": _euler, "heun": _heun, "dpm2": _dpm2, "dpm++2m": _dpmpp_2m,
            "dpm++2mv2": lambda model, x, sigmas: _dpmpp_2m(model, x, sigmas, v2=True)}


def sample(pipe, model_sigmas, recipe, cond: torch.Tensor, uncond: torch.Tensor, on_step: StepFn) -> torch.Tensor:
    """The final latents of a recipe whose scheduler is one of sd.cpp's ("euler (sd.cpp)"): sd.cpp's
    sample_k_diffusion on txt2img, x = noise * sigmas[0] (A1111's sigma table, model_sigmas, is not used)."""
    table = SdcppSigmas(dict(pipe.scheduler.config))
    sigmas = sdcpp_sigmas(table, SDCPP_SCHEDULES[recipe.schedule], recipe.num_inference_steps)
    noise = make_noise(pipe, seed=recipe.seed, width=recipe.width, height=recipe.height, device=pipe.unet.device,
                       dtype=torch.float32, rng=recipe.rng, variation_seed=recipe.variation_seed,
                       variation_strength=recipe.variation_strength, seed_resize_from=recipe.seed_resize_from)
    denoiser = SdcppDenoiser(pipe.unet, table, cond, uncond, recipe.guidance_scale,
                             pipe.scheduler.config.get("prediction_type") == "v_prediction", on_step)
    x = noise.latents.float() * float(sigmas[0])
    latents = SAMPLERS[recipe.scheduler.removesuffix(SDCPP)](denoiser, x, sigmas)
    return latents.to(pipe.unet.dtype)
