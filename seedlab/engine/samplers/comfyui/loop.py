"""ComfyUI's KSampler on a diffusers model: its sigmas, noise conventions, CFG and sampler variants.

A recipe whose `scheduler` is a ComfyUI sampler ("euler", ...) and `schedule` a ComfyUI scheduler ("normal", ...)
runs here as ComfyUI runs an SD 1.x (eps) model on its CPU path; tests/test_comfy_samplers.py compares it bit for
bit with tests/reference/comfyui.py, which re-creates ComfyUI's sources. Where ComfyUI differs from A1111:
ModelSamplingDiscrete's sigma table (float64, stored as float32) and ComfyUI's schedulers; starting noise from a
CPU generator seeded with the seed, times sqrt(1 + sigma ** 2) at sigma_max; ancestral samplers' own generator
seeded with seed + 1 (CPU), SDE samplers' Brownian tree seeded with the seed; no draw without churn; the UNet at the
nearest integer timestep, one call on [negative, prompt] (the prompt alone when cfg is 1); and ComfyUI's rewrites of
some samplers (`x = denoised` last steps, the half-log-SNR DPM++ SDE samplers), k-diffusion's (kdiffusion.py) else.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from ... import cpu_noise
from ...noise import route_cpu_draws
from .. import kdiffusion, unipc
from .. import names as sampler_names
from .. import sigmas as schedules
from ..upscale import upscale_latents
from . import adams, cfgpp, multistep, singlestep
from . import kdiffusion as comfy_kdiffusion

COMFY_SAMPLERS: tuple[str, ...] = tuple(sampler_names.COMFY_SAMPLERS)
COMFY_SCHEDULES: tuple[str, ...] = sampler_names.COMFY_SCHEDULES
DISCARD_PENULTIMATE = frozenset(("dpm_2", "dpm_2_ancestral", "uni_pc", "uni_pc_bh2"))  # as comfy's KSampler lists them
StepFn = Callable[[], None]  # called after every model evaluation (progress, Stop)


class ComfyModelSigmas:
    """ModelSamplingDiscrete for an eps model: float32 sigmas and log sigmas computed in float64."""

    def __init__(self, config: dict):
        if (config.get("prediction_type", "epsilon") != "epsilon" or config.get("rescale_betas_zero_snr")
                or config.get("trained_betas") is not None):
            raise ValueError("ComfyUI's samplers run here on eps models (no zero-terminal SNR, no trained_betas)")
        start, end = config.get("beta_start", 0.00085), config.get("beta_end", 0.012)
        count, kind = config.get("num_train_timesteps", 1000), config.get("beta_schedule", "scaled_linear")
        if kind == "scaled_linear":  # ComfyUI's "linear" make_beta_schedule
            betas = torch.linspace(start ** 0.5, end ** 0.5, count, dtype=torch.float64) ** 2
        elif kind == "linear":  # ComfyUI's "sqrt_linear"
            betas = torch.linspace(start, end, count, dtype=torch.float64)
        else:
            raise ValueError(f"the beta schedule {kind!r:.40} has no ComfyUI sigmas: choose a diffusers scheduler")
        alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        table = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5
        self.sigmas, self.log_sigmas = table.float(), table.log().float()

    def timestep(self, sigma: torch.Tensor) -> torch.Tensor:
        """The nearest level's index (int64), as ComfyUI quantizes the UNet's timestep."""
        log_sigmas = self.log_sigmas.to(sigma.device)
        return (sigma.log() - log_sigmas[:, None]).abs().argmin(dim=0).view(sigma.shape)

    def sigma(self, timestep: torch.Tensor) -> torch.Tensor:
        """The sigma of a (fractional) timestep, interpolated in log sigma."""
        t = torch.clamp(timestep.float(), min=0, max=len(self.sigmas) - 1)
        low, high, weight = t.floor().long(), t.ceil().long(), t.frac()
        return ((1 - weight) * self.log_sigmas[low] + weight * self.log_sigmas[high]).exp()

    def percent_sigma(self, percent: float) -> float:
        """percent_to_sigma: the sigma `percent` of the way through the model's 999 timesteps (0 < percent < 1)."""
        return self.sigma(torch.tensor((1.0 - percent) * 999.0)).item()


