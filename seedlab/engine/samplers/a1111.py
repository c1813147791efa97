"""A1111's samplers on a diffusers model: its sigmas, noise conventions, CFG and hires fix.

A recipe whose `scheduler` is an A1111 sampler name ("DPM++ 2M", "Euler a", "DPM++ 2M Karras") runs
here instead of through a diffusers scheduler, computed as AUTOMATIC1111 1.10 computes it
(modules/sd_samplers_kdiffusion.py, sd_schedulers.py, rng.py, processing.py):

- sigmas: the model's 1000 levels (alphas_cumprod as CompVis computes it), the recipe's schedule
  (Automatic: the sampler's own default), `discard_next_to_last_sigma` for DPM2 and 3M SDE;
- the starting noise: the recipe's noise (noise.py: seed, variation, seed resize, rng) times sigmas[0];
- every later draw (ancestral samplers, churn): the image's generator, continuing after the starting
  noise, or a generator seeded with seed + ENSD when "ENSD" is set; SDE samplers draw from a Brownian
  tree (torchsde) seeded with the seed, over the schedule's lowest and highest sigma;
- the denoiser: k-diffusion's CompVis wrapper (fractional timesteps, eps or v prediction), one UNet
  call on the prompt and the negative prompt together, CFG on the denoised latents;
- hires fix with a latent upscaler: the latents interpolated to the new size, fresh noise from the
  seed at that size, `Hires steps` spread over int(steps / denoising strength) sigmas and the tail run.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable

import torch

from .. import cpu_noise
from ..noise import make_noise, torchsde_randn
from ..philox import cuda_normal
from ..random_sources import SOURCES as TOOL_SOURCES  # Apple's and sd.cpp's noise: the starting latents only
from ..recipe import SCHEDULES, Recipe
from ..weights.model_info import runs_a1111
from . import kdiffusion
from . import names as sampler_names
from . import sigmas as schedules
from .names import (  # is_ksampler and KSampler: part of this module's API
    A1111_SAMPLERS,
    COMFY_SCHEDULES,
    DEFAULT_RHO,
    KSampler,
    is_apple,
    is_comfy_sampler,
    is_ksampler,  # noqa: F401 - re-exported: generation asks a1111.is_ksampler
    is_sdcpp,
    schedule_label,
    split_sampler,
)
from .upscale import upscale_latents

StepFn = Callable[[], None]  # called after every UNet call (progress, Stop)


def schedule_sigmas(model: schedules.ModelSigmas, sampler: KSampler, schedule: str, steps: int, recipe: Recipe,
                    *, sdxl: bool = False) -> torch.Tensor:
    """A1111's KDiffusionSampler.get_sigmas: the schedule's sigmas for `steps` steps, float32, ending in 0."""
    steps += 1 if sampler.discard_penultimate else 0
    label = sampler.schedule if schedule == "Automatic" else schedule
    low = recipe.schedule_sigma_min or model.sigma_min
    high = recipe.schedule_sigma_max or model.sigma_max
    rho = recipe.schedule_rho if recipe.schedule_rho and label in DEFAULT_RHO else DEFAULT_RHO.get(label)
    if label == "Uniform":
        sigmas = model.uniform(steps)
    elif label == "Karras":
        sigmas = schedules.karras(steps, low, high, rho)
    elif label == "Exponential":
        sigmas = schedules.exponential(steps, low, high)
    elif label == "Polyexponential":
        sigmas = schedules.polyexponential(steps, low, high, rho)
    elif label in ("SGM Uniform", "Normal"):
        sigmas = schedules.timestep_spaced(model, steps, low, high, sgm=label == "SGM Uniform")
    elif label == "KL Optimal":
        sigmas = schedules.kl_optimal(steps, low, high)
    elif label == "Align Your Steps":
        sigmas = schedules.align_your_steps(steps, schedules.AYS_SDXL if sdxl else schedules.AYS_SD15)
    elif label == "Simple":
        sigmas = schedules.simple(model, steps)
    elif label == "DDIM":
        sigmas = schedules.ddim_levels(model, steps)
    elif label == "Beta":
        sigmas = schedules.beta(steps, low, high)
    else:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r:.60}")
    if sampler.discard_penultimate:
        sigmas = torch.cat([sigmas[:-2], sigmas[-1:]])
    return sigmas


class StepNoise:
    """What `torch.randn_like` gives inside k-diffusion under A1111: the image's own noise source, continued.

    A1111 replaces k-diffusion's randn_like with its ImageRNG: after the starting noise, each call draws
    the next latent-sized tensor from the image's generator, or from one seeded with seed + ENSD.
    """

    def __init__(self, recipe: Recipe, generator: torch.Generator | None, shape: tuple[int, ...],
                 like: torch.Tensor):
        self.shape, self.like, self.rng = shape, like, recipe.rng
        seed = recipe.seed
        if recipe.eta_noise_seed_delta:
            seed += recipe.eta_noise_seed_delta
            if seed >= 2 ** 64:
                raise ValueError("seed + ENSD must be below 2**64 (torch's seed range)")
            if generator is not None:
                generator = torch.Generator(generator.device).manual_seed(seed)
        self.seed, self.generator = seed, generator
        self.offset = 0 if recipe.eta_noise_seed_delta else 1  # cuda-philox: draws after the first (A1111's NV)

    def __call__(self, sigma=None, sigma_next=None) -> torch.Tensor:
        if self.rng == "cuda-philox":
            values = cuda_normal(self.seed, math.prod(self.shape), self.offset).reshape(self.shape)
            self.offset += 1
            return torch.from_numpy(values).to(device=self.like.device, dtype=self.like.dtype)
        if self.generator is None:
            raise ValueError(f"rng {self.rng} cannot draw the noise this sampler needs at every step: choose rng cpu "
                             "or cuda-philox, or a sampler that draws nothing while stepping (DPM++ 2M, LMS, ...)")
        noise = cpu_noise.randn(self.shape, self.generator)
        return noise.to(device=self.like.device, dtype=self.like.dtype)


class BrownianNoise:
    """k-diffusion's BrownianTreeNoiseSampler as A1111 builds it: one torchsde tree seeded with the seed.

    The tree draws its own normals from seeds it derives; A1111 replaces torchsde's draw with its own
    noise source (modules/sd_samplers_kdiffusion.py, torchsde_randn): torch's CPU generator for RNG CPU,
    and for GPU and NV the CUDA generator's noise, which rng cuda-philox computes on any machine.
    """

    def __init__(self, x: torch.Tensor, sigmas: torch.Tensor, seed: int, rng: str):
        import torchsde  # imported when used

        _patch_torchsde()
        low, high = sigmas[sigmas > 0].min(), sigmas.max()
        self.rng = rng
        self.tree = torchsde.BrownianTree(low, torch.zeros_like(x[0]), high, entropy=seed)

    def __call__(self, sigma, sigma_next) -> torch.Tensor:
        low, high, sign = (sigma, sigma_next, 1) if sigma < sigma_next else (sigma_next, sigma, -1)
        _TREE_SOURCE.rng = self.rng
        try:
            increment = torch.stack([self.tree(low, high)]) * sign
        finally:
            _TREE_SOURCE.rng = None
        return increment / (sigma_next - sigma).abs().sqrt()


_TREE_SOURCE = threading.local()  # the rng of the Brownian tree this thread is querying


def _patch_torchsde() -> None:
    """Route torchsde's seeded draws through the querying tree's rng (torchsde's own draw otherwise)."""
    from torchsde._brownian import brownian_interval

    if getattr(brownian_interval._randn, "seedlab", False):
        return

    def seeded_randn(size, dtype, device, seed):
        rng = getattr(_TREE_SOURCE, "rng", None)
        if rng == "cuda-philox":
            values = cuda_normal(int(seed), math.prod(size), 0).reshape(tuple(size))
            return torch.from_numpy(values).to(device=device, dtype=dtype)
        if rng in ("cpu", "numpy-pcg64"):
            generator = torch.Generator("cpu").manual_seed(int(seed))
            return cpu_noise.randn(tuple(size), generator).to(device=device, dtype=dtype)
        return torchsde_randn(size, dtype, device, seed)

    seeded_randn.seedlab = True
    brownian_interval._randn = seeded_randn
    # torchsde warns when a query sits a float32 rounding outside the tree's interval, as A1111's does.
    warnings.filterwarnings("ignore", message="Should have (ta>=t0|tb<=t1)", category=UserWarning)


class Guided:
    """The CFG denoiser: A1111's CFGDenoiser over k-diffusion's CompVis(V)Denoiser, batch of prompt + negative."""

    def __init__(self, unet, model: schedules.ModelSigmas, cond: torch.Tensor, uncond: torch.Tensor,
                 guidance: float, v_prediction: bool, on_step: StepFn):
        self.unet, self.model, self.guidance, self.v = unet, model, guidance, v_prediction
        self.cond, self.uncond = cond, uncond
        # Prompts of different lengths (A1111's chunks) cannot share a call: one each, as A1111 runs them.
        self.context = torch.cat([cond, uncond]) if cond.shape[1] == uncond.shape[1] else None
        self.on_step = on_step

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        x_in, sigma_in = torch.cat([x, x]), torch.cat([sigma, sigma])
        if self.context is not None:
            out = self._denoise(x_in, sigma_in, self.context)
        else:
            out = torch.cat([self._denoise(x_in[:1], sigma_in[:1], self.cond),
                             self._denoise(x_in[1:], sigma_in[1:], self.uncond)])
        self.on_step()
        uncond = out[1:]
        return uncond + (out[:1] - uncond) * (1.0 * self.guidance)

    def _denoise(self, x_in: torch.Tensor, sigma_in: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """k-diffusion's CompVis(V)Denoiser: the UNet at the sigma's fractional timestep, as denoised latents."""
        c_in = (1 / (sigma_in ** 2 + 1.0 ** 2) ** 0.5)[:, None, None, None]
        t = self.model.sigma_to_t(sigma_in)
        output = self.unet(x_in * c_in, t, encoder_hidden_states=context, return_dict=False)[0]
        if self.v:
            c_skip = (1.0 ** 2 / (sigma_in ** 2 + 1.0 ** 2))[:, None, None, None]
            c_out = (-sigma_in * 1.0 / (sigma_in ** 2 + 1.0 ** 2) ** 0.5)[:, None, None, None]
            return output * c_out + x_in * c_skip
        return x_in + output * (-sigma_in)[:, None, None, None]


A1111 = "A1111"  # generation's marker for a recipe run here rather than by a diffusers scheduler


def model_sigmas(pipe) -> schedules.ModelSigmas:
    """The model's sigmas as A1111 computes them (from its scheduler's betas), interpolated timesteps."""
    return schedules.ModelSigmas.from_config(dict(pipe.scheduler.config))


def check_pipeline(pipe) -> None:
    """A1111's samplers run on Stable Diffusion 1.x / 2.x pipelines (model_info.runs_a1111 of the pipeline)."""
    denoiser = "unet" if hasattr(pipe, "unet") else "transformer"
    if not runs_a1111(type(pipe), denoiser, dict(pipe.scheduler.config)):
        raise ValueError(f"A1111 samplers run here on Stable Diffusion 1.x and 2.x pipelines, not on "
                         f"{type(pipe).__name__}: choose one of this model's diffusers schedulers")


def check_recipe(pipe, recipe: Recipe) -> None:
    """What an A1111 sampler's recipe needs beyond its fields' ranges: sampler names, the rng, the pipeline."""
    check_pipeline(pipe)
    if is_comfy_sampler(recipe.scheduler) or is_sdcpp(recipe.scheduler) or is_apple(recipe.scheduler):
        return _check_comfy(recipe) if is_comfy_sampler(recipe.scheduler) else None  # validation.sdcpp_/apple_errors
    errors = []
    for field, name in (("scheduler", recipe.scheduler), ("hires_sampler", recipe.hires_sampler)):
        if name and split_sampler(name) is None:
            errors.append(f"{field} must be one of {', '.join(A1111_SAMPLERS)} here, got {name!r:.60}")
    for field, name in (("schedule", recipe.schedule), ("hires_schedule", recipe.hires_schedule)):
        if name and schedule_label(name) is None:
            errors.append(f"{field} {name} is ComfyUI's: A1111's samplers take {', '.join(SCHEDULES)}")
    draws = [found[0] for name in (recipe.scheduler, recipe.hires_sampler) if name and (found := split_sampler(name))]
    if recipe.rng in ("numpy-pcg64", *TOOL_SOURCES) and any(draws_while_stepping(sampler, recipe)
                                                           or sampler.function in kdiffusion.TAKES_CHURN
                                                           for sampler in draws):  # churn draws even at 0
        errors.append(f"rng {recipe.rng} cannot draw the noise ancestral and SDE samplers need at every step: choose "
                      "rng cpu or cuda-philox, or a sampler that draws nothing while stepping")
    if errors:
        raise ValueError("; ".join(errors))


def _check_comfy(recipe: Recipe) -> None:
    """ComfyUI's samplers: its schedulers and its CPU noise, in both passes of a two-pass graph."""
    errors = []
    if recipe.schedule not in ("Automatic", *COMFY_SCHEDULES):
        errors.append(f"schedule must be one of {', '.join(COMFY_SCHEDULES)} for ComfyUI's {recipe.scheduler}, "
                      f"got {recipe.schedule}")
    if recipe.rng != "cpu":
        errors.append(f"rng must be cpu for ComfyUI's {recipe.scheduler} (ComfyUI draws its noise on the CPU)")
    if recipe.hires_sampler and recipe.hires_sampler not in sampler_names.COMFY_SAMPLERS:
        errors.append(f"hires_sampler must be empty (the same) or one of ComfyUI's samplers after ComfyUI's "
                      f"{recipe.scheduler}, got {recipe.hires_sampler!r:.60}")
    if recipe.hires_schedule not in ("", *COMFY_SCHEDULES):
        errors.append(f"hires_schedule must be empty (the same) or one of {', '.join(COMFY_SCHEDULES)} for ComfyUI's "
                      f"samplers, got {recipe.hires_schedule}")
    if errors:
        raise ValueError("; ".join(errors))


def draws_while_stepping(sampler: KSampler, recipe: Recipe) -> bool:
    """Whether one of A1111's samplers draws noise at its steps with this recipe's Eta, Sigma churn and Eta DDIM."""
    return (sampler.function in kdiffusion.TAKES_ETA and recipe.eta > 0) or (
        sampler.function in kdiffusion.TAKES_CHURN and recipe.s_churn > 0) or sampler.function in (
        "restart", "lcm") or (sampler.function.startswith("ddim") and recipe.eta_ddim > 0)


def sample(pipe, model: schedules.ModelSigmas, recipe: Recipe, cond: torch.Tensor, uncond: torch.Tensor,
           on_step: StepFn) -> torch.Tensor:
    """The final latents of a recipe (both passes when hires fix is on)."""
    sampler, schedule = _sampler_of(recipe.scheduler, recipe.schedule)
    noise = starting_noise(pipe, recipe)
    denoiser = Guided(pipe.unet, model, cond, uncond, recipe.guidance_scale,
                      pipe.scheduler.config.get("prediction_type") == "v_prediction", on_step)
    sdxl = hasattr(pipe, "text_encoder_2")
    sigmas = schedule_sigmas(model, sampler, schedule, recipe.num_inference_steps, recipe, sdxl=sdxl)
    x = noise.latents * sigmas[0]
    latents = _run(sampler, denoiser, x, sigmas, recipe, StepNoise(recipe, noise.generator, x.shape, x),
                   span=(model.sigma_min, model.sigma_max))  # DPM fast / adaptive: the model's whole range
    if not recipe.hires_scale:
        return latents
    return _hires(pipe, model, denoiser, latents, recipe, sdxl)


def starting_noise(pipe, recipe: Recipe):
    """The recipe's first noise (noise.make_noise: seed, variation, seed resize, rng) and its generator."""
    return make_noise(pipe, seed=recipe.seed, width=recipe.width, height=recipe.height, device=pipe.unet.device,
                      dtype=pipe.unet.dtype, rng=recipe.rng, variation_seed=recipe.variation_seed,
                      variation_strength=recipe.variation_strength, seed_resize_from=recipe.seed_resize_from)


def _hires(pipe, model, denoiser: Guided, latents: torch.Tensor, recipe: Recipe, sdxl: bool) -> torch.Tensor:
    """A1111's sample_hr_pass with a latent upscaler, then sample_img2img for the second pass."""
    sampler, schedule = _sampler_of(recipe.hires_sampler or recipe.scheduler, recipe.hires_schedule or recipe.schedule)
    width, height = recipe.hires_size
    factor = getattr(pipe, "vae_scale_factor", 8)
    latents = upscale_latents(latents, height // factor, width // factor, recipe.hires_upscaler)
    if recipe.hires_seed >= 0 or recipe.hires_cfg:  # the second pass's own seed (its noise) and guidance
        recipe = recipe.replace(seed=recipe.hires_noise_seed, guidance_scale=recipe.hires_cfg or recipe.guidance_scale)
        denoiser = Guided(denoiser.unet, model, denoiser.cond, denoiser.uncond, recipe.guidance_scale,
                          denoiser.v, denoiser.on_step)
    noise = make_noise(pipe, seed=recipe.seed, width=width, height=height, device=latents.device, dtype=latents.dtype,
                       rng=recipe.rng, variation_seed=recipe.variation_seed,
                       variation_strength=recipe.variation_strength, seed_resize_from=recipe.seed_resize_from)
    steps = recipe.hires_steps or recipe.num_inference_steps
    spread = int(steps / min(recipe.denoising_strength, 0.999))  # setup_img2img_steps with steps given
    sigmas = schedule_sigmas(model, sampler, schedule, spread, recipe, sdxl=sdxl)
    tail = sigmas[spread - (steps - 1) - 1:]
    x = latents + noise.latents * tail[0]
    step_noise = StepNoise(recipe, noise.generator, x.shape, x)
    return _run(sampler, denoiser, x, tail, recipe, step_noise, brownian_sigmas=sigmas)


def _run(sampler: KSampler, denoiser: Guided, x: torch.Tensor, sigmas: torch.Tensor, recipe: Recipe,
         step_noise: StepNoise, brownian_sigmas: torch.Tensor | None = None, span: tuple | None = None) -> torch.Tensor:
    """One pass of a sampler; `span` (sigma_min, sigma_max): what DPM fast and adaptive integrate between, when it
    is not the sigmas' own ends (A1111's sample passes the model's, sample_img2img the schedule's)."""
    function = kdiffusion.SAMPLER_FUNCTIONS[sampler.function]
    options: dict = {}
    noise: Callable = step_noise
    if sampler.function in kdiffusion.TAKES_ETA:
        options["eta"] = recipe.eta
    if sampler.function in kdiffusion.TAKES_CHURN:
        options.update(s_churn=recipe.s_churn, s_tmin=recipe.s_tmin, s_tmax=recipe.s_tmax or math.inf)
    if sampler.function in kdiffusion.TAKES_S_NOISE:  # A1111's sampler_extra_params
        options["s_noise"] = recipe.s_noise
    if sampler.brownian:
        noise = BrownianNoise(x, sigmas if brownian_sigmas is None else brownian_sigmas, recipe.seed, recipe.rng)
    if sampler.function == "dpmpp_2m_sde":
        options["solver_type"] = sampler.solver_type
    if sampler.function in kdiffusion.TAKES_SPAN and span is not None:
        options["sigma_min"], options["sigma_max"] = span
    if sampler.function == "dpm_adaptive":
        options["max_calls"] = sampler_names.adaptive_calls(len(sigmas) - 1)
    return function(denoiser, x, sigmas.to(x.device), noise, **options)


def _sampler_of(name: str, schedule: str) -> tuple[KSampler, str]:
    found = split_sampler(name)
    if found is None:
        raise ValueError(f"sampler must be one of {', '.join(A1111_SAMPLERS)}, got {name!r:.60}")
    sampler, named = found
    schedule = schedule_label(schedule) or schedule  # "karras": A1111's name for its Karras
    return sampler, schedule if schedule != "Automatic" else named
