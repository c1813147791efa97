"""Apple's ml-stable-diffusion schedulers (swift/StableDiffusion/pipeline at e12202c), re-created step by step from
the Swift in numpy float32 (Swift's Float) and Python floats (Double), each function named after the Swift it copies:
the reference tests/test_apple_schedulers.py holds seedlab/engine/samplers/apple.py to, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import torch

F = np.float32


def linspace(start: np.float32, end: np.float32, count: int) -> list[np.float32]:
    """Scheduler.swift linspace: scale = (end - start) / Float(count - 1); Float(i) * scale + start."""
    scale = F(F(end - start) / F(count - 1))
    return [F(F(F(i) * scale) + start) for i in range(count)]


def scheduler_init(train: int = 1000, beta_start: float = 0.00085, beta_end: float = 0.012) -> dict:
    """PNDMScheduler.init / DPMSolverMultistepScheduler.init with betaSchedule .scaledLinear: betas, alphas,
    alphasCumProd (a Float running product), alpha_t = sqrt, sigma_t = sqrt(1 - .), lambda_t = log - log."""
    betas = [F(b * b) for b in linspace(F(F(beta_start) ** F(0.5)), F(F(beta_end) ** F(0.5)), train)]
    product, cumprod = None, []
    for beta in betas:
        alpha = F(F(1.0) - beta)
        product = alpha if product is None else F(product * alpha)
        cumprod.append(product)
    alpha_t = [F(np.sqrt(a)) for a in cumprod]
    sigma_t = [F(np.sqrt(F(F(1) - a))) for a in cumprod]
    lambda_t = [F(F(np.log(a)) - F(np.log(s))) for a, s in zip(alpha_t, sigma_t)]
    return {"train": train, "cumprod": cumprod, "alpha_t": alpha_t, "sigma_t": sigma_t, "lambda_t": lambda_t}


def weighted_sum(weights: list[float], values: list[np.ndarray]) -> np.ndarray:
    """Scheduler.weightedSum: scalars = 0; cblas_saxpy(Float(w), value, scalars) per term, fused (one rounding)."""
    scalars = np.zeros_like(values[0], dtype=F)
    for weight, value in zip(weights, values):
        scalars = (np.float64(F(weight)) * value.astype(np.float64) + scalars.astype(np.float64)).astype(F)
    return scalars


def convert_model_output(table: dict, model_output: np.ndarray, timestep: int, sample: np.ndarray) -> np.ndarray:
    """convertModelOutput: (sample[i] - modelOutput[i] * sigma_t) / alpha_t, Floats."""
    return ((sample - model_output * table["sigma_t"][timestep]) / table["alpha_t"][timestep]).astype(F)


class PNDM:
    """PNDMScheduler: init's timeSteps, step, previousSample."""

    def __init__(self, table: dict, step_count: int):
        self.table, self.step_count = table, step_count
        ratio = F(table["train"] // step_count)
        forward = [int(round(float(F(F(i) * ratio)))) + 1 for i in range(step_count)]
        steps = forward[:-1]
        steps.append(steps[-1])
        steps.append(forward[-1])
        self.time_steps = steps[::-1]
        self.counter, self.ets, self.current_sample, self.model_outputs = 0, [], None, []

    def step(self, output: np.ndarray, t: int, s: np.ndarray) -> np.ndarray:
        time_step, step_inc = t, self.table["train"] // self.step_count
        prev_step, model_output, sample = time_step - step_inc, output, s
        if self.counter != 1:
            if len(self.ets) > 3:
                self.ets = self.ets[len(self.ets) - 3:]
            self.ets.append(output)
        else:
            prev_step, time_step = time_step, time_step + step_inc
        ets = self.ets
        if len(ets) == 1 and self.counter == 0:
            self.current_sample = sample
        elif len(ets) == 1 and self.counter == 1:
            model_output = weighted_sum([1.0 / 2.0, 1.0 / 2.0], [output, ets[-1]])
            sample, self.current_sample = self.current_sample, None
        elif len(ets) == 2:
            model_output = weighted_sum([3.0 / 2.0, -1.0 / 2.0], [ets[-1], ets[-2]])
        elif len(ets) == 3:
            model_output = weighted_sum([23.0 / 12.0, -16.0 / 12.0, 5.0 / 12.0], [ets[-1], ets[-2], ets[-3]])
        else:
            model_output = weighted_sum([55.0 / 24.0, -59.0 / 24.0, 37 / 24.0, -9 / 24.0],
                                        [ets[-1], ets[-2], ets[-3], ets[-4]])
        self.model_outputs.append(convert_model_output(self.table, model_output, time_step, sample))
        prev_sample = self.previous_sample(sample, time_step, prev_step, model_output)
        self.counter += 1
        return prev_sample

    def previous_sample(self, sample, time_step: int, prev_step: int, model_output) -> np.ndarray:
        alpha_prod_t = self.table["cumprod"][time_step]
        alpha_prod_t_prev = self.table["cumprod"][max(0, prev_step)]
        beta_prod_t, beta_prod_t_prev = F(1 - alpha_prod_t), F(1 - alpha_prod_t_prev)
        sample_coeff = F(np.sqrt(F(alpha_prod_t_prev / alpha_prod_t)))
        denom = F(F(alpha_prod_t * F(np.sqrt(beta_prod_t_prev)))
                  + F(np.sqrt(F(F(alpha_prod_t * beta_prod_t) * alpha_prod_t_prev))))
        model_coeff = F(-F(alpha_prod_t_prev - alpha_prod_t) / denom)
        return weighted_sum([float(sample_coeff), float(model_coeff)], [sample, model_output])


class DPMSolverMultistep:
    """DPMSolverMultistepScheduler with timeStepSpacing .linspace: init, step, firstOrderUpdate, secondOrderUpdate."""

    def __init__(self, table: dict, step_count: int):
        self.table = table
        spaced = linspace(F(0), F(table["train"] - 1), step_count + 1)[1:][::-1]
        self.time_steps = [int(math.floor(float(v) + 0.5)) for v in spaced]  # Swift round: half away from zero
        self.lower_order_stepped, self.model_outputs = 0, []

    def first_order_update(self, model_output, timestep: int, prev_timestep: int, sample) -> np.ndarray:
        tb = self.table
        p_lambda_t, lambda_s = float(tb["lambda_t"][prev_timestep]), float(tb["lambda_t"][timestep])
        p_alpha_t = float(tb["alpha_t"][prev_timestep])
        p_sigma_t, sigma_s = float(tb["sigma_t"][prev_timestep]), float(tb["sigma_t"][timestep])
        h = p_lambda_t - lambda_s
        return weighted_sum([p_sigma_t / sigma_s, -p_alpha_t * (math.exp(-h) - 1)], [sample, model_output])

    def second_order_update(self, model_outputs, timesteps, t: int, sample) -> np.ndarray:
        tb = self.table
        s0, s1 = timesteps[-1], timesteps[-2]
        m0, m1 = model_outputs[-1], model_outputs[-2]
        p_lambda_t, lambda_s0, lambda_s1 = (float(tb["lambda_t"][t]), float(tb["lambda_t"][s0]),
                                            float(tb["lambda_t"][s1]))
        p_alpha_t = float(tb["alpha_t"][t])
        p_sigma_t, sigma_s0 = float(tb["sigma_t"][t]), float(tb["sigma_t"][s0])
        h, h_0 = p_lambda_t - lambda_s0, lambda_s0 - lambda_s1
        r0 = h_0 / h
        d1 = weighted_sum([1 / r0, -1 / r0], [m0, m1])
        return weighted_sum([p_sigma_t / sigma_s0, -p_alpha_t * (math.exp(-h) - 1),
                             -0.5 * p_alpha_t * (math.exp(-h) - 1)], [sample, m0, d1])

    def step(self, output, t: int, sample) -> np.ndarray:
        steps = self.time_steps
        step_index = steps.index(t) if t in steps else len(steps) - 1
        prev_timestep = 0 if step_index == len(steps) - 1 else steps[step_index + 1]
        lower_order_final = step_index == len(steps) - 1 and len(steps) < 15
        lower_order_second = step_index == len(steps) - 2 and len(steps) < 15
        lower_order = self.lower_order_stepped < 1 or lower_order_final or lower_order_second
        model_output = convert_model_output(self.table, output, t, sample)
        if len(self.model_outputs) == 2:
            self.model_outputs.pop(0)
        self.model_outputs.append(model_output)
        if lower_order:
            prev_sample = self.first_order_update(model_output, t, prev_timestep, sample)
        else:
            prev_sample = self.second_order_update(self.model_outputs, [steps[step_index - 1], t], prev_timestep,
                                                   sample)
        if self.lower_order_stepped < 2:
            self.lower_order_stepped += 1
        return prev_sample


def perform_guidance(noise: np.ndarray, guidance_scale: float) -> np.ndarray:
    """StableDiffusionPipeline.performGuidance: scalars[i] + g * (scalars[stride + i] - scalars[i]), Floats."""
    uncond, text = noise[:1], noise[1:]
    return (uncond + F(guidance_scale) * (text - uncond)).astype(F)


def generate_images(unet, cond, uncond, noise: torch.Tensor, steps: int, guidance: float, scheduler: str):
    """StableDiffusionPipeline.generateImages (txt2img, guidance >= 1, a batch-2 UNet): the latents it decodes,
    denoisedLatents = the scheduler's modelOutputs.last."""
    table = scheduler_init()
    sched = PNDM(table, steps) if scheduler == "PNDM" else DPMSolverMultistep(table, steps)
    latents = noise.float().numpy().astype(F) * F(1)  # generateLatentSamples: stdev initNoiseSigma = 1
    hidden = torch.cat([uncond, cond])
    for t in sched.time_steps:
        unet_input = torch.from_numpy(np.concatenate([latents, latents]))
        predicted = unet(unet_input, torch.tensor(float(t)), encoder_hidden_states=hidden, return_dict=False)[0]
        latents = sched.step(perform_guidance(predicted.float().numpy(), guidance), t, latents)
    return torch.from_numpy(sched.model_outputs[-1])
