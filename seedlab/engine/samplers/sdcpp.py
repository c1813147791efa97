"""stable-diffusion.cpp's samplers and schedules, computed as sd.cpp computes them (src/runtime/denoiser.hpp).

sd.cpp (leejet/stable-diffusion.cpp, read at 97d29908) differs from A1111's k-diffusion in its arithmetic, not its
math: its sigma table is a float32 product of the betas (`calculate_alphas_cumprod`), `t_to_sigma` and `sigma_to_t`
interpolate in float32 scalars, CFG mixes the UNet's outputs (eps or v) before the CompVis scalings turn them into
denoised latents, prompt and negative prompt are two UNet calls, and every sampler's scalars are C++ floats. So no
sd.cpp sampler equals an A1111 one bit for bit; they run here on the diffusers UNet, spelled "euler (sd.cpp)" in a
recipe (samplers/names.py SDCPP_SAMPLERS). Scalars are numpy float32, as C++ floats. Its ancestral samplers
(euler_a, dpm++2s_a) draw each step's noise with another `randn` call on the rng object that drew the starting
latents: `StepNoise` continues that stream (random_sources.Stream; torch's CPU generator for rng cpu, which sd.cpp's
MT19937RNG copies word for word).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .. import cpu_noise
from ..noise import make_noise
from ..random_sources import STREAMS, Stream
from .names import SDCPP, SDCPP_SCHEDULES

F = np.float32
TIMESTEPS = 1000
StepFn = Callable[[], None]
ONE = F(1)  # sd.cpp's eta for its ancestral samplers, and the samplers' default


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
        self.dtype = unet.dtype  # read once: a module's dtype walks its parameters

    def __call__(self, x: torch.Tensor, sigma: np.float32) -> torch.Tensor:
        square = F(F(sigma * sigma) + F(1))
        c_in = F(F(1) / F(np.sqrt(square)))
        c_skip, c_out = (F(F(1) / square), F(F(-sigma) / F(np.sqrt(square)))) if self.v else (F(1), F(-sigma))
        t = torch.tensor([float(self.table.sigma_to_t(sigma))], dtype=torch.float32, device=x.device)
        noised = (x * float(c_in)).to(self.dtype)
        cond = self.unet(noised, t, encoder_hidden_states=self.cond, return_dict=False)[0].float()
        uncond = self.unet(noised, t, encoder_hidden_states=self.uncond, return_dict=False)[0].float()
        self.on_step()
        guided = uncond + float(self.cfg) * (cond - uncond)
        return guided * float(c_out) + x * float(c_skip)


class StepNoise:
    """The normals sd.cpp's rng object gives on its calls after the starting latents', one latent's worth a call."""

    def __init__(self, rng: str, seed: int, generator: torch.Generator | None, like: torch.Tensor):
        self.shape, self.device, self.generator, self.stream = like.shape, like.device, generator, None
        if rng in STREAMS:  # the first call drew the latents (make_noise): step noise starts at the second
            self.stream = Stream(rng, seed)
            self.stream.randn(like.numel())
        elif generator is None:
            raise ValueError(f"rng {rng} cannot draw the noise sd.cpp's ancestral samplers draw at every step: "
                             f"choose rng cpu, cuda-philox or one of {', '.join(STREAMS[:3])}")

    def __call__(self) -> torch.Tensor:
        if self.stream is not None:
            values = torch.from_numpy(self.stream.randn(int(np.prod(self.shape))).reshape(self.shape))
        else:  # torch's generator, left after the latents by make_noise
            values = cpu_noise.randn(self.shape, self.generator)
        return values.to(self.device, torch.float32)


def _euler(model, x, sigmas, noise=None, eta=ONE):
    """sd.cpp's sample_euler."""
    for i in range(len(sigmas) - 1):
        d = (x - model(x, sigmas[i])) / float(sigmas[i])
        x = x + d * float(F(sigmas[i + 1] - sigmas[i]))
    return x


def _heun(model, x, sigmas, noise=None, eta=ONE):
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


def _dpm2(model, x, sigmas, noise=None, eta=ONE):
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


def _dpmpp_2m(model, x, sigmas, noise=None, eta=ONE, v2: bool = False):
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


def ancestral_step(sigma_from: np.float32, sigma_to: np.float32, eta: np.float32) -> tuple[np.float32, np.float32]:
    """sd.cpp's get_ancestral_step (not the flow one): (sigma_down, sigma_up), float32 throughout."""
    if eta <= 0:
        return sigma_to, F(0)
    from_sq, to_sq, up = F(sigma_from * sigma_from), F(sigma_to * sigma_to), F(0)
    if from_sq > 0:
        up = min(sigma_to, F(eta * F(np.sqrt(max(F(F(to_sq * F(from_sq - to_sq)) / from_sq), F(0))))))
    down_sq = F(to_sq - F(up * up))
    return (F(np.sqrt(down_sq)) if down_sq > 0 else F(0)), up


def _euler_a(model, x, sigmas, noise=None, eta=ONE):
    """sd.cpp's sample_euler_ancestral (x from the ratio sigma_down / sigma, not from a derivative)."""
    for i in range(len(sigmas) - 1):
        sigma, sigma_to = sigmas[i], sigmas[i + 1]
        denoised = model(x, sigma)
        if sigma_to == 0:
            x = denoised
        elif eta == 0:  # `(1.0 - sigma_ratio)`: a double, made float by the tensor's scalar product
            ratio = F(sigma_to / sigma)
            x = x * float(ratio) + denoised * float(F(1.0 - float(ratio)))
        else:
            down, up = ancestral_step(sigma, sigma_to, eta)
            ratio = F(down / sigma)
            x = x * float(ratio) + denoised * float(F(F(1) - ratio))
            if up > 0:
                x = x + noise() * float(up)
    return x


def _dpmpp_2s_a(model, x, sigmas, noise=None, eta=ONE):
    """sd.cpp's sample_dpmpp_2s_ancestral (it draws at every step but the last, even when sigma_up is 0)."""
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        down, up = ancestral_step(sigmas[i], sigmas[i + 1], eta)
        if down == 0:
            x = denoised
        else:
            t, t_next = F(-np.log(sigmas[i])), F(-np.log(down))
            h = F(t_next - t)
            sigma_s, sigma_t = F(np.exp(-F(t + F(F(0.5) * h)))), F(np.exp(-t))
            x2 = x * float(F(sigma_s / sigma_t)) - denoised * float(F(F(np.exp(F(-h * F(0.5)))) - F(1)))
            denoised2 = model(x2, sigma_s)
            x = x * float(F(F(np.exp(-t_next)) / sigma_t)) - denoised2 * float(F(F(np.exp(-h)) - F(1)))
        if sigmas[i + 1] > 0:
            x = x + noise() * float(up)
    return x


SAMPLERS = {"euler": _euler, "heun": _heun, "dpm2": _dpm2, "dpm++2m": _dpmpp_2m,
            "dpm++2mv2": lambda model, x, sigmas, noise=None, eta=ONE: _dpmpp_2m(model, x, sigmas, v2=True),
            "euler_a": _euler_a, "dpm++2s_a": _dpmpp_2s_a}
DRAWING = ("euler_a", "dpm++2s_a")  # sd.cpp's samplers that draw step noise from the latents' rng stream


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
    method = recipe.scheduler.removesuffix(SDCPP)
    steps = StepNoise(recipe.rng, recipe.seed, noise.generator, x) if method in DRAWING else None
    latents = SAMPLERS[method](denoiser, x, sigmas, steps, F(recipe.eta))
    return latents.to(pipe.unet.dtype)