def _normal(ms: ComfyModelSigmas, n: int, sgm: bool = False) -> torch.Tensor:
    """"normal" and "sgm_uniform": evenly spaced quantized timesteps from sigma_max's to sigma_min's."""
    start, end = ms.timestep(ms.sigmas[-1]), ms.timestep(ms.sigmas[0])
    if sgm:
        return torch.FloatTensor([float(ms.sigma(t)) for t in torch.linspace(start, end, n + 1)[:-1]] + [0.0])
    zero = not math.isclose(float(ms.sigma(end)), 0, abs_tol=0.00001)  # else one more step, no trailing 0
    timesteps = torch.linspace(start, end, n if zero else n + 1)
    return torch.FloatTensor([float(ms.sigma(t)) for t in timesteps] + ([0.0] if zero else []))


def _beta(ms: ComfyModelSigmas, n: int, alpha: float = 0.6, beta: float = 0.6) -> torch.Tensor:
    """Table levels at a Beta distribution's quantiles, a repeat of the previous index dropped."""
    from scipy import stats  # imported when used: scipy is heavy

    last = len(ms.sigmas) - 1
    indices = np.rint(stats.beta.ppf(1 - np.linspace(0, 1, n, endpoint=False), alpha, beta) * last)
    levels, previous = [], -1
    for index in indices:  # a repeat of the previous index is dropped
        levels += [float(ms.sigmas[int(index)])] if index != previous else []
        previous = index
    return torch.FloatTensor(levels + [0.0])


def _linear_quadratic(ms: ComfyModelSigmas, n: int, threshold: float = 0.025) -> torch.Tensor:
    """Linear in the first half of the steps up to `threshold`, quadratic after it, times sigma_max."""
    if n == 1:
        return torch.FloatTensor([1.0, 0.0]) * ms.sigmas[-1]
    linear = n // 2
    diff, quadratic = linear - threshold * n, n - linear
    quad_coef, lin_coef = diff / (linear * quadratic ** 2), threshold / linear - 2 * diff / (quadratic ** 2)
    const = quad_coef * (linear ** 2)
    ramp = [k * threshold / linear for k in range(linear)]
    ramp += [quad_coef * (k ** 2) + lin_coef * k + const for k in range(linear, n)]
    return torch.FloatTensor([1.0 - v for v in ramp + [1.0]]) * ms.sigmas[-1]


def _kl_optimal(n: int, sigma_min: float, sigma_max: float) -> torch.Tensor:
    """ComfyUI's kl_optimal: n sigmas evenly spaced in arctan(sigma), then 0."""
    ramp = torch.arange(n, dtype=torch.float).div_(n - 1)
    out = ramp.new_zeros(n + 1)
    out[:-1] = (ramp * math.atan(sigma_min) + (1 - ramp) * math.atan(sigma_max)).tan_()
    return out


def _schedule(ms: ComfyModelSigmas, schedule: str, n: int) -> torch.Tensor:
    """comfy.samplers.calculate_sigmas: `n` steps of a scheduler, float32, ending in 0."""
    low, high = float(ms.sigmas[0]), float(ms.sigmas[-1])
    table = {
        "normal": lambda: _normal(ms, n), "sgm_uniform": lambda: _normal(ms, n, sgm=True),
        "karras": lambda: schedules.karras(n, low, high), "exponential": lambda: schedules.exponential(n, low, high),
        "simple": lambda: schedules.simple(ms, n),
        "ddim_uniform": lambda: schedules.ddim_levels(ms, n),  # ComfyUI's while the second level is above 1e-5
        "beta": lambda: _beta(ms, n), "linear_quadratic": lambda: _linear_quadratic(ms, n),
        "kl_optimal": lambda: _kl_optimal(n, low, high),
    }
    if schedule not in table:
        raise ValueError(f"schedule must be one of {', '.join(COMFY_SCHEDULES)}, got {schedule!r:.60}")
    return table[schedule]()


