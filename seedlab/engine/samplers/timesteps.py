"""A1111's own samplers on a diffusers model: DDIM, DDIM CFG++, PLMS and UniPC on its timesteps, and LCM.

A recipe whose `scheduler` is one of names.A1111_OWN_SAMPLERS ("DDIM (A1111)", ...) runs here, computed as
AUTOMATIC1111 1.10 computes it (modules/sd_samplers_timesteps.py, sd_samplers_timesteps_impl.py,
sd_samplers_lcm.py, models/diffusion/uni_pc/uni_pc.py, sd_samplers_cfg_denoiser.py):

- the timesteps: every 1000 // steps-th of the model's 1000, plus 1 (1, 51, ..., 951 for 20 steps; more than
  `steps` when it does not divide 1000); DDIM and PLMS step from each to the one below, the last to timestep 1,
  UniPC walks as many steps on DPM-Solver's continuous time (engine/samplers/unipc.py);
- the starting noise: the recipe's noise as it is (no sigma scaling); DDIM's own noise at Eta DDIM > 0: the image's
  generator continued, as A1111's k-diffusion samplers draw (a1111.StepNoise);
- the denoiser: the UNet's noise at the (integer, for UniPC fractional) timestep, CFG on the noise; v-prediction
  turned into noise with LDM's float64 square roots stored as float32; DDIM CFG++ guides at CFG / 12.5 and points
  the step along the negative prompt's noise;
- LCM: k-diffusion's way (sigmas from the recipe's schedule, noise times sigmas[0]) on LCM's 50 timesteps (19,
  39, ..., 999), its denoiser's consistency scalings, and fresh noise at every step but the last.
"""

from __future__ import annotations

import numpy as np
import torch

from ..recipe import Recipe
from . import sigmas as schedules
from . import unipc
from .a1111 import Guided, StepFn, StepNoise, schedule_sigmas, starting_noise
from .kdiffusion import NoiseFn
from .names import schedule_label, split_sampler

CFGPP_SCALE = 1 / 12.5  # DDIM CFG++: CFG from [0, 12.5] mapped to [0, 1] (model.cond_scale_miltiplier)
LCM_TIMESTEPS = 50  # LCMCompVisDenoiser's original_timesteps
UNIPC_ORDER = 3  # A1111's UniPC settings: order 3, variant bh1, skip type time_uniform, lower order final


