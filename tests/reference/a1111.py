"""A reference re-creation of how AUTOMATIC1111 stable-diffusion-webui 1.10 drives k-diffusion for txt2img.

SeedLab's own samplers are tested pixel for pixel against this file, so it follows A1111's sources step by
step rather than a description of them; the names in brackets say which A1111 function each step re-creates:

- modules/processing.py: process_images (fix_p_invalid_sampler_and_scheduler), process_images_inner (the
  ImageRNG of shape (4, H/8, W/8)), StableDiffusionProcessing.fill_fields_from_opts (s_* defaults),
  StableDiffusionProcessingTxt2Img.init / calculate_target_resolution / sample / sample_hr_pass.
- modules/sd_samplers.py: get_sampler_and_scheduler (pre-1.9 names such as "DPM++ 2M Karras").
- modules/sd_samplers_kdiffusion.py: samplers_k_diffusion, sampler_extra_params, KDiffusionSampler.get_sigmas,
  sample, sample_img2img (DPM fast and DPM adaptive get sigma_min, sigma_max and n instead of sigmas).
- modules/sd_samplers_extra.py: restart_sampler (the "Restart" sampler, A1111's own function).
- modules/sd_samplers_common.py: setup_img2img_steps, TorchHijack, Sampler.initialize, create_noise_sampler,
  replace_torchsde_browinan.
- modules/sd_samplers_cfg_denoiser.py: CFGDenoiser.forward and combine_denoised.
- modules/sd_schedulers.py: every schedule type, and its replacement of k_diffusion.sampling.to_d.
- modules/rng.py: ImageRNG.first / next and eta_noise_seed_delta (ENSD).
- modules/shared.py: latent_upscale_modes.

The actual sampler steps are k-diffusion's own functions: `load_k_diffusion()` loads the installed package's
`sampling.py` and `external.py` (k-diffusion's `__init__` and `utils` import packages that are not installed)
as modules of a private stub package, so monkeypatching them here never touches any other k_diffusion import.

Everything A1111 takes from its settings is fixed at the 1.10 defaults below (`A1111_OPTS`), except the
settings the interface exposes (eta, ENSD, s_churn/s_tmin/s_tmax/s_noise, sigma min/max, rho).
Random numbers are A1111's "CPU" RNG source: every draw comes from a torch.Generator('cpu').
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import threading
import types
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import stats

A1111_VERSION = "1.10"
K_DIFFUSION_PACKAGE = "_a1111_reference_k_diffusion"  # private name of the stub package the sampler code lives in

# --- settings (modules/shared_options.py defaults in 1.10) -------------------------------------------------
A1111_OPTS = {
    "randn_source": "CPU",  # the interface's RNG: torch.Generator('cpu')
    "eta_ancestral": 1.0,  # default eta of every k-diffusion sampler that takes one (Sampler.eta_option_field)
    "always_discard_next_to_last_sigma": False,
    "use_old_karras_scheduler_sigmas": False,
    "sgm_noise_multiplier": False,  # txt2img noise is scaled by sigmas[0], not sqrt(1 + sigmas[0]^2)
    "enable_quantization": False,  # CompVisDenoiser(quantize=False): fractional timesteps go to the UNet
    "batch_cond_uncond": True,  # cond and uncond in one UNet call
    "pad_cond_uncond": False,
    "pad_cond_uncond_v0": False,
    "skip_early_cond": 0.0,
    "s_min_uncond": 0.0,
    "img2img_extra_noise": 0.0,
    "no_dpmpp_sde_batch_determinism": False,  # brownian samplers get A1111's seeded BrownianTreeNoiseSampler
    "beta_dist_alpha": 0.6,
    "beta_dist_beta": 0.6,
}
BETA_DIST_ALPHA = A1111_OPTS["beta_dist_alpha"]
BETA_DIST_BETA = A1111_OPTS["beta_dist_beta"]
ETA_ANCESTRAL_DEFAULT = A1111_OPTS["eta_ancestral"]
LATENT_SCALE_FACTOR = 8  # opt_f
LATENT_CHANNELS = 4  # opt_C

# Align Your Steps: A1111 uses its SD 1.5 table unless the model is SDXL; this reference is for SD 1.x models.
ALIGN_YOUR_STEPS_SD15 = (14.615, 6.475, 3.861, 2.697, 1.886, 1.396, 0.963, 0.652, 0.399, 0.152, 0.029)

# --- samplers (sd_samplers_kdiffusion.samplers_k_diffusion in 1.10) ------------------------------------------
# Restart's function is A1111's own (_restart_sampler below), the others are names in k-diffusion's sampling.py.
SAMPLERS: dict[str, tuple[str, dict]] = {
    "DPM++ 2M": ("sample_dpmpp_2m", {"scheduler": "karras"}),
    "DPM++ SDE": ("sample_dpmpp_sde", {"scheduler": "karras", "second_order": True, "brownian_noise": True}),
    "DPM++ 2M SDE": ("sample_dpmpp_2m_sde", {"scheduler": "exponential", "brownian_noise": True}),
    "DPM++ 2M SDE Heun": (
        "sample_dpmpp_2m_sde",
        {"scheduler": "exponential", "brownian_noise": True, "solver_type": "heun"},
    ),
    "DPM++ 2S a": ("sample_dpmpp_2s_ancestral", {"scheduler": "karras", "uses_ensd": True, "second_order": True}),
    "DPM++ 3M SDE": (
        "sample_dpmpp_3m_sde",
        {"scheduler": "exponential", "discard_next_to_last_sigma": True, "brownian_noise": True},
    ),
    "Euler a": ("sample_euler_ancestral", {"uses_ensd": True}),
    "Euler": ("sample_euler", {}),
    "LMS": ("sample_lms", {}),
    "Heun": ("sample_heun", {"second_order": True}),
    "DPM2": ("sample_dpm_2", {"scheduler": "karras", "discard_next_to_last_sigma": True, "second_order": True}),
    "DPM2 a": (
        "sample_dpm_2_ancestral",
        {"scheduler": "karras", "discard_next_to_last_sigma": True, "uses_ensd": True, "second_order": True},
    ),
    "DPM fast": ("sample_dpm_fast", {"uses_ensd": True}),
    "DPM adaptive": ("sample_dpm_adaptive", {"uses_ensd": True}),
    "Restart": ("restart_sampler", {"scheduler": "karras", "second_order": True}),  # resolved in _KDiffusionSampler
}
SAMPLER_LABELS = tuple(SAMPLERS)

# sd_samplers_kdiffusion.sampler_extra_params: the p.* fields a sampler function receives.
SAMPLER_EXTRA_PARAMS = {
    "sample_euler": ["s_churn", "s_tmin", "s_tmax", "s_noise"],
    "sample_heun": ["s_churn", "s_tmin", "s_tmax", "s_noise"],
    "sample_dpm_2": ["s_churn", "s_tmin", "s_tmax", "s_noise"],
    "sample_dpm_fast": ["s_noise"],
    "sample_dpm_2_ancestral": ["s_noise"],
    "sample_dpmpp_2s_ancestral": ["s_noise"],
    "sample_dpmpp_sde": ["s_noise"],
    "sample_dpmpp_2m_sde": ["s_noise"],
    "sample_dpmpp_3m_sde": ["s_noise"],
}
# Sampler's own defaults, against which Sampler.initialize compares the settings.
_SAMPLER_DEFAULT_S = {"s_churn": 0.0, "s_tmin": 0.0, "s_tmax": float("inf"), "s_noise": 1.0}


# --- schedules (sd_schedulers.schedulers in 1.10, in its order) ---------------------------------------------
@dataclass(frozen=True)
class _Schedule:
    name: str
    label: str
    function: str | None  # attribute of this module or of k-diffusion's sampling module ("k:...")
    default_rho: float = -1
    need_inner_model: bool = False
    aliases: tuple[str, ...] = ()


_SCHEDULES = (
    _Schedule("automatic", "Automatic", None),
    _Schedule("uniform", "Uniform", "_uniform", need_inner_model=True),
    _Schedule("karras", "Karras", "k:get_sigmas_karras", default_rho=7.0),
    _Schedule("exponential", "Exponential", "k:get_sigmas_exponential"),
    _Schedule("polyexponential", "Polyexponential", "k:get_sigmas_polyexponential", default_rho=1.0),
    _Schedule("sgm_uniform", "SGM Uniform", "_sgm_uniform", need_inner_model=True, aliases=("SGMUniform",)),
    _Schedule("kl_optimal", "KL Optimal", "_kl_optimal"),
    _Schedule("align_your_steps", "Align Your Steps", "_align_your_steps"),
    _Schedule("simple", "Simple", "_simple", need_inner_model=True),
    _Schedule("normal", "Normal", "_normal", need_inner_model=True),
    _Schedule("ddim", "DDIM", "_ddim", need_inner_model=True),
    _Schedule("beta", "Beta", "_beta", need_inner_model=True),
)
_SCHEDULES_MAP = {**{s.name: s for s in _SCHEDULES}, **{s.label: s for s in _SCHEDULES}}
SCHEDULE_LABELS = tuple(s.label for s in _SCHEDULES)

# shared.latent_upscale_modes
LATENT_UPSCALE_MODES = {
    "Latent": {"mode": "bilinear", "antialias": False},
    "Latent (antialiased)": {"mode": "bilinear", "antialias": True},
    "Latent (bicubic)": {"mode": "bicubic", "antialias": False},
    "Latent (bicubic antialiased)": {"mode": "bicubic", "antialias": True},
    "Latent (nearest)": {"mode": "nearest", "antialias": False},
    "Latent (nearest-exact)": {"mode": "nearest-exact", "antialias": False},
}


# --- k-diffusion ---------------------------------------------------------------------------------------------
_K_LOCK = threading.Lock()  # sampling.torch is swapped during a call (TorchHijack): one call at a time
_K_MODULES: tuple[types.ModuleType, types.ModuleType] | None = None


def _append_dims(x, target_dims):
    """k_diffusion.utils.append_dims: append trailing singleton dimensions up to target_dims."""
    dims_to_append = target_dims - x.ndim
    if dims_to_append < 0:
        raise ValueError(f"input has {x.ndim} dims but target_dims is {target_dims}, which is less")
    return x[(...,) + (None,) * dims_to_append]


def _a1111_to_d(x, sigma, denoised):
    """sd_schedulers.to_d, which A1111 1.10 installs as k_diffusion.sampling.to_d (no append_dims)."""
    return (x - denoised) / sigma


def load_k_diffusion() -> tuple[types.ModuleType, types.ModuleType]:
    """k-diffusion's `sampling` and `external` modules, loaded once from the installed package's files.

    They live in a private stub package (K_DIFFUSION_PACKAGE) whose `utils` holds only `append_dims`, so the
    package's own `__init__` (and its torchvision/kornia imports) never runs. As A1111 1.10 does on import of
    modules/sd_schedulers.py, `sampling.to_d` is replaced by A1111's version.
    """
    global _K_MODULES
    if _K_MODULES is not None:
        return _K_MODULES
    spec = importlib.util.find_spec("k_diffusion")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("k-diffusion is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))

    package = types.ModuleType(K_DIFFUSION_PACKAGE)
    package.__path__ = []  # a package, but nothing is ever imported from disk through it
    utils = types.ModuleType(f"{K_DIFFUSION_PACKAGE}.utils")
    utils.append_dims = _append_dims
    package.utils = utils
    sys.modules[K_DIFFUSION_PACKAGE] = package
    sys.modules[utils.__name__] = utils

    loaded = []
    for name in ("sampling", "external"):
        full_name = f"{K_DIFFUSION_PACKAGE}.{name}"
        module_spec = importlib.util.spec_from_file_location(full_name, folder / f"{name}.py")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[full_name] = module
        module_spec.loader.exec_module(module)
        setattr(package, name, module)
        loaded.append(module)
    sampling, external = loaded
    sampling.to_d = _a1111_to_d
    _K_MODULES = (sampling, external)
    return _K_MODULES


# --- the model A1111 wraps -----------------------------------------------------------------------------------
class _CompVisModel:
    """Stands in for A1111's LatentDiffusion: `alphas_cumprod` and `apply_model(x, t, cond)`."""

    def __init__(self, unet, alphas_cumprod: torch.Tensor):
        self.unet = unet
        self.alphas_cumprod = alphas_cumprod

    def apply_model(self, x, t, cond):
        # DiffusionWrapper (conditioning_key "crossattn"): cc = torch.cat(c_crossattn, 1); model(x, t, context=cc)
        context = torch.cat(cond["c_crossattn"], 1) if isinstance(cond, dict) else cond
        return self.unet(x, t, encoder_hidden_states=context).sample