def _ksampler_sigmas(ms: ComfyModelSigmas, sampler: str, schedule: str, steps: int, denoise: float) -> torch.Tensor:
    if sampler not in COMFY_SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(COMFY_SAMPLERS)}, got {sampler!r:.60}")
    discard, full = sampler in DISCARD_PENULTIMATE, denoise is None or denoise > 0.9999
    if not full and denoise <= 0.0:
        return torch.FloatTensor([])
    n = steps if full else int(steps / denoise)  # denoise < 1: the last steps of a longer schedule
    sigmas = _schedule(ms, schedule, n + 1 if discard else n)
    sigmas = torch.cat([sigmas[:-2], sigmas[-1:]]) if discard else sigmas
    return sigmas if full else sigmas[-(steps + 1):]


def comfy_sigmas(config: dict, sampler: str, schedule: str, steps: int, denoise: float = 1.0) -> torch.Tensor:
    """KSampler's sigmas (ComfyUI's model sigma table from a diffusers scheduler config; discard-penultimate;
    denoise tail)."""
    return _ksampler_sigmas(ComfyModelSigmas(config), sampler, schedule, steps, denoise)


def _can_concat(a: torch.Tensor, b: torch.Tensor) -> bool:
    """CONDCrossAttn.can_concat: equal shapes, or lengths whose lcm is at most 4 times the shorter."""
    same = a.shape[0] == b.shape[0] and a.shape[2] == b.shape[2]
    return a.shape == b.shape or same and math.lcm(a.shape[1], b.shape[1]) // min(a.shape[1], b.shape[1]) <= 4