class NoiseGuided(Guided):
    """CFGDenoiserTimesteps over CompVisTimesteps(V)Denoiser: the UNet's noise at a timestep, mixed by CFG. The
    negative prompt's noise of the last call is kept (last_noise_uncond, which DDIM CFG++ steps along)."""

    def __init__(self, unet, alphas_cumprod, cond, uncond, guidance: float, v_prediction: bool, on_step: StepFn):
        super().__init__(unet, None, cond, uncond, guidance, v_prediction, on_step)
        roots = np.sqrt(alphas_cumprod), np.sqrt(1. - alphas_cumprod)  # float64, as LDM's buffers are computed
        self.roots = tuple(torch.tensor(root, dtype=torch.float32) for root in roots)  # sqrt_(one_minus_)alphas_cumprod
        self.last_uncond: torch.Tensor | None = None

    def _denoise(self, x_in: torch.Tensor, t_in: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        output = self.unet(x_in, t_in, encoder_hidden_states=context, return_dict=False)[0]
        if self.v:  # predict_eps_from_z_and_v at the timestep truncated to an integer
            index = t_in.to(torch.int)
            alpha, sigma = (root.to(x_in.device)[index, None, None, None] for root in self.roots)
            output = alpha * output + sigma * x_in
        self.last_uncond = output[-1:]  # the negative prompt's: last in the batch, or the last call
        return output


class LCMSigmas(schedules.ModelSigmas):
    """LCMCompVisDenoiser's schedule: the model's levels at LCM's 50 timesteps, a sigma's timestep the nearest one's."""

    def __init__(self, alphas_cumprod: torch.Tensor):
        self.skip = len(alphas_cumprod) // LCM_TIMESTEPS
        valid = torch.zeros(LCM_TIMESTEPS, dtype=torch.float32)
        for x in range(LCM_TIMESTEPS):
            valid[LCM_TIMESTEPS - 1 - x] = alphas_cumprod[len(alphas_cumprod) - 1 - x * self.skip]
        super().__init__(valid)

    def sigma_to_t(self, sigma: torch.Tensor) -> torch.Tensor:
        nearest = (sigma.log() - self.log_sigmas[:, None]).abs().argmin(dim=0).view(sigma.shape)
        return nearest * self.skip + (self.skip - 1)

    def t_to_sigma(self, t: torch.Tensor) -> torch.Tensor:
        index = torch.clamp(((t - (self.skip - 1)) / self.skip).float(), min=0, max=(len(self.sigmas) - 1))
        return super().t_to_sigma(index)

    def uniform(self, n: int) -> torch.Tensor:
        """get_sigmas(n): n timesteps evenly spaced from the highest level's to the lowest's, then 0."""
        t = torch.linspace(self.sigma_to_t(self.sigmas[-1]), self.sigma_to_t(self.sigmas[0]), n)
        return torch.cat([self.t_to_sigma(t), t.new_zeros([1])])


class LCMGuided(Guided):
    """CFGDenoiserLCM over LCMCompVisDenoiser: eps scalings at LCM's timestep, then its consistency scalings (sigma
    data 0.5, the timestep times 10). The UNet's output is taken as noise whatever the model predicts, as A1111 does."""

    def _denoise(self, x_in: torch.Tensor, sigma_in: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        c_in = (1 / (sigma_in ** 2 + 1. ** 2) ** 0.5)[:, None, None, None]
        t = self.model.sigma_to_t(sigma_in)
        eps = self.unet(x_in * c_in, t, encoder_hidden_states=context, return_dict=False)[0]
        denoised = x_in + eps * (-sigma_in)[:, None, None, None]
        scaled = t[:, None, None, None] * 10.0
        c_skip = 0.5 ** 2 / (scaled ** 2 + 0.5 ** 2)
        return scaled / (scaled ** 2 + 0.5 ** 2) ** 0.5 * denoised + c_skip * x_in


def timesteps(steps: int) -> torch.Tensor:
    """CompVisSampler.get_timesteps: every 1000 // steps-th timestep from 1, up to 999 (int64)."""
    return torch.clip(torch.asarray(list(range(0, 1000, 1000 // steps))) + 1, 0, 999)


def _alphas(alphas_cumprod: torch.Tensor, steps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each timestep's alphas_cumprod, the one below's (float64; timestep 0's below the first) and sqrt(1 - a)."""
    alphas = alphas_cumprod[steps]
    below = alphas_cumprod[torch.nn.functional.pad(steps[:-1], pad=(1, 0))].to(torch.float64)
    return alphas, below, torch.sqrt(1 - alphas)


def ddim(model: NoiseGuided, x: torch.Tensor, steps: torch.Tensor, alphas_cumprod: torch.Tensor, noise: NoiseFn,
         eta: float = 0.0, cfgpp: bool = False) -> torch.Tensor:
    """sd_samplers_timesteps_impl.ddim and ddim_cfgpp (the direction along the negative prompt's noise)."""
    alphas, below, roots = _alphas(alphas_cumprod, steps)
    # A1111 divides a numpy array by a float32 tensor: torch computes it as the tensor's reciprocal times the array
    sigmas = eta * torch.sqrt((1 - alphas).reciprocal().double() * (1 - below) * (1 - alphas.double() / below))
    s_in, s_x = x.new_ones(x.shape[0]), x.new_ones((x.shape[0], 1, 1, 1))
    for index in range(len(steps) - 1, 0, -1):
        e_t = model(x, steps[index].item() * s_in)
        a_t, a_prev, sigma_t = alphas[index].item() * s_x, below[index].item() * s_x, sigmas[index].item() * s_x
        pred_x0 = (x - roots[index].item() * s_x * e_t) / a_t.sqrt()
        x = a_prev.sqrt() * pred_x0 + (1. - a_prev - sigma_t ** 2).sqrt() * (model.last_uncond if cfgpp else e_t)
        if eta:  # A1111 draws at eta 0 too and adds 0 times it: nothing to draw here
            x = x + sigma_t * noise()
    return x


def plms(model: NoiseGuided, x: torch.Tensor, steps: torch.Tensor, alphas_cumprod: torch.Tensor) -> torch.Tensor:
    """sd_samplers_timesteps_impl.plms: pseudo improved Euler first (two calls), then Adams-Bashforth of orders 2-4
    on the UNet's past noises."""
    alphas, below, roots = _alphas(alphas_cumprod, steps)
    s_in, s_x = x.new_ones([x.shape[0]]), x.new_ones((x.shape[0], 1, 1, 1))
    history: list[torch.Tensor] = []

    def step(e_t: torch.Tensor, index: int) -> torch.Tensor:
        a_t, a_prev = alphas[index].item() * s_x, below[index].item() * s_x
        pred_x0 = (x - roots[index].item() * s_x * e_t) / a_t.sqrt()
        return a_prev.sqrt() * pred_x0 + (1. - a_prev).sqrt() * e_t

    for index in range(len(steps) - 1, 0, -1):
        e_t = model(x, steps[index].item() * s_in)
        if not history:
            e_next = model(step(e_t, index), steps[max(index - 1, 0)].item() * s_in)
            e_prime = (e_t + e_next) / 2
        elif len(history) == 1:
            e_prime = (3 * e_t - history[-1]) / 2
        elif len(history) == 2:
            e_prime = (23 * e_t - 16 * history[-1] + 5 * history[-2]) / 12
        else:
            e_prime = (55 * e_t - 59 * history[-1] + 37 * history[-2] - 9 * history[-3]) / 24
        x = step(e_prime, index)
        history = [*history, e_t][-3:]
    return x


def a1111_unipc(model: NoiseGuided, x: torch.Tensor, steps: torch.Tensor, alphas_cumprod: torch.Tensor) -> torch.Tensor:
    """sd_samplers_timesteps_impl.unipc (txt2img): UniPC from t = 1 to 1 / 1000 in as many steps as timesteps."""
    schedule = unipc.DiscreteTime(alphas_cumprod.to(x.device))
    times = torch.linspace(1., 1. / schedule.total, len(steps) + 1).to(x.device)

    def data(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:  # UniPCCFG.model at (t - 1/1000) * 1000
        return unipc.data_from_noise(schedule, x, t, model(x, (t - 1. / schedule.total) * 1000.))

    return unipc.multistep(data, schedule, x, times, UNIPC_ORDER, "bh1", unipc.einsum)


def lcm(model: LCMGuided, x: torch.Tensor, sigmas: torch.Tensor, noise: NoiseFn) -> torch.Tensor:
    """sd_samplers_lcm.sample_lcm: each step the denoised latents, renoised to the next sigma (none after the last)."""
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        x = model(x, sigmas[i] * s_in)
        if sigmas[i + 1] > 0:
            x += sigmas[i + 1] * noise(sigmas[i], sigmas[i + 1])
    return x


def sample(pipe, model: schedules.ModelSigmas, recipe: Recipe, cond: torch.Tensor, uncond: torch.Tensor,
           on_step: StepFn) -> torch.Tensor:
    """a1111.sample for A1111's own samplers: the final latents of a recipe (`model` unused: their tables are their
    own, from the scheduler config)."""
    sampler, named = split_sampler(recipe.scheduler)
    schedule = named if recipe.schedule == "Automatic" else schedule_label(recipe.schedule) or recipe.schedule
    config = dict(pipe.scheduler.config)
    alphas64 = schedules.alphas_cumprod(config)
    alphas_cumprod = torch.tensor(alphas64, dtype=torch.float32)
    noise = starting_noise(pipe, recipe)
    x = noise.latents
    if sampler.function == "lcm":
        lcm_sigmas = LCMSigmas(alphas_cumprod)
        sigmas = schedule_sigmas(lcm_sigmas, sampler, schedule, recipe.num_inference_steps, recipe)
        x = x * sigmas[0]
        denoiser = LCMGuided(pipe.unet, lcm_sigmas, cond, uncond, recipe.guidance_scale, False, on_step)
        return lcm(denoiser, x, sigmas.to(x.device), StepNoise(recipe, noise.generator, x.shape, x))
    cfgpp = sampler.function == "ddim_cfgpp"
    denoiser = NoiseGuided(pipe.unet, alphas64, cond, uncond, recipe.guidance_scale * (CFGPP_SCALE if cfgpp else 1.0),
                           config.get("prediction_type") == "v_prediction", on_step)
    steps = timesteps(recipe.num_inference_steps)
    if sampler.function == "plms":
        return plms(denoiser, x, steps, alphas_cumprod)
    if sampler.function == "unipc":
        return a1111_unipc(denoiser, x, steps, alphas_cumprod)
    return ddim(denoiser, x, steps, alphas_cumprod, StepNoise(recipe, noise.generator, x.shape, x), recipe.eta_ddim,
                cfgpp)