class _CFGDenoiser:
    """sd_samplers_cfg_denoiser.CFGDenoiser.forward for one image, one prompt of weight 1, default settings."""

    def __init__(self, inner_model):
        self.inner_model = inner_model
        self.step = 0

    def __call__(self, x, sigma, uncond, cond, cond_scale, s_min_uncond, image_cond):
        conds_list = [[(0, 1.0)]]  # prompt_parser.reconstruct_multicond_batch: one prompt, weight 1.0
        tensor = cond
        batch_size = len(conds_list)
        repeats = [len(conds_list[i]) for i in range(batch_size)]
        image_uncond = image_cond

        def make_condition_dict(c_crossattn, c_concat):
            return {"c_crossattn": [c_crossattn], "c_concat": [c_concat]}

        x_in = torch.cat([torch.stack([x[i] for _ in range(n)]) for i, n in enumerate(repeats)] + [x])
        sigma_in = torch.cat([torch.stack([sigma[i] for _ in range(n)]) for i, n in enumerate(repeats)] + [sigma])
        image_cond_in = torch.cat(
            [torch.stack([image_cond[i] for _ in range(n)]) for i, n in enumerate(repeats)] + [image_uncond]
        )
        # skip_early_cond is 0 and s_min_uncond is 0: the uncond half is never skipped.
        if tensor.shape[1] == uncond.shape[1]:
            cond_in = torch.cat([tensor, uncond])
            x_out = self.inner_model(x_in, sigma_in, cond=make_condition_dict(cond_in, image_cond_in))
        else:  # prompts of different token lengths (pad_cond_uncond off): cond and uncond in separate calls
            x_out = torch.zeros_like(x_in)
            chunk = batch_size * 2
            for a in range(0, tensor.shape[0], chunk):
                b = min(a + chunk, tensor.shape[0])
                x_out[a:b] = self.inner_model(
                    x_in[a:b], sigma_in[a:b], cond=make_condition_dict(tensor[a:b], image_cond_in[a:b])
                )
            n = uncond.shape[0]
            x_out[-n:] = self.inner_model(
                x_in[-n:], sigma_in[-n:], cond=make_condition_dict(uncond, image_cond_in[-n:])
            )

        # combine_denoised, with cond_scale * cond_scale_miltiplier (1.0)
        cond_scale = cond_scale * 1.0
        denoised_uncond = x_out[-uncond.shape[0] :]
        denoised = torch.clone(denoised_uncond)
        for i, conds in enumerate(conds_list):
            for cond_index, weight in conds:
                denoised[i] += (x_out[cond_index] - denoised_uncond[i]) * (weight * cond_scale)
        self.step += 1
        return denoised