class ComfyGuided:
    """KSamplerX0Inpaint -> CFGGuider -> sampling_function without masks or areas: ComfyUI's CFG denoiser. With
    keep_uncond (the CFG++ samplers' post-CFG hook) every call keeps the negative prompt's prediction in
    uncond_denoised and evaluates it at cfg 1 too (disable_cfg1_optimization)."""

    def __init__(self, unet, ms: ComfyModelSigmas, cond, uncond, cfg: float, on_step: StepFn, keep_uncond=False):
        self.unet, self.ms, self.cfg, self.on_step, self.keep_uncond = unet, ms, cfg, on_step, keep_uncond
        self.dtype = unet.dtype  # read once: a module's dtype walks its parameters (6% of a small image's time)
        self.cond, self.uncond = cond.to(self.dtype), uncond.to(self.dtype)
        self.uncond_denoised: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        if math.isclose(self.cfg, 1.0) and not self.keep_uncond:  # the negative prompt is not evaluated at all
            cond_pred, uncond_pred = self._denoise(x, sigma, self.cond), torch.zeros_like(x)
        elif _can_concat(self.cond, self.uncond):  # calc_cond_batch pops the pair as [uncond, cond]
            length = math.lcm(self.uncond.shape[1], self.cond.shape[1])
            context = torch.cat([c.repeat(1, length // c.shape[1], 1) if c.shape[1] < length else c
                                 for c in (self.uncond, self.cond)])
            uncond_pred, cond_pred = self._denoise(torch.cat([x, x]), torch.cat([sigma, sigma]), context).chunk(2)
        else:
            cond_pred, uncond_pred = self._denoise(x, sigma, self.cond), self._denoise(x, sigma, self.uncond)
        self.on_step()
        self.uncond_denoised = uncond_pred
        return uncond_pred + (cond_pred - uncond_pred) * self.cfg

    def _denoise(self, x: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """BaseModel._apply_model with EPS: calculate_input, quantized timestep, calculate_denoised."""
        shaped = sigma.view(()) if sigma.nelement() == 1 else sigma.view(sigma.shape[:1] + (1,) * (x.ndim - 1))
        xc = (x / (shaped ** 2 + 1.0 ** 2) ** 0.5).to(self.dtype)
        timestep = self.ms.timestep(sigma).float()
        output = self.unet(xc, timestep, encoder_hidden_states=context, return_dict=False)[0]
        return x - output.float() * shaped


def _no_draw(sigma=None, sigma_next=None) -> float:  # without churn ComfyUI's euler, heun and dpm_2 draw nothing
    return 0.0


def _seeded_noise(x: torch.Tensor, seed: int, offset: int = 1) -> kdiffusion.NoiseFn:
    """default_noise_sampler(x, seed): a generator of the sampler's own, seeded with seed + 1 on the CPU (ComfyUI
    since PR 11528; `offset` 0: with the seed, as ComfyUI did before it)."""
    generator = torch.Generator(device=x.device).manual_seed(seed + offset if x.device.type == "cpu" else seed)
    def draw(sigma=None, sigma_next=None) -> torch.Tensor:
        return cpu_noise.randn(x.size(), generator, x.dtype)  # torch.randn on the generator's device, x's
    return draw


class ComfyBrownianNoise:
    """ComfyUI's BrownianTreeNoiseSampler: a torchsde tree seeded with the seed, on the CPU unless "_gpu"."""

    def __init__(self, x: torch.Tensor, sigmas: torch.Tensor, seed: int, cpu: bool):
        import torchsde  # imported when used
        route_cpu_draws()  # the tree's CPU draws by cpu_noise
        low, high = torch.as_tensor(sigmas[sigmas > 0].min()), torch.as_tensor(sigmas.max())
        low, high, self.sign = (low, high, 1) if low < high else (high, low, -1)
        start, self.cpu = torch.zeros_like(x), cpu
        if cpu:
            low, start, high = low.detach().cpu(), start.detach().cpu(), high.detach().cpu()
        self.tree = torchsde.BrownianTree(low, start, high, entropy=seed)

    def __call__(self, sigma, sigma_next) -> torch.Tensor:
        t0, t1 = torch.as_tensor(sigma), torch.as_tensor(sigma_next)
        a, b, sign = (t0, t1, 1) if t0 < t1 else (t1, t0, -1)
        device, dtype = a.device, a.dtype
        if self.cpu:
            a, b = a.detach().cpu().float(), b.detach().cpu().float()
        w = torch.stack([self.tree(a, b)]).to(device=device, dtype=dtype) * (self.sign * sign)
        return w[0] / (t1 - t0).abs().sqrt()


# The rest of ComfyUI's KSAMPLER_NAMES (October 2025; exp_heun_2_x0 and _sde: December 2025): the function
# (cfgpp.py, singlestep.py, multistep.py, adams.py) and its keywords; those that draw noise draw it from
# default_noise_sampler (_seeded_noise).
OTHER_SAMPLERS = {
    "euler_cfg_pp": (cfgpp.euler_ancestral_cfg_pp, {"eta": 0.0, "s_noise": 0.0}),
    "euler_ancestral_cfg_pp": (cfgpp.euler_ancestral_cfg_pp, {}), "dpmpp_2m_cfg_pp": (cfgpp.dpmpp_2m_cfg_pp, {}),
    "dpmpp_2s_ancestral_cfg_pp": (cfgpp.dpmpp_2s_ancestral_cfg_pp, {}), "heunpp2": (singlestep.heunpp2, {}),
    "ddpm": (singlestep.ddpm, {}), "lcm": (singlestep.lcm, {}), "seeds_2": (singlestep.seeds_2, {}),
    "seeds_3": (singlestep.seeds_3, {}),
    "exp_heun_2_x0": (singlestep.seeds_2, {"eta": 0.0, "s_noise": 0.0, "r": 1.0, "solver": "phi_2"}),
    "exp_heun_2_x0_sde": (singlestep.seeds_2, {"r": 1.0, "solver": "phi_2"}), "ipndm": (multistep.ipndm, {}),
    "ipndm_v": (multistep.ipndm_v, {}),
    "res_multistep": (multistep.res_multistep, {}), "res_multistep_cfg_pp": (multistep.res_multistep, {"cfg_pp": True}),
    "res_multistep_ancestral": (multistep.res_multistep, {"eta": 1.0}),
    "res_multistep_ancestral_cfg_pp": (multistep.res_multistep, {"eta": 1.0, "cfg_pp": True}),
    "gradient_estimation": (multistep.gradient_estimation, {}),
    "gradient_estimation_cfg_pp": (multistep.gradient_estimation, {"cfg_pp": True}), "er_sde": (multistep.er_sde, {}),
    "deis": (adams.deis, {}), "sa_solver": (adams.sa_solver, {}),
    "sa_solver_pece": (adams.sa_solver, {"use_pece": True}),
}


def _run_sampler(name: str, model, x: torch.Tensor, sigmas: torch.Tensor, seed: int, offset: int = 1) -> torch.Tensor:
    """sampler_object(name) run on x (ComfyUI's "ddim" is its euler); `seed` seeds the sampler's own noise."""
    base = name.removesuffix("_gpu")
    if base in ("euler", "ddim", "heun", "dpm_2"):
        function = kdiffusion.SAMPLER_FUNCTIONS["euler" if base == "ddim" else base]
        return function(model, x, sigmas, _no_draw, s_churn=0.0, s_tmin=0.0, s_tmax=math.inf, s_noise=1.0)
    if base in ("euler_ancestral", "dpm_2_ancestral", "dpmpp_2s_ancestral"):
        function = comfy_kdiffusion.euler_ancestral if base == "euler_ancestral" else kdiffusion.SAMPLER_FUNCTIONS[base]
        return function(model, x, sigmas, _seeded_noise(x, seed, offset))
    if base in ("lms", "dpmpp_2m"):
        return (comfy_kdiffusion.lms(model, x, sigmas) if base == "lms"
                else kdiffusion.dpmpp_2m(model, x, sigmas, _no_draw))
    if base in ("uni_pc", "uni_pc_bh2"):  # KSAMPLER(sample_unipc), KSAMPLER(sample_unipc_bh2)
        return unipc.comfy_unipc(model, x, sigmas, "bh2" if base == "uni_pc_bh2" else "bh1")
    if base in OTHER_SAMPLERS:
        function, options = OTHER_SAMPLERS[base]
        if base.startswith("sa_solver"):  # noise between the model's sigmas at 20% and 80% of its timesteps
            options = {**options, "interval": (model.ms.percent_sigma(0.2), model.ms.percent_sigma(0.8))}
        return function(model, x, sigmas, _seeded_noise(x, seed, offset), **options)
    if len(sigmas) <= 1:
        return x
    if base in ("dpm_fast", "dpm_adaptive"):  # ksampler(): from sigmas[0] to the last sigma above 0, at eta 0
        bound = {"max_calls": sampler_names.adaptive_calls(len(sigmas) - 1)} if base == "dpm_adaptive" else {}
        return kdiffusion.SAMPLER_FUNCTIONS[base](model, x, sigmas, _no_draw, **bound)
    tree = ComfyBrownianNoise(x, sigmas, seed, cpu=base == name)  # sampler_names.COMFY_BROWNIAN
    if base == "dpmpp_sde":
        return comfy_kdiffusion.dpmpp_sde(model, x, sigmas, tree)
    return comfy_kdiffusion.dpmpp_multistep_sde(model, x, sigmas, tree, order=3 if base == "dpmpp_3m_sde" else 2,
                                              heun=base == "dpmpp_2m_sde_heun")


SD1_SCALE = 0.18215  # comfy/latent_formats.py SD15: a LATENT between nodes is the sampled latents / this


def sample_comfy(pipe, recipe, cond: torch.Tensor, uncond: torch.Tensor, on_step: StepFn) -> torch.Tensor:
    """Model-space latents (before any 1/0.18215), txt2img from an empty latent: ComfyUI's KSampler with
    recipe.scheduler = sampler_name, recipe.schedule = scheduler ("Automatic" means "normal"),
    recipe.num_inference_steps = steps, recipe.guidance_scale = cfg, recipe.seed = seed; with hires fix
    (hires_scale) a two-pass graph: LatentUpscale(By) with hires_upscaler's method, then a second KSampler at
    denoise = denoising_strength with the hires sampler, schedule, steps, cfg and seed (each "the same" unset).

    Latent shape (1, in_channels, height // vae_scale_factor, width // vae_scale_factor): drawn on the CPU and
    sampled in float32 on the UNet's device as ComfyUI does, returned in the UNet's dtype. on_step() is called
    after every model evaluation (one UNet call on [negative, prompt]).
    """
    if recipe.rng != "cpu":
        raise ValueError(f"ComfyUI's samplers draw their noise on the CPU: rng must be cpu, got {recipe.rng!r:.40}")
    ms = ComfyModelSigmas(dict(pipe.scheduler.config))
    factor, channels = getattr(pipe, "vae_scale_factor", 8), pipe.unet.config.in_channels
    latent = torch.zeros((1, channels, recipe.height // factor, recipe.width // factor), dtype=torch.float32)
    schedule = "normal" if recipe.schedule == "Automatic" else recipe.schedule
    offset = 1 if recipe.comfyui_noise == "seed+1" else 0
    x = _ksampler(pipe, ms, cond, uncond, on_step, latent, recipe.scheduler, schedule, recipe.num_inference_steps,
                  recipe.guidance_scale, recipe.seed, 1.0, (recipe.start_step, recipe.end_step), offset)
    if not recipe.hires_scale:
        return x.to(pipe.unet.dtype)
    width, height = recipe.hires_size
    upscaled = upscale_latents(x.float().cpu() / SD1_SCALE, height // factor, width // factor,
                               recipe.hires_upscaler)  # LatentUpscale on ComfyUI's LATENT
    x = _ksampler(pipe, ms, cond, uncond, on_step, upscaled * SD1_SCALE, recipe.hires_sampler or recipe.scheduler,
                  recipe.hires_schedule or schedule, recipe.hires_steps or recipe.num_inference_steps,
                  recipe.hires_cfg or recipe.guidance_scale, recipe.hires_noise_seed, recipe.denoising_strength,
                  offset=offset)
    return x.to(pipe.unet.dtype)


def part(sigmas: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """KSampler.sample's start_step and last_step (0: unset), force_full_denoise: KSamplerAdvanced without
    leftover noise ends its shortened schedule at 0. Empty when no step is left."""
    if end and end < len(sigmas) - 1:
        sigmas = sigmas[:end + 1].clone()
        sigmas[-1] = 0
    if start:
        return sigmas[start:] if start < len(sigmas) - 1 else sigmas[:0]
    return sigmas


def _ksampler(pipe, ms: ComfyModelSigmas, cond, uncond, on_step: StepFn, latent: torch.Tensor, sampler: str,
              schedule: str, steps: int, cfg: float, seed: int, denoise: float,
              steps_run: tuple[int, int] = (0, 0), offset: int = 1) -> torch.Tensor:
    """One KSampler node on a model-space latent (zeros: an empty latent), float32 on the UNet's device;
    `steps_run` is KSamplerAdvanced's (start_at_step, end_at_step), 0 for unset."""
    sigmas = part(_ksampler_sigmas(ms, sampler, schedule, steps, denoise), *steps_run)
    generator = torch.Generator("cpu").manual_seed(seed)  # comfy.sample.prepare_noise
    noise = cpu_noise.randn(latent.size(), generator, latent.dtype)
    if len(sigmas) == 0:
        return latent.to(pipe.unet.device)
    device, sigma_max, first = pipe.unet.device, float(ms.sigmas[-1]), float(sigmas[0])
    sigma = sigmas[0].to(device)  # noise_scaling, with max_denoise when the schedule starts at sigma_max
    max_denoise = math.isclose(sigma_max, first, rel_tol=1e-05) or first > sigma_max
    x = noise.to(device) * (torch.sqrt(1.0 + sigma ** 2.0) if max_denoise else sigma)
    x += latent.to(device)
    model = ComfyGuided(pipe.unet, ms, cond, uncond, cfg, on_step, keep_uncond=sampler.endswith("_cfg_pp"))
    return _run_sampler(sampler, model, x, sigmas.to(device), seed, offset)
