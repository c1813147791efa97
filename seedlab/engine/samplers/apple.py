"""Apple's Core ML pipeline's Stable Diffusion schedulers, computed as its Swift computes them.

apple/ml-stable-diffusion (read at e12202c, swift/StableDiffusion/pipeline) is what Mochi Diffusion runs. Its
PNDMScheduler (Scheduler.swift) and DPMSolverMultistepScheduler re-create diffusers' classes but not their numbers:
betas, alphasCumProd, alpha_t, sigma_t and lambda_t are Swift Floats made from fixed defaults (scaled linear
0.00085..0.012, 1000 steps: the pipeline passes only stepCount), step coefficients are Floats (PNDM) or Doubles
(DPM-Solver++), and every sum of latents is Scheduler.weightedSum, one cblas_saxpy a term. Its DPM-Solver++ rounds
its linspace timesteps half away from zero and takes first-order steps at the last two steps (diffusers: the last),
stepping to alphasCumProd[0], not sigma 0. And the pipeline decodes the scheduler's last denoised latents
(modelOutputs.last, since Apple's 1.1.0), not the stepped ones. Spelled "PNDM (Apple)" and "DPM-Solver++ (Apple)" in a
recipe (samplers/names.py APPLE_SAMPLERS); docs/samplers.md lists the differences.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from ..noise import make_noise
from .names import APPLE

F = np.float32
TRAIN_STEPS = 1000
StepFn = Callable[[], None]
# PNDMScheduler.step's PLMS weights (Double literals, made Float by weightedSum) by the count of stored outputs.
PLMS = {2: (3.0 / 2.0, -1.0 / 2.0), 3: (23.0 / 12.0, -16.0 / 12.0, 5.0 / 12.0),
        4: (55.0 / 24.0, -59.0 / 24.0, 37 / 24.0, -9 / 24.0)}


class AppleTable:
    """The schedulers' init: Float betas (linspace of the roots, squared), alphasCumProd, alpha_t, sigma_t, lambda_t."""

    def __init__(self, beta_start: float = 0.00085, beta_end: float = 0.012):
        start, end = np.power(F(beta_start), F(0.5)), np.power(F(beta_end), F(0.5))
        scale = F(F(end - start) / F(TRAIN_STEPS - 1))  # linspace: Float(i) * scale + start
        roots = np.arange(TRAIN_STEPS, dtype=F) * scale + start
        alphas = F(1) - roots * roots
        self.alphas_cumprod = np.multiply.accumulate(alphas, dtype=F)  # a running Float product, in order
        self.alpha_t = np.sqrt(self.alphas_cumprod)
        self.sigma_t = np.sqrt(F(1) - self.alphas_cumprod)
        self.lambda_t = np.log(self.alpha_t) - np.log(self.sigma_t)

    def denoised(self, output: torch.Tensor, t: int, sample: torch.Tensor) -> torch.Tensor:
        """convertModelOutput: (sample - eps * sigma_t) / alpha_t, in Floats (eps prediction assumed)."""
        return (sample - output * float(self.sigma_t[t])) / float(self.alpha_t[t])


def weighted_sum(weights, values: list[torch.Tensor]) -> torch.Tensor:
    """Scheduler.weightedSum: zeros, then cblas_saxpy with Float(weight) for each term. Accelerate's saxpy rounds
    weight * value + sum once (a fused multiply-add); here in float64, whose product of two floats is exact."""
    total = torch.zeros_like(values[0], dtype=torch.float64)
    for weight, value in zip(weights, values):
        total = (value.double() * float(F(weight)) + total).float().double()
    return total.float()