# --- RNG -----------------------------------------------------------------------------------------------------
class _ImageRNG:
    """rng.ImageRNG for one seed, RNG source "CPU", no variation seed, no seed resize."""

    def __init__(self, shape, seed: int, ensd: int, device):
        self.shape = tuple(int(v) for v in shape)
        self.seed = int(seed)
        self.ensd = ensd
        self.device = device
        self.generator = torch.Generator("cpu").manual_seed(self.seed)  # create_generator
        self.is_first = True

    def first(self):
        # randn(seed, shape, generator): torch.randn on the CPU with this image's generator
        # (A1111 also calls torch.manual_seed(seed) there; nothing here draws from the global RNG, so it is left out)
        noise = torch.randn(self.shape, device="cpu", generator=self.generator)
        if self.ensd:  # eta_noise_seed_delta: every later draw comes from a generator seeded seed + ENSD
            self.generator = torch.Generator("cpu").manual_seed(int(self.seed + self.ensd))
        return torch.stack([noise]).to(self.device)

    def next(self):
        if self.is_first:
            self.is_first = False
            return self.first()
        noise = torch.randn(self.shape, device="cpu", generator=self.generator)  # randn_without_seed
        return torch.stack([noise]).to(self.device)


class _TorchHijack:
    """sd_samplers_common.TorchHijack: k-diffusion's `torch.randn_like(x)` becomes `p.rng.next()`."""

    def __init__(self, rng: _ImageRNG):
        self.rng = rng

    def __getattr__(self, item):
        if item == "randn_like":
            return self.randn_like
        if hasattr(torch, item):
            return getattr(torch, item)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{item}'")

    def randn_like(self, x):
        return self.rng.next()


def _torchsde_randn(size, dtype, device, seed):
    """sd_samplers_common.replace_torchsde_browinan: rng.randn_local(seed, size) with the CPU source."""
    generator = torch.Generator("cpu").manual_seed(int(seed))
    return torch.randn(size, device="cpu", generator=generator).to(device=device, dtype=dtype)


@contextmanager
def _hijacked(sampling, rng: _ImageRNG):
    """The global patches A1111 has in place while a sampler runs; restored afterwards."""
    from torchsde._brownian import brownian_interval

    before_torch, before_randn = sampling.torch, brownian_interval._randn
    sampling.torch = _TorchHijack(rng)
    brownian_interval._randn = _torchsde_randn
    try:
        yield
    finally:
        sampling.torch = before_torch
        brownian_interval._randn = before_randn


# --- schedules -----------------------------------------------------------------------------------------------
def _uniform(n, sigma_min, sigma_max, inner_model, device):
    return inner_model.get_sigmas(n).to(device)


def _sgm_uniform(n, sigma_min, sigma_max, inner_model, device):
    start = inner_model.sigma_to_t(torch.tensor(sigma_max))
    end = inner_model.sigma_to_t(torch.tensor(sigma_min))
    sigs = [inner_model.t_to_sigma(ts) for ts in torch.linspace(start, end, n + 1)[:-1]]
    sigs += [0.0]
    return torch.FloatTensor(sigs).to(device)


def _loglinear_interp(t_steps, num_steps):
    xs = np.linspace(0, 1, len(t_steps))
    ys = np.log(t_steps[::-1])
    new_xs = np.linspace(0, 1, num_steps)
    new_ys = np.interp(new_xs, xs, ys)
    return np.exp(new_ys)[::-1].copy()


def _align_your_steps(n, sigma_min, sigma_max, device):
    sigmas = list(ALIGN_YOUR_STEPS_SD15)
    if n != len(sigmas):
        sigmas = np.append(_loglinear_interp(sigmas, n), [0.0])
    else:
        sigmas.append(0.0)
    return torch.FloatTensor(sigmas).to(device)


def _kl_optimal(n, sigma_min, sigma_max, device):
    # As in A1111 1.10: n + 1 values, the last one sigma_min (not 0).
    alpha_min = torch.arctan(torch.tensor(sigma_min, device=device))
    alpha_max = torch.arctan(torch.tensor(sigma_max, device=device))
    step_indices = torch.arange(n + 1, device=device)
    return torch.tan(step_indices / n * alpha_min + (1.0 - step_indices / n) * alpha_max)


def _simple(n, sigma_min, sigma_max, inner_model, device):
    sigs = []
    ss = len(inner_model.sigmas) / n
    for x in range(n):
        sigs += [float(inner_model.sigmas[-(1 + int(x * ss))])]
    sigs += [0.0]
    return torch.FloatTensor(sigs).to(device)


def _normal(n, sigma_min, sigma_max, inner_model, device):
    start = inner_model.sigma_to_t(torch.tensor(sigma_max))
    end = inner_model.sigma_to_t(torch.tensor(sigma_min))
    timesteps = torch.linspace(start, end, n)
    sigs = [inner_model.t_to_sigma(timesteps[x]) for x in range(len(timesteps))]
    sigs += [0.0]
    return torch.FloatTensor(sigs).to(device)