def pndm_timesteps(n: int) -> list[int]:
    """PNDMScheduler.init's timeSteps: i * (1000 / n) + 1, the next-to-last twice (PLMS, no PRK), descending."""
    forward = [i * (TRAIN_STEPS // n) + 1 for i in range(n)]
    return (forward[:-1] + forward[-2:-1] + forward[-1:])[::-1]


def dpm_timesteps(n: int) -> list[int]:
    """DPMSolverMultistepScheduler.init's .linspace timeSteps: Float linspace(0, 999, n + 1) without its first,
    descending, each rounded by Swift's round (half away from zero; numpy's rounds half to even)."""
    scale = F(F(TRAIN_STEPS - 1) / F(n))
    return [math.floor(float(F(F(i) * scale)) + 0.5) for i in range(n, 0, -1)]


class ApplePNDM:
    """PNDMScheduler (Scheduler.swift): PLMS only, its state (counter, ets, currentSample) as Apple keeps it."""

    def __init__(self, table: AppleTable, n: int):
        self.table, self.step_inc, self.timesteps = table, TRAIN_STEPS // n, pndm_timesteps(n)
        self.counter, self.ets, self.current, self.denoised = 0, [], None, None

    def step(self, output: torch.Tensor, t: int, sample: torch.Tensor) -> torch.Tensor:
        """PNDMScheduler.step; `denoised` is its modelOutputs.last."""
        timestep, prev = t, t - self.step_inc
        if self.counter != 1:
            self.ets = self.ets[-3:] + [output]
        else:
            prev, timestep = timestep, timestep + self.step_inc
        if len(self.ets) == 1 and self.counter == 0:
            eps, self.current = output, sample
        elif len(self.ets) == 1 and self.counter == 1:
            eps = weighted_sum((1.0 / 2.0, 1.0 / 2.0), [output, self.ets[-1]])
            sample, self.current = self.current, None
        else:
            eps = weighted_sum(PLMS[len(self.ets)], self.ets[::-1])
        self.denoised = self.table.denoised(eps, timestep, sample)
        self.counter += 1
        return weighted_sum(self.coefficients(timestep, prev), [sample, eps])

    def coefficients(self, t: int, prev: int) -> tuple[np.float32, np.float32]:
        """previousSample's Float coefficients of formula (9) of the PNDM paper: sample's and the eps'."""
        alpha, alpha_prev = self.table.alphas_cumprod[t], self.table.alphas_cumprod[max(0, prev)]
        beta, beta_prev = F(1) - alpha, F(1) - alpha_prev
        sample_coeff = np.sqrt(F(alpha_prev / alpha))
        denominator = F(F(alpha * np.sqrt(beta_prev)) + np.sqrt(F(F(alpha * beta) * alpha_prev)))
        return sample_coeff, F(F(-F(alpha_prev - alpha)) / denominator)


class AppleDPMSolver:
    """DPMSolverMultistepScheduler (DPM-Solver++ 2M, midpoint, lower order at the first and the last two steps)."""

    def __init__(self, table: AppleTable, n: int):
        self.table, self.timesteps, self.outputs, self.stepped, self.denoised = table, dpm_timesteps(n), [], 0, None

    def step(self, output: torch.Tensor, t: int, sample: torch.Tensor) -> torch.Tensor:
        """DPMSolverMultistepScheduler.step; `denoised` is its modelOutputs.last."""
        count = len(self.timesteps)
        index = self.timesteps.index(t) if t in self.timesteps else count - 1
        prev = 0 if index == count - 1 else self.timesteps[index + 1]
        lower = self.stepped < 1 or (count < 15 and index >= count - 2)  # lowerOrderFinal, lowerOrderSecond
        self.denoised = self.table.denoised(output, t, sample)
        self.outputs = self.outputs[-1:] + [self.denoised]
        if lower:
            x = self.first_order(t, prev, sample)
        else:
            x = self.second_order(self.timesteps[index - 1], t, prev, sample)
        self.stepped = min(self.stepped + 1, 2)
        return x

    def first_order(self, s: int, t: int, sample: torch.Tensor) -> torch.Tensor:
        """firstOrderUpdate: DDIM's step from s to t, its coefficients in Doubles."""
        table = self.table
        h = float(table.lambda_t[t]) - float(table.lambda_t[s])
        weights = (float(table.sigma_t[t]) / float(table.sigma_t[s]), -float(table.alpha_t[t]) * (math.exp(-h) - 1))
        return weighted_sum(weights, [sample, self.outputs[-1]])

    def second_order(self, s1: int, s0: int, t: int, sample: torch.Tensor) -> torch.Tensor:
        """secondOrderUpdate: the midpoint step from s0 to t with the outputs at s0 and s1, in Doubles."""
        table = self.table
        lambda_t, lambda_s0, lambda_s1 = (float(table.lambda_t[step]) for step in (t, s0, s1))
        h, h_0 = lambda_t - lambda_s0, lambda_s0 - lambda_s1
        r0 = h_0 / h
        m0, m1 = self.outputs[-1], self.outputs[-2]
        d1 = weighted_sum((1 / r0, -1 / r0), [m0, m1])
        alpha_t, ratio = float(table.alpha_t[t]), float(table.sigma_t[t]) / float(table.sigma_t[s0])
        return weighted_sum((ratio, -alpha_t * (math.exp(-h) - 1), -0.5 * alpha_t * (math.exp(-h) - 1)),
                            [sample, m0, d1])


SCHEDULERS = {"PNDM" + APPLE: ApplePNDM, "DPM-Solver++" + APPLE: AppleDPMSolver}


def guided_noise(unet, x: torch.Tensor, t: int, cond, uncond, guidance: float) -> torch.Tensor:
    """generateImages' noise prediction: [uncond, cond] in one UNet call (two when their shapes differ, as Apple's
    serial path) mixed as uncond + guidance * (cond - uncond) in Floats; cond alone below guidance 1."""
    step = torch.tensor(float(t), dtype=torch.float32, device=x.device)
    x = x.to(unet.dtype)
    if guidance < 1.0:
        return unet(x, step, encoder_hidden_states=cond, return_dict=False)[0].float()
    if cond.shape == uncond.shape:
        both = unet(torch.cat([x, x]), step, encoder_hidden_states=torch.cat([uncond, cond]), return_dict=False)[0]
        no, yes = both.float().chunk(2)
    else:
        no = unet(x, step, encoder_hidden_states=uncond, return_dict=False)[0].float()
        yes = unet(x, step, encoder_hidden_states=cond, return_dict=False)[0].float()
    return no + float(F(guidance)) * (yes - no)


def sample(pipe, model_sigmas, recipe, cond: torch.Tensor, uncond: torch.Tensor, on_step: StepFn) -> torch.Tensor:
    """The latents Apple's pipeline decodes for a recipe whose scheduler is one of Apple's ("PNDM (Apple)"):
    generateImages on txt2img, latents = noise * initNoiseSigma (1), the scheduler's last denoised latents returned
    (A1111's sigma table, model_sigmas, is not used)."""
    if pipe.scheduler.config.get("prediction_type", "epsilon") != "epsilon":
        raise ValueError(f"{recipe.scheduler} assumes the model predicts noise (epsilon), as Apple's schedulers do; "
                         f"this model predicts {pipe.scheduler.config.get('prediction_type')}: choose another")
    scheduler = SCHEDULERS[recipe.scheduler](AppleTable(), recipe.num_inference_steps)
    noise = make_noise(pipe, seed=recipe.seed, width=recipe.width, height=recipe.height, device=pipe.unet.device,
                       dtype=torch.float32, rng=recipe.rng, variation_seed=recipe.variation_seed,
                       variation_strength=recipe.variation_strength, seed_resize_from=recipe.seed_resize_from)
    latents = noise.latents.float()  # times initNoiseSigma, 1 for both schedulers
    for t in scheduler.timesteps:
        output = guided_noise(pipe.unet, latents, t, cond, uncond, recipe.guidance_scale)
        on_step()
        latents = scheduler.step(output, t, latents)
    return scheduler.denoised.to(pipe.unet.dtype)