def _ddim(n, sigma_min, sigma_max, inner_model, device):
    sigs = []
    ss = max(len(inner_model.sigmas) // n, 1)
    x = 1
    while x < len(inner_model.sigmas):
        sigs += [float(inner_model.sigmas[x])]
        x += ss
    sigs = sigs[::-1]
    sigs += [0.0]
    return torch.FloatTensor(sigs).to(device)


def _beta(n, sigma_min, sigma_max, inner_model, device):
    # A1111 1.10's version: beta quantiles mapped linearly onto [sigma_min, sigma_max] (not onto timesteps).
    timesteps = 1 - np.linspace(0, 1, n)
    timesteps = [stats.beta.ppf(x, BETA_DIST_ALPHA, BETA_DIST_BETA) for x in timesteps]
    sigmas = [sigma_min + (x * (sigma_max - sigma_min)) for x in timesteps]
    sigmas += [0.0]
    return torch.FloatTensor(sigmas).to(device)


def _schedule_function(schedule: _Schedule):
    if schedule.function.startswith("k:"):
        sampling, _ = load_k_diffusion()
        return getattr(sampling, schedule.function[2:])
    return globals()[schedule.function]


# --- names ---------------------------------------------------------------------------------------------------
def resolve_sampler_and_schedule(sampler: str, schedule: str | None) -> tuple[str, str]:
    """sd_samplers.fix_p_invalid_sampler_and_scheduler (get_sampler_and_scheduler, convert_automatic=False).

    A schedule name at the end of the sampler name ("DPM++ 2M Karras", "Euler a Exponential") wins over
    `schedule`. Unlike A1111, which falls back to DPM++ 2M / Automatic, unknown names raise ValueError.
    """
    if schedule is not None and schedule not in _SCHEDULES_MAP:
        raise ValueError(f"unknown schedule {schedule!r}")
    found = _SCHEDULES_MAP.get(schedule, _SCHEDULES[0])
    name = sampler
    for candidate in _SCHEDULES:
        for option in (candidate.label, candidate.name, *candidate.aliases):
            if name.endswith(" " + option):
                found = candidate
                name = name[0 : -(len(option) + 1)]
                break
    if name not in SAMPLERS:
        raise ValueError(f"unknown or unsupported sampler {sampler!r}")
    return name, found.label


# --- the sampler ---------------------------------------------------------------------------------------------
@dataclass
class _P:
    """The StableDiffusionProcessingTxt2Img fields the sampler reads."""

    seed: int
    steps: int
    cfg_scale: float
    scheduler: str
    eta: float | None
    ensd: int
    s_churn: float
    s_tmin: float
    s_tmax: float
    s_noise: float
    sigma_min: float
    sigma_max: float
    rho: float
    rng: _ImageRNG | None = None
    is_hr_pass: bool = False
    hr_scheduler: str | None = None
    denoising_strength: float = 0.0


class _KDiffusionSampler:
    """sd_samplers_kdiffusion.KDiffusionSampler (with sd_samplers_common.Sampler) for one sampler label."""

    def __init__(self, label: str, model: _CompVisModel, prediction_type: str):
        sampling, external = load_k_diffusion()
        self.sampling = sampling
        self.label = label
        self.funcname, self.options = SAMPLERS[label]
        # A1111's own sampler function (Restart) is a callable, not a name: sampler_extra_params has none for it
        self.func = _restart_sampler if self.funcname == "restart_sampler" else getattr(sampling, self.funcname)
        self.extra_params = SAMPLER_EXTRA_PARAMS.get(self.funcname, [])
        if prediction_type == "v_prediction":
            denoiser = external.CompVisVDenoiser
        elif prediction_type == "epsilon":
            denoiser = external.CompVisDenoiser
        else:
            raise ValueError(f"unsupported prediction_type {prediction_type!r}")
        self.model_wrap = denoiser(model, quantize=A1111_OPTS["enable_quantization"])
        self.model_wrap_cfg = _CFGDenoiser(self.model_wrap)

    def get_sigmas(self, p: _P, steps: int) -> torch.Tensor:
        discard_next_to_last_sigma = self.options.get("discard_next_to_last_sigma", False)
        if A1111_OPTS["always_discard_next_to_last_sigma"]:
            discard_next_to_last_sigma = True
        steps += 1 if discard_next_to_last_sigma else 0

        scheduler_name = (p.hr_scheduler if p.is_hr_pass else p.scheduler) or "Automatic"
        if scheduler_name == "Automatic":
            scheduler_name = self.options.get("scheduler", None)
        scheduler = _SCHEDULES_MAP.get(scheduler_name)

        m_sigma_min, m_sigma_max = self.model_wrap.sigmas[0].item(), self.model_wrap.sigmas[-1].item()
        sigma_min, sigma_max = (
            (0.1, 10) if A1111_OPTS["use_old_karras_scheduler_sigmas"] else (m_sigma_min, m_sigma_max)
        )

        if scheduler is None or scheduler.function is None:
            sigmas = self.model_wrap.get_sigmas(steps)
        else:
            sigmas_kwargs = {"sigma_min": sigma_min, "sigma_max": sigma_max}
            if p.sigma_min != 0 and p.sigma_min != m_sigma_min:
                sigmas_kwargs["sigma_min"] = p.sigma_min
            if p.sigma_max != 0 and p.sigma_max != m_sigma_max:
                sigmas_kwargs["sigma_max"] = p.sigma_max
            if scheduler.default_rho != -1 and p.rho != 0 and p.rho != scheduler.default_rho:
                sigmas_kwargs["rho"] = p.rho
            if scheduler.need_inner_model:
                sigmas_kwargs["inner_model"] = self.model_wrap
            sigmas = _schedule_function(scheduler)(n=steps, **sigmas_kwargs, device="cpu")

        if discard_next_to_last_sigma:
            sigmas = torch.cat([sigmas[:-2], sigmas[-1:]])
        return sigmas.cpu()

    def initialize(self, p: _P) -> dict:
        """Sampler.initialize, minus the TorchHijack install (done around the call by `_hijacked`)."""
        self.model_wrap_cfg.step = 0
        self.eta = p.eta if p.eta is not None else A1111_OPTS["eta_ancestral"]
        parameters = inspect.signature(self.func).parameters

        extra_params_kwargs = {}
        for param_name in self.extra_params:
            if param_name in parameters:  # hasattr(p, name): every p has the s_* fields
                extra_params_kwargs[param_name] = getattr(p, param_name)
        if "eta" in parameters:
            extra_params_kwargs["eta"] = self.eta
        if len(self.extra_params) > 0:
            # the s_* settings replace p's values when they differ from the sampler's defaults; here p already
            # holds the settings (fill_fields_from_opts), with s_tmax 0 meaning infinity
            settings = {
                "s_churn": p.s_churn,
                "s_tmin": p.s_tmin,
                "s_tmax": p.s_tmax or float("inf"),
                "s_noise": p.s_noise,
            }
            for key, value in settings.items():
                if key in extra_params_kwargs and value != _SAMPLER_DEFAULT_S[key]:
                    extra_params_kwargs[key] = value
        return extra_params_kwargs

    def create_noise_sampler(self, x, sigmas, p: _P):
        sigma_min, sigma_max = sigmas[sigmas > 0].min(), sigmas.max()
        return self.sampling.BrownianTreeNoiseSampler(x, sigma_min, sigma_max, seed=[p.seed])

    def _run(self, p: _P, x, cond, uncond, extra_params_kwargs):
        extra_args = {
            "cond": cond,
            "image_cond": x.new_zeros(x.shape[0], 5, 1, 1),  # txt2img_image_conditioning of a plain SD model
            "uncond": uncond,
            "cond_scale": p.cfg_scale,
            "s_min_uncond": A1111_OPTS["s_min_uncond"],
        }
        return self.func(
            self.model_wrap_cfg, x, extra_args=extra_args, disable=True, callback=None, **extra_params_kwargs
        )

    def sample(self, p: _P, x, cond, uncond, steps=None):
        """KDiffusionSampler.sample (txt2img): x is the first noise."""
        self.model_wrap.log_sigmas = self.model_wrap.log_sigmas.to(x.device)
        self.model_wrap.sigmas = self.model_wrap.sigmas.to(x.device)
        steps = steps or p.steps
        sigmas = self.get_sigmas(p, steps).to(x.device)
        x = x * sigmas[0]  # sgm_noise_multiplier off

        with _hijacked(self.sampling, p.rng):
            extra_params_kwargs = self.initialize(p)
            parameters = inspect.signature(self.func).parameters
            if "n" in parameters:
                extra_params_kwargs["n"] = steps
            if "sigma_min" in parameters:
                extra_params_kwargs["sigma_min"] = self.model_wrap.sigmas[0].item()
                extra_params_kwargs["sigma_max"] = self.model_wrap.sigmas[-1].item()
            if "sigmas" in parameters:
                extra_params_kwargs["sigmas"] = sigmas
            if self.options.get("brownian_noise", False):
                extra_params_kwargs["noise_sampler"] = self.create_noise_sampler(x, sigmas, p)
            if self.options.get("solver_type", None) == "heun":
                extra_params_kwargs["solver_type"] = "heun"
            return self._run(p, x, cond, uncond, extra_params_kwargs)

    def sample_img2img(self, p: _P, x, noise, cond, uncond, steps=None):
        """KDiffusionSampler.sample_img2img, as the hires pass calls it (steps given)."""
        self.model_wrap.log_sigmas = self.model_wrap.log_sigmas.to(x.device)
        self.model_wrap.sigmas = self.model_wrap.sigmas.to(x.device)
        steps, t_enc = setup_img2img_steps(p, steps)
        sigmas = self.get_sigmas(p, steps).to(x.device)
        sigma_sched = sigmas[steps - t_enc - 1 :]

        x = x.to(noise)
        xi = x + noise * sigma_sched[0]  # img2img_extra_noise is 0

        with _hijacked(self.sampling, p.rng):
            extra_params_kwargs = self.initialize(p)
            parameters = inspect.signature(self.func).parameters
            if "sigma_min" in parameters:
                extra_params_kwargs["sigma_min"] = sigma_sched[-2]  # the last sigma is 0
            if "sigma_max" in parameters:
                extra_params_kwargs["sigma_max"] = sigma_sched[0]
            if "n" in parameters:
                extra_params_kwargs["n"] = len(sigma_sched) - 1
            if "sigma_sched" in parameters:
                extra_params_kwargs["sigma_sched"] = sigma_sched
            if "sigmas" in parameters:
                extra_params_kwargs["sigmas"] = sigma_sched
            if self.options.get("brownian_noise", False):
                extra_params_kwargs["noise_sampler"] = self.create_noise_sampler(x, sigmas, p)  # the full sigmas
            if self.options.get("solver_type", None) == "heun":
                extra_params_kwargs["solver_type"] = "heun"
            return self._run(p, xi, cond, uncond, extra_params_kwargs)


def _restart_sampler(model, x, sigmas, extra_args=None, callback=None, disable=None, s_noise=1.0,
                     restart_list=None):
    """modules/sd_samplers_extra.py restart_sampler (A1111 1.10), step for step.

    Restart sampling (Xu et al. 2023): Heun steps; from 20 steps on, Karras sigmas of its own between the
    schedule's ends, and restart segments from the sigma nearest 0.1 back up to the one nearest 2. The
    k-diffusion names it imports at call time (to_d, get_sigmas_karras, torch.randn_like) are taken from the
    loaded k-diffusion module, so A1111's to_d and the TorchHijack apply as in A1111.
    """
    sampling, _ = load_k_diffusion()
    to_d, get_sigmas_karras = sampling.to_d, sampling.get_sigmas_karras
    extra_args = {} if extra_args is None else extra_args
    s_in = x.new_ones([x.shape[0]])
    step_id = 0

    def heun_step(x, old_sigma, new_sigma, second_order=True):
        nonlocal step_id
        denoised = model(x, old_sigma * s_in, **extra_args)
        d = to_d(x, old_sigma, denoised)
        if callback is not None:
            callback({"x": x, "i": step_id, "sigma": new_sigma, "sigma_hat": old_sigma, "denoised": denoised})
        dt = new_sigma - old_sigma
        if new_sigma == 0 or not second_order:  # Euler method
            x = x + d * dt
        else:  # Heun's method
            x_2 = x + d * dt
            denoised_2 = model(x_2, new_sigma * s_in, **extra_args)
            d_2 = to_d(x_2, new_sigma, denoised_2)
            d_prime = (d + d_2) / 2
            x = x + d_prime * dt
        step_id += 1
        return x

    steps = sigmas.shape[0] - 1
    if restart_list is None:
        if steps >= 20:
            restart_steps = 9
            restart_times = 1
            if steps >= 36:
                restart_steps = steps // 4
                restart_times = 2
            sigmas = get_sigmas_karras(steps - restart_steps * restart_times, sigmas[-2].item(), sigmas[0].item(),
                                       device=sigmas.device)
            restart_list = {0.1: [restart_steps + 1, restart_times, 2]}
        else:
            restart_list = {}

    restart_list = {int(torch.argmin(abs(sigmas - key), dim=0)): value for key, value in restart_list.items()}

    step_list = []
    for i in range(len(sigmas) - 1):
        step_list.append((sigmas[i], sigmas[i + 1]))
        if i + 1 in restart_list:
            restart_steps, restart_times, restart_max = restart_list[i + 1]
            min_idx = i + 1
            max_idx = int(torch.argmin(abs(sigmas - restart_max), dim=0))
            if max_idx < min_idx:
                sigma_restart = get_sigmas_karras(restart_steps, sigmas[min_idx].item(), sigmas[max_idx].item(),
                                                  device=sigmas.device)[:-1]
                while restart_times > 0:
                    restart_times -= 1
                    step_list.extend(zip(sigma_restart[:-1], sigma_restart[1:]))  # (A1111's)

    last_sigma = None
    for old_sigma, new_sigma in step_list:  # tqdm.tqdm(step_list, disable=disable)
        if last_sigma is None:
            last_sigma = old_sigma
        elif last_sigma < old_sigma:
            x = x + sampling.torch.randn_like(x) * s_noise * (old_sigma ** 2 - last_sigma ** 2) ** 0.5
        x = heun_step(x, old_sigma, new_sigma)
        last_sigma = new_sigma

    return x


def setup_img2img_steps(p: _P, steps: int | None = None) -> tuple[int, int]:
    """sd_samplers_common.setup_img2img_steps (img2img_fix_steps is off; the hires pass always passes steps)."""
    if steps is not None:
        requested_steps = steps or p.steps
        steps = int(requested_steps / min(p.denoising_strength, 0.999)) if p.denoising_strength > 0 else 0
        t_enc = requested_steps - 1
    else:
        steps = p.steps
        t_enc = int(min(p.denoising_strength, 0.999) * steps)
    return steps, t_enc


# --- txt2img -------------------------------------------------------------------------------------------------
def a1111_txt2img(
    unet,
    alphas_cumprod: torch.Tensor,
    *,
    cond: torch.Tensor,
    uncond: torch.Tensor,
    seed: int,
    width: int,
    height: int,
    steps: int,
    cfg_scale: float,
    sampler: str,
    schedule: str = "Automatic",
    eta: float | None = None,
    ensd: int = 0,
    s_churn: float = 0.0,
    s_tmin: float = 0.0,
    s_tmax: float = 0.0,
    s_noise: float = 1.0,
    sigma_min: float = 0.0,
    sigma_max: float = 0.0,
    rho: float = 0.0,
    prediction_type: str = "epsilon",
    hires: dict | None = None,
) -> torch.Tensor:
    """Final latents (1, 4, H/8, W/8) as A1111 1.10 makes them with RNG 'CPU' (torch.Generator('cpu')), before the VAE.

    `sampler` is an A1111 1.10 label (SAMPLER_LABELS) or a pre-1.9 name with the schedule appended
    ("DPM++ 2M Karras"); `schedule` a label of SCHEDULE_LABELS (or an A1111 schedule name such as "karras").
    eta None is A1111's default (1.0); s_tmax 0 is infinity; sigma_min, sigma_max, rho 0 are "not overridden".
    `hires`: None, or dict(scale, upscaler (a key of LATENT_UPSCALE_MODES), steps (0: same as steps),
    denoising_strength, sampler (None: same), schedule (None: same)). Returned latents are at the hires size then.
    """
    load_k_diffusion()
    device = next(unet.parameters()).device
    sampler_name, scheduler = resolve_sampler_and_schedule(sampler, schedule)
    model = _CompVisModel(unet, alphas_cumprod.to(device=device, dtype=torch.float32))
    cond = cond.to(device)
    uncond = uncond.to(device)

    p = _P(
        seed=int(seed),
        steps=int(steps),
        cfg_scale=cfg_scale,
        scheduler=scheduler,
        eta=eta,
        ensd=int(ensd or 0),
        s_churn=s_churn,
        s_tmin=s_tmin,
        s_tmax=s_tmax or float("inf"),
        s_noise=s_noise,
        sigma_min=sigma_min,
        sigma_max=sigma_max,
        rho=rho,
    )

    hr = None
    if hires is not None:
        hr = dict(hires)
        hr_sampler = hr.get("sampler") or None
        if hr_sampler is not None and hr_sampler not in SAMPLERS:
            raise ValueError(f"unknown hires sampler {hr_sampler!r} (A1111 needs an exact label here)")
        hr_schedule = hr.get("schedule") or None
        if hr_schedule is not None and hr_schedule not in _SCHEDULES_MAP:
            raise ValueError(f"unknown hires schedule {hr_schedule!r}")
        if hr["upscaler"] not in LATENT_UPSCALE_MODES:
            raise ValueError(f"not a latent upscaler: {hr['upscaler']!r}")
        if not hr["denoising_strength"] > 0:
            raise ValueError("hires denoising_strength must be > 0")
        # StableDiffusionProcessingTxt2Img.init / calculate_target_resolution
        p.hr_scheduler = hr_schedule if hr_schedule is not None else p.scheduler
        hr_upscale_to_x = int(width * hr["scale"])
        hr_upscale_to_y = int(height * hr["scale"])

    with _K_LOCK:
        # process_images_inner: p.rng, then StableDiffusionProcessingTxt2Img.sample
        p.rng = _ImageRNG(
            (LATENT_CHANNELS, height // LATENT_SCALE_FACTOR, width // LATENT_SCALE_FACTOR), p.seed, p.ensd, device
        )
        k_sampler = _KDiffusionSampler(sampler_name, model, prediction_type)
        x = p.rng.next()
        samples = k_sampler.sample(p, x, cond, uncond)
        del x
        if hr is None:
            return samples

        # sample_hr_pass, latent upscaler
        p.is_hr_pass = True
        hr_k_sampler = _KDiffusionSampler(hr_sampler or sampler_name, model, prediction_type)
        mode = LATENT_UPSCALE_MODES[hr["upscaler"]]
        samples = torch.nn.functional.interpolate(
            samples,
            size=(hr_upscale_to_y // LATENT_SCALE_FACTOR, hr_upscale_to_x // LATENT_SCALE_FACTOR),
            mode=mode["mode"],
            antialias=mode["antialias"],
        )
        # truncate_x / truncate_y are 0 with a scale (they only apply to hires resize to a size)
        p.rng = _ImageRNG(samples.shape[1:], p.seed, p.ensd, device)
        noise = p.rng.next()
        p.denoising_strength = hr["denoising_strength"]
        samples = hr_k_sampler.sample_img2img(p, samples, noise, cond, uncond, steps=hr.get("steps") or p.steps)
        p.is_hr_pass = False
        return samples


if __name__ == "__main__":
    import tempfile
    import time

    repo = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo))
    from tests.tiny import tiny_pipeline

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        pipe = tiny_pipeline(tmp)
        ac = pipe.scheduler.alphas_cumprod
        g = torch.Generator().manual_seed(1)
        c = torch.randn((1, 16, 16), generator=g)
        uc = torch.randn((1, 16, 16), generator=g)
        common = {"cond": c, "uncond": uc, "seed": 1234, "width": 64, "height": 64, "steps": 5, "cfg_scale": 7.0}
        started = time.time()
        for name in SAMPLER_LABELS:
            for sched in (
                "Automatic",
                "Karras",
                "Exponential",
                "Beta",
                "Align Your Steps",
                "KL Optimal",
                "SGM Uniform",
                "Simple",
                "Normal",
                "DDIM",
                "Uniform",
                "Polyexponential",
            ):
                a = a1111_txt2img(pipe.unet, ac, sampler=name, schedule=sched, **common)
                assert a.shape == (1, 4, 8, 8) and torch.isfinite(a).all(), (name, sched)
            b = a1111_txt2img(pipe.unet, ac, sampler=name, **common)
            b2 = a1111_txt2img(pipe.unet, ac, sampler=name, **common)
            assert torch.equal(b, b2), name
            print(f"{name:20s} ok  mean={b.mean().item():+.5f}")
        ea = a1111_txt2img(pipe.unet, ac, sampler="Euler a", **common)
        ea_ensd = a1111_txt2img(pipe.unet, ac, sampler="Euler a", ensd=31337, **common)
        assert not torch.equal(ea, ea_ensd)
        eu = a1111_txt2img(pipe.unet, ac, sampler="Euler", **common)
        eu_ensd = a1111_txt2img(pipe.unet, ac, sampler="Euler", ensd=31337, **common)
        assert torch.equal(eu, eu_ensd)
        old = a1111_txt2img(pipe.unet, ac, sampler="DPM++ 2M Karras", **common)
        new = a1111_txt2img(pipe.unet, ac, sampler="DPM++ 2M", schedule="Karras", **common)
        assert torch.equal(old, new)
        assert resolve_sampler_and_schedule("Euler a Karras", "Automatic") == ("Euler a", "Karras")
        v = a1111_txt2img(pipe.unet, ac, sampler="Euler", prediction_type="v_prediction", **common)
        assert torch.isfinite(v).all()
        for hr_sampler, up in (
            ("Euler a", "Latent"),
            ("DPM++ 2M SDE", "Latent (bicubic antialiased)"),
            ("DPM fast", "Latent (nearest-exact)"),
        ):
            hires = {
                "scale": 1.5,
                "upscaler": up,
                "steps": 0,
                "denoising_strength": 0.6,
                "sampler": None,
                "schedule": None,
            }
            h = a1111_txt2img(pipe.unet, ac, sampler=hr_sampler, hires=hires, **common)
            h2 = a1111_txt2img(pipe.unet, ac, sampler=hr_sampler, hires=hires, **common)
            assert h.shape == (1, 4, 12, 12) and torch.isfinite(h).all() and torch.equal(h, h2), hr_sampler
        hires = {
            "scale": 2,
            "upscaler": "Latent",
            "steps": 3,
            "denoising_strength": 0.5,
            "sampler": "DPM++ 2M",
            "schedule": "Karras",
        }
        h = a1111_txt2img(pipe.unet, ac, sampler="Euler a", hires=hires, **common)
        assert h.shape == (1, 4, 16, 16) and torch.isfinite(h).all()
        print(f"all checks passed in {time.time() - started:.1f}s")
