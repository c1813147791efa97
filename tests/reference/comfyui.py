"""A reference re-creation of how ComfyUI's KSampler node samples an SD 1.x (eps) model, for tests.

SeedLab's ComfyUI-compatible samplers are tested tensor for tensor against this file, so it follows ComfyUI's
sources step by step (upstream master at COMFYUI_COMMIT, 2025-12-31) rather than a description of them. The names
in brackets say which ComfyUI function each step re-creates:

- nodes.py: KSampler / common_ksampler, EmptyLatentImage, LatentUpscale, LatentUpscaleBy.
- comfy/sample.py: prepare_noise (noise from a CPU generator seeded with the node's seed), sample.
- comfy/samplers.py: KSampler (calculate_sigmas, set_steps: denoise < 1 slicing), sampler_object / ksampler
  ("ddim" is euler; dpm_fast and dpm_adaptive integrate from sigmas[0] to the last sigma above 0), KSAMPLER.sample
  (max_denoise, noise_scaling), CFGGuider.inner_sample (process_latent_in / process_latent_out),
  sampling_function / calc_cond_batch / cfg_function, and every scheduler function. The dpm_fast and dpm_adaptive
  wrappers and DPMSolver (_DPMSolver here) were read at a later commit, 02159d8, not at COMFYUI_COMMIT.
- comfy/model_sampling.py: ModelSamplingDiscrete (sigmas in float64, stored as float32; timestep() quantisation;
  sigma() interpolation), EPS (calculate_input, calculate_denoised, noise_scaling).
- comfy/model_base.py: BaseModel._apply_model (the order of those calls around the UNet).
- comfy/k_diffusion/sampling.py: ComfyUI's own copies of the k-diffusion samplers, which differ from k-diffusion
  0.1.1 (seeded default_noise_sampler, BrownianTreeNoiseSampler(cpu=...), `sigma_down == 0` / `sigmas[i + 1] == 0`
  shortcuts, the half-log-SNR form of the DPM++ SDE samplers); they are re-created here, k_diffusion is never
  imported.
- comfy/utils.py: common_upscale and bislerp (LatentUpscale's methods).

What stands in for ComfyUI's own objects:
- The model call is a diffusers UNet2DConditionModel: `unet(calculate_input(sigma, x), timestep, encoder_hidden_states=
  context).sample` with ComfyUI's quantised timestep as a float tensor.
- ModelSamplingDiscrete's betas come from a diffusers scheduler config: diffusers' "scaled_linear" is ComfyUI's
  make_beta_schedule("linear"), diffusers' "linear" is ComfyUI's "sqrt_linear".
- Noise: ComfyUI seeds the global generator (torch.manual_seed(seed)) and draws torch.randn(..., device="cpu");
  here a torch.Generator('cpu').manual_seed(seed) draws the same numbers and the global RNG is left alone.
- Everything runs on the CPU in float32 (ComfyUI's CPU path). The "_gpu" samplers differ from the others only in
  where the Brownian tree lives, so on the CPU they give the same numbers.
- calc_cond_batch may split cond and uncond into separate UNet calls when memory is short; here they always share
  one call, as on any machine with enough free memory.

Latent space: like ComfyUI's LATENT, the latents this file takes and returns are the VAE's raw latents. The KSampler
node multiplies a non-empty input latent by the SD1 latent scale factor 0.18215 (process_latent_in) before
sampling and divides the sampled latents by it (process_latent_out) afterwards; comfyui_ksampler does the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy
import scipy.stats
import torch
import torchsde
from scipy import integrate

COMFYUI_COMMIT = "d622a618749b603531b753cef286a6051dd85565"  # comfyanonymous/ComfyUI master, 2025-12-31
SD1_LATENT_SCALE_FACTOR = 0.18215  # comfy/latent_formats.py SD15.scale_factor

SAMPLERS = (
    "euler", "euler_ancestral", "heun", "dpm_2", "dpm_2_ancestral", "lms", "dpm_fast", "dpm_adaptive",
    "dpmpp_2s_ancestral",
    "dpmpp_sde", "dpmpp_sde_gpu", "dpmpp_2m", "dpmpp_2m_sde", "dpmpp_2m_sde_gpu",
    "dpmpp_2m_sde_heun", "dpmpp_2m_sde_heun_gpu", "dpmpp_3m_sde", "dpmpp_3m_sde_gpu", "ddim",
)
# Samplers re-created in other reference files (tests/reference/comfyui_samplers.py) add themselves here by name,
# as fn(model, x, sigmas, seed), and to SAMPLERS; that file is imported at the end of this one.
MORE_SAMPLERS: dict[str, Callable] = {}
# In ComfyUI's order (SCHEDULER_HANDLERS).
SCHEDULERS = ("simple", "sgm_uniform", "karras", "exponential", "ddim_uniform", "beta", "normal",
              "linear_quadratic", "kl_optimal")

# KSampler.DISCARD_PENULTIMATE_SIGMA_SAMPLERS (uni_pc and uni_pc_bh2 are re-created in tests/reference/unipc.py).
_DISCARD_PENULTIMATE_SIGMA = frozenset(("dpm_2", "dpm_2_ancestral", "uni_pc", "uni_pc_bh2"))
LATENT_UPSCALE_METHODS = ("nearest-exact", "bilinear", "area", "bicubic", "bislerp")
LATENT_CROP_METHODS = ("disabled", "center")


# --- comfy/model_sampling.py ------------------------------------------------------------------------------------

class _ModelSampling:
    """ModelSamplingDiscrete + EPS for an SD 1.x model (zsnr off, sigma_data 1.0)."""

    sigma_data = 1.0

    def __init__(self, betas_config: dict):
        prediction = betas_config.get("prediction_type", "epsilon")
        if prediction != "epsilon":
            raise ValueError(f"only eps models are re-created, not {prediction!r}")
        if betas_config.get("rescale_betas_zero_snr", False):
            raise ValueError("zero-terminal-SNR schedules are not re-created")
        if betas_config.get("trained_betas") is not None:
            raise ValueError("trained_betas are not re-created")
        start = betas_config.get("beta_start", 0.00085)
        end = betas_config.get("beta_end", 0.012)
        count = betas_config.get("num_train_timesteps", 1000)
        schedule = betas_config.get("beta_schedule", "scaled_linear")
        # ldm.modules.diffusionmodules.util.make_beta_schedule: float64 throughout.
        if schedule == "scaled_linear":  # ComfyUI's "linear"
            betas = torch.linspace(start ** 0.5, end ** 0.5, count, dtype=torch.float64) ** 2
        elif schedule == "linear":  # ComfyUI's "sqrt_linear"
            betas = torch.linspace(start, end, count, dtype=torch.float64)
        else:
            raise ValueError(f"beta_schedule {schedule!r} is not re-created")
        alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        sigmas = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5
        # set_sigmas: the log is taken in float64, then both are stored as float32.
        self.sigmas = sigmas.float()
        self.log_sigmas = sigmas.log().float()

    @property
    def sigma_min(self) -> torch.Tensor:
        return self.sigmas[0]

    @property
    def sigma_max(self) -> torch.Tensor:
        return self.sigmas[-1]

    def timestep(self, sigma: torch.Tensor) -> torch.Tensor:
        """The index of the nearest log sigma (int64, sigma's shape)."""
        distance = sigma.log() - self.log_sigmas[:, None]
        return distance.abs().argmin(dim=0).view(sigma.shape)

    def sigma(self, timestep: torch.Tensor) -> torch.Tensor:
        """Linear interpolation in log sigma between the neighbouring table entries."""
        t = torch.clamp(timestep.float(), min=0, max=(len(self.sigmas) - 1))
        lo, hi, frac = t.floor().long(), t.ceil().long(), t.frac()
        return ((1 - frac) * self.log_sigmas[lo] + frac * self.log_sigmas[hi]).exp()

    @staticmethod
    def _shaped(sigma: torch.Tensor, ndim: int) -> torch.Tensor:  # reshape_sigma
        if sigma.nelement() == 1:
            return sigma.view(())
        return sigma.view(sigma.shape[:1] + (1,) * (ndim - 1))

    def calculate_input(self, sigma: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        sigma = self._shaped(sigma, x.ndim)
        return x / (sigma ** 2 + self.sigma_data ** 2) ** 0.5  # a division, as in EPS.calculate_input

    def calculate_denoised(self, sigma: torch.Tensor, model_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        sigma = self._shaped(sigma, model_output.ndim)
        return x - model_output * sigma

    def noise_scaling(self, sigma, noise, latent_image, max_denoise):
        sigma = self._shaped(sigma, noise.ndim)
        if max_denoise:
            noise = noise * torch.sqrt(1.0 + sigma ** 2.0)
        else:
            noise = noise * sigma
        noise += latent_image
        return noise


# --- comfy/samplers.py: schedulers ------------------------------------------------------------------------------

def _append_zero(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, x.new_zeros([1])])


def _simple(ms: _ModelSampling, steps: int) -> torch.Tensor:
    stride = len(ms.sigmas) / steps
    values = [float(ms.sigmas[-(1 + int(k * stride))]) for k in range(steps)]
    return torch.FloatTensor(values + [0.0])


def _ddim_uniform(ms: _ModelSampling, steps: int) -> torch.Tensor:
    # Every (1000 // steps)-th table sigma from index 1 up: with steps not dividing 1000 this yields more than
    # `steps` sigmas, as ComfyUI's does.
    index = 1
    if math.isclose(float(ms.sigmas[index]), 0, abs_tol=0.00001):
        steps += 1
        values = []
    else:
        values = [0.0]
    stride = max(len(ms.sigmas) // steps, 1)
    while index < len(ms.sigmas):
        values.append(float(ms.sigmas[index]))
        index += stride
    return torch.FloatTensor(values[::-1])


def _normal(ms: _ModelSampling, steps: int, sgm: bool = False) -> torch.Tensor:
    first = ms.timestep(ms.sigma_max)  # int64 0-d tensors: 999 and 0
    last = ms.timestep(ms.sigma_min)
    append_zero = True
    if sgm:
        timesteps = torch.linspace(first, last, steps + 1)[:-1]
    else:
        if math.isclose(float(ms.sigma(last)), 0, abs_tol=0.00001):  # never for SD1 (sigma_min ~ 0.029)
            steps += 1
            append_zero = False
        timesteps = torch.linspace(first, last, steps)
    values = [float(ms.sigma(timesteps[k])) for k in range(len(timesteps))]
    if append_zero:
        values.append(0.0)
    return torch.FloatTensor(values)


def _beta(ms: _ModelSampling, steps: int, alpha: float = 0.6, beta: float = 0.6) -> torch.Tensor:
    last_index = len(ms.sigmas) - 1
    quantiles = 1 - numpy.linspace(0, 1, steps, endpoint=False)
    indices = numpy.rint(scipy.stats.beta.ppf(quantiles, alpha, beta) * last_index)
    values = []
    previous = -1
    for t in indices:  # drops only repeats of the previous index (not a full unique)
        if t != previous:
            values.append(float(ms.sigmas[int(t)]))
        previous = t
    values.append(0.0)
    return torch.FloatTensor(values)


def _linear_quadratic(ms: _ModelSampling, steps: int, threshold_noise: float = 0.025,
                      linear_steps: int | None = None) -> torch.Tensor:
    if steps == 1:
        schedule = [1.0, 0.0]
    else:
        if linear_steps is None:
            linear_steps = steps // 2
        linear_part = [k * threshold_noise / linear_steps for k in range(linear_steps)]
        step_diff = linear_steps - threshold_noise * steps
        quadratic_steps = steps - linear_steps
        quadratic_coef = step_diff / (linear_steps * quadratic_steps ** 2)
        linear_coef = threshold_noise / linear_steps - 2 * step_diff / (quadratic_steps ** 2)
        const = quadratic_coef * (linear_steps ** 2)
        quadratic_part = [quadratic_coef * (k ** 2) + linear_coef * k + const for k in range(linear_steps, steps)]
        schedule = [1.0 - v for v in linear_part + quadratic_part + [1.0]]
    return torch.FloatTensor(schedule) * ms.sigma_max


def _karras(n: int, sigma_min: float, sigma_max: float, rho: float = 7.0) -> torch.Tensor:
    ramp = torch.linspace(0, 1, n)
    min_inv_rho = sigma_min ** (1 / rho)
    max_inv_rho = sigma_max ** (1 / rho)
    return _append_zero((max_inv_rho + ramp * (min_inv_rho - max_inv_rho)) ** rho)


def _exponential(n: int, sigma_min: float, sigma_max: float) -> torch.Tensor:
    return _append_zero(torch.linspace(math.log(sigma_max), math.log(sigma_min), n).exp())


def _kl_optimal(n: int, sigma_min: float, sigma_max: float) -> torch.Tensor:
    fractions = torch.arange(n, dtype=torch.float).div_(n - 1)
    sigmas = fractions.new_zeros(n + 1)
    sigmas[:-1] = (fractions * math.atan(sigma_min) + (1 - fractions) * math.atan(sigma_max)).tan_()
    return sigmas


_MS_SCHEDULERS: dict[str, Callable[[_ModelSampling, int], torch.Tensor]] = {
    "simple": _simple,
    "sgm_uniform": lambda ms, steps: _normal(ms, steps, sgm=True),
    "ddim_uniform": _ddim_uniform,
    "beta": _beta,
    "normal": _normal,
    "linear_quadratic": _linear_quadratic,
}
_RANGE_SCHEDULERS: dict[str, Callable[[int, float, float], torch.Tensor]] = {
    "karras": _karras,
    "exponential": _exponential,
    "kl_optimal": _kl_optimal,
}


def comfyui_sigmas(betas_config: dict, scheduler: str, steps: int) -> torch.Tensor:
    """comfy.samplers.calculate_sigmas: the scheduler's sigmas for `steps` steps (float32, ending in 0)."""
    return _calculate_sigmas(_ModelSampling(betas_config), scheduler, steps)


def _calculate_sigmas(ms: _ModelSampling, scheduler: str, steps: int) -> torch.Tensor:
    if scheduler in _MS_SCHEDULERS:
        return _MS_SCHEDULERS[scheduler](ms, steps)
    if scheduler in _RANGE_SCHEDULERS:
        return _RANGE_SCHEDULERS[scheduler](steps, float(ms.sigma_min), float(ms.sigma_max))
    raise ValueError(f"unknown scheduler {scheduler!r}; expected one of {SCHEDULERS}")


def _ksampler_sigmas(ms: _ModelSampling, sampler_name: str, scheduler: str, steps: int,
                     denoise: float | None) -> torch.Tensor:
    """KSampler.set_steps / KSampler.calculate_sigmas."""

    def calculate(n: int) -> torch.Tensor:
        discard_penultimate = sampler_name in _DISCARD_PENULTIMATE_SIGMA
        sigmas = _calculate_sigmas(ms, scheduler, n + 1 if discard_penultimate else n)
        if discard_penultimate:
            sigmas = torch.cat([sigmas[:-2], sigmas[-1:]])
        return sigmas

    if denoise is None or denoise > 0.9999:
        return calculate(steps)
    if denoise <= 0.0:
        return torch.FloatTensor([])
    return calculate(int(steps / denoise))[-(steps + 1):]


# --- comfy/samplers.py: the CFG model call ----------------------------------------------------------------------

def _repeat_to_batch_size(tensor: torch.Tensor, batch_size: int) -> torch.Tensor:
    if tensor.shape[0] > batch_size:
        return tensor.narrow(0, 0, batch_size)
    if tensor.shape[0] < batch_size:
        reps = [math.ceil(batch_size / tensor.shape[0])] + [1] * (tensor.ndim - 1)
        return tensor.repeat(reps).narrow(0, 0, batch_size)
    return tensor


def _crossattn_can_concat(a: torch.Tensor, b: torch.Tensor) -> bool:  # CONDCrossAttn.can_concat
    if a.shape != b.shape:
        if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[2]:
            return False
        if math.lcm(a.shape[1], b.shape[1]) // min(a.shape[1], b.shape[1]) > 4:
            return False
    return True


def _crossattn_concat(contexts: list[torch.Tensor]) -> torch.Tensor:  # CONDCrossAttn.concat
    length = contexts[0].shape[1]
    for c in contexts[1:]:
        length = math.lcm(length, c.shape[1])
    padded = [c.repeat(1, length // c.shape[1], 1) if c.shape[1] < length else c for c in contexts]
    return torch.cat(padded)


class _CFGModel:
    """What the sampler functions call: KSamplerX0Inpaint (no mask) -> CFGGuider -> sampling_function."""

    def __init__(self, unet, ms: _ModelSampling, cond: torch.Tensor, uncond: torch.Tensor, cfg: float):
        self.unet = unet
        self.ms = ms
        self.cond = cond
        self.uncond = uncond
        self.cfg = cfg
        self.dtype = getattr(unet, "dtype", torch.float32)
        # model_options' sampler_post_cfg_function and disable_cfg1_optimization, as the CFG++ samplers set them
        self.post_cfg_functions: list[Callable[[dict], torch.Tensor]] = []
        self.disable_cfg1_optimization = False

    def _apply_model(self, x: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """BaseModel._apply_model for an eps model, with the diffusers UNet as diffusion_model."""
        xc = self.ms.calculate_input(sigma, x).to(self.dtype)
        timestep = self.ms.timestep(sigma).float()
        output = self.unet(xc, timestep, encoder_hidden_states=context.to(self.dtype)).sample
        return self.ms.calculate_denoised(sigma, output.float(), x)

    def _calc_cond_batch(self, conds: list[torch.Tensor | None], x: torch.Tensor, sigma: torch.Tensor):
        outputs = [torch.zeros_like(x) for _ in conds]
        counts = [torch.ones_like(x) * 1e-37 for _ in conds]
        pending = [(index, _repeat_to_batch_size(c, x.shape[0])) for index, c in enumerate(conds) if c is not None]
        while pending:
            head = pending[0][1]
            group = [k for k in range(len(pending)) if pending[k][1].shape[0] == head.shape[0]
                     and _crossattn_can_concat(pending[k][1], head)]
            # ComfyUI pops the group from its end: with cond first and uncond second, the batch is [uncond, cond].
            taken = [pending.pop(k) for k in reversed(group)]
            chunks = len(taken)
            x_in = torch.cat([x] * chunks)
            sigma_in = torch.cat([sigma] * chunks)
            context = _crossattn_concat([c for _, c in taken])
            denoised = self._apply_model(x_in, sigma_in, context).chunk(chunks)
            for (index, _), out in zip(taken, denoised):
                mult = torch.ones_like(x) * 1.0  # no area, no mask, strength 1.0
                outputs[index] += out * mult
                counts[index] += mult
        for index in range(len(outputs)):
            outputs[index] /= counts[index]
        return outputs

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        skip = math.isclose(self.cfg, 1.0) and not self.disable_cfg1_optimization  # the cfg == 1 optimisation
        uncond = None if skip else self.uncond
        cond_pred, uncond_pred = self._calc_cond_batch([self.cond, uncond], x, sigma)
        denoised = uncond_pred + (cond_pred - uncond_pred) * self.cfg  # cfg_function
        for function in self.post_cfg_functions:
            denoised = function({"denoised": denoised, "uncond_denoised": uncond_pred, "cond_denoised": cond_pred})
        return denoised


# --- comfy/k_diffusion/sampling.py (ComfyUI's copies) -----------------------------------------------------------

def _to_d(x, sigma, denoised):
    return (x - denoised) / sigma[(...,) + (None,) * (x.ndim - sigma.ndim)]


def _ancestral_step(sigma_from, sigma_to, eta=1.0):
    if not eta:
        return sigma_to, 0.0
    sigma_up = min(sigma_to, eta * (sigma_to ** 2 * (sigma_from ** 2 - sigma_to ** 2) / sigma_from ** 2) ** 0.5)
    sigma_down = (sigma_to ** 2 - sigma_up ** 2) ** 0.5
    return sigma_down, sigma_up


def _default_noise_sampler(x: torch.Tensor, seed: int | None):
    """ComfyUI's default_noise_sampler(x, seed): its own generator, seeded with seed + 1 on the CPU."""
    generator = None
    if seed is not None:
        if x.device == torch.device("cpu"):
            seed += 1
        generator = torch.Generator(device=x.device)
        generator.manual_seed(seed)

    def draw(sigma, sigma_next):
        return torch.randn(x.size(), dtype=x.dtype, layout=x.layout, device=x.device, generator=generator)

    return draw


class _BrownianTreeNoiseSampler:
    """ComfyUI's BrownianTreeNoiseSampler(x, sigma_min, sigma_max, seed=seed, cpu=...) with one int seed."""

    def __init__(self, x: torch.Tensor, sigma_min, sigma_max, seed: int | None, cpu: bool):
        t0, t1 = torch.as_tensor(sigma_min), torch.as_tensor(sigma_max)
        t0, t1, self.sign = (t0, t1, 1) if t0 < t1 else (t1, t0, -1)
        w0 = torch.zeros_like(x)
        if seed is None:
            seed = torch.randint(0, 2 ** 63 - 1, ()).item()
        self.cpu = cpu
        if cpu:
            t0, w0, t1 = t0.detach().cpu(), w0.detach().cpu(), t1.detach().cpu()
        self.tree = torchsde.BrownianTree(t0, w0, t1, entropy=seed)

    def __call__(self, sigma, sigma_next):
        t0, t1 = torch.as_tensor(sigma), torch.as_tensor(sigma_next)
        a, b, sign = (t0, t1, 1) if t0 < t1 else (t1, t0, -1)
        device, dtype = a.device, a.dtype
        if self.cpu:
            a, b = a.detach().cpu().float(), b.detach().cpu().float()
        w = torch.stack([self.tree(a, b)]).to(device=device, dtype=dtype) * (self.sign * sign)
        return w[0] / (t1 - t0).abs().sqrt()


def _brownian(x, sigmas, seed, cpu):
    return _BrownianTreeNoiseSampler(x, sigmas[sigmas > 0].min(), sigmas.max(), seed, cpu)


def _sample_euler(model, x, sigmas, seed):
    # s_churn = 0: no randn is drawn (k-diffusion 0.1.1 draws and discards one every step).
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        sigma_hat = sigmas[i]
        denoised = model(x, sigma_hat * s_in)
        d = _to_d(x, sigma_hat, denoised)
        x = x + d * (sigmas[i + 1] - sigma_hat)
    return x


def _sample_euler_ancestral(model, x, sigmas, seed, eta=1.0, s_noise=1.0):
    noise = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        sigma_down, sigma_up = _ancestral_step(sigmas[i], sigmas[i + 1], eta=eta)
        if sigma_down == 0:  # ComfyUI: the last step returns denoised outright
            x = denoised
        else:
            d = _to_d(x, sigmas[i], denoised)
            x = x + d * (sigma_down - sigmas[i]) + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def _sample_heun(model, x, sigmas, seed):
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        sigma_hat = sigmas[i] * (0 + 1)  # gamma = 0; ComfyUI recomputes sigma_hat like this
        denoised = model(x, sigma_hat * s_in)
        d = _to_d(x, sigma_hat, denoised)
        dt = sigmas[i + 1] - sigma_hat
        if sigmas[i + 1] == 0:
            x = x + d * dt
        else:
            x_2 = x + d * dt
            denoised_2 = model(x_2, sigmas[i + 1] * s_in)
            d_2 = _to_d(x_2, sigmas[i + 1], denoised_2)
            x = x + ((d + d_2) / 2) * dt
    return x


def _sample_dpm_2(model, x, sigmas, seed):
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        sigma_hat = sigmas[i]
        denoised = model(x, sigma_hat * s_in)
        d = _to_d(x, sigma_hat, denoised)
        if sigmas[i + 1] == 0:
            x = x + d * (sigmas[i + 1] - sigma_hat)
        else:
            sigma_mid = sigma_hat.log().lerp(sigmas[i + 1].log(), 0.5).exp()
            x_2 = x + d * (sigma_mid - sigma_hat)
            denoised_2 = model(x_2, sigma_mid * s_in)
            d_2 = _to_d(x_2, sigma_mid, denoised_2)
            x = x + d_2 * (sigmas[i + 1] - sigma_hat)
    return x


def _sample_dpm_2_ancestral(model, x, sigmas, seed, eta=1.0, s_noise=1.0):
    noise = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        sigma_down, sigma_up = _ancestral_step(sigmas[i], sigmas[i + 1], eta=eta)
        d = _to_d(x, sigmas[i], denoised)
        if sigma_down == 0:
            x = x + d * (sigma_down - sigmas[i])
        else:
            sigma_mid = sigmas[i].log().lerp(sigma_down.log(), 0.5).exp()
            x_2 = x + d * (sigma_mid - sigmas[i])
            denoised_2 = model(x_2, sigma_mid * s_in)
            d_2 = _to_d(x_2, sigma_mid, denoised_2)
            x = x + d_2 * (sigma_down - sigmas[i])
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def _lms_coeff(order, t, i, j):
    if order - 1 > i:
        raise ValueError(f"Order {order} too high for step {i}")

    def basis(tau):
        prod = 1.0
        for k in range(order):
            if j == k:
                continue
            prod *= (tau - t[i - k]) / (t[i - j] - t[i - k])
        return prod

    return integrate.quad(basis, t[i], t[i + 1], epsrel=1e-4)[0]


def _sample_lms(model, x, sigmas, seed, order=4):
    s_in = x.new_ones([x.shape[0]])
    sigmas_np = sigmas.detach().cpu().numpy()
    ds = []
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        ds.append(_to_d(x, sigmas[i], denoised))
        if len(ds) > order:
            ds.pop(0)
        if sigmas[i + 1] == 0:  # ComfyUI: the last step returns denoised outright
            x = denoised
        else:
            current = min(i + 1, order)
            coeffs = [_lms_coeff(current, sigmas_np, i, j) for j in range(current)]
            x = x + sum(c * d for c, d in zip(coeffs, reversed(ds)))
    return x


def _sample_dpmpp_2s_ancestral(model, x, sigmas, seed, eta=1.0, s_noise=1.0):
    noise = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])

    def sigma_fn(t):
        return t.neg().exp()

    def t_fn(sigma):
        return sigma.log().neg()

    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        sigma_down, sigma_up = _ancestral_step(sigmas[i], sigmas[i + 1], eta=eta)
        if sigma_down == 0:
            d = _to_d(x, sigmas[i], denoised)
            x = x + d * (sigma_down - sigmas[i])
        else:
            t, t_next = t_fn(sigmas[i]), t_fn(sigma_down)
            r = 1 / 2
            h = t_next - t
            s = t + r * h
            x_2 = (sigma_fn(s) / sigma_fn(t)) * x - (-h * r).expm1() * denoised
            denoised_2 = model(x_2, sigma_fn(s) * s_in)
            x = (sigma_fn(t_next) / sigma_fn(t)) * x - (-h).expm1() * denoised_2
        if sigmas[i + 1] > 0:
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def _lambda(sigma):  # sigma_to_half_log_snr for a non-CONST model
    return sigma.log().neg()


def _sigma_from_lambda(half_log_snr):  # half_log_snr_to_sigma for a non-CONST model
    return half_log_snr.neg().exp()


def _sample_dpmpp_sde(model, x, sigmas, seed, cpu_tree=True, eta=1.0, s_noise=1.0, r=1 / 2):
    """ComfyUI's rewrite: half-log-SNR form with alpha factors, noise over [sigma_i, sigma_s_1], denoised at 0."""
    if len(sigmas) <= 1:
        return x
    noise = _brownian(x, sigmas, seed, cpu_tree)
    s_in = x.new_ones([x.shape[0]])
    # offset_first_sigma_for_snr leaves an eps model's sigmas alone.
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            lambda_s, lambda_t = _lambda(sigmas[i]), _lambda(sigmas[i + 1])
            h = lambda_t - lambda_s
            lambda_s_1 = lambda_s + r * h
            fac = 1 / (2 * r)
            sigma_s_1 = _sigma_from_lambda(lambda_s_1)
            alpha_s = sigmas[i] * lambda_s.exp()
            alpha_s_1 = sigma_s_1 * lambda_s_1.exp()
            alpha_t = sigmas[i + 1] * lambda_t.exp()

            sd, su = _ancestral_step(lambda_s.neg().exp(), lambda_s_1.neg().exp(), eta)
            h_ = sd.log().neg() - lambda_s
            x_2 = (alpha_s_1 / alpha_s) * (-h_).exp() * x - alpha_s_1 * (-h_).expm1() * denoised
            if eta > 0 and s_noise > 0:
                x_2 = x_2 + alpha_s_1 * noise(sigmas[i], sigma_s_1) * s_noise * su
            denoised_2 = model(x_2, sigma_s_1 * s_in)

            sd, su = _ancestral_step(lambda_s.neg().exp(), lambda_t.neg().exp(), eta)
            h_ = sd.log().neg() - lambda_s
            denoised_d = (1 - fac) * denoised + fac * denoised_2
            x = (alpha_t / alpha_s) * (-h_).exp() * x - alpha_t * (-h_).expm1() * denoised_d
            if eta > 0 and s_noise > 0:
                x = x + alpha_t * noise(sigmas[i], sigmas[i + 1]) * s_noise * su
    return x


def _sample_dpmpp_2m(model, x, sigmas, seed):
    s_in = x.new_ones([x.shape[0]])

    def sigma_fn(t):
        return t.neg().exp()

    def t_fn(sigma):
        return sigma.log().neg()

    old_denoised = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        t, t_next = t_fn(sigmas[i]), t_fn(sigmas[i + 1])
        h = t_next - t
        if old_denoised is None or sigmas[i + 1] == 0:
            x = (sigma_fn(t_next) / sigma_fn(t)) * x - (-h).expm1() * denoised
        else:
            h_last = t - t_fn(sigmas[i - 1])
            r = h_last / h
            denoised_d = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * old_denoised
            x = (sigma_fn(t_next) / sigma_fn(t)) * x - (-h).expm1() * denoised_d
        old_denoised = denoised
    return x


def _sample_dpmpp_2m_sde(model, x, sigmas, seed, cpu_tree=True, solver_type="midpoint", eta=1.0, s_noise=1.0):
    """ComfyUI's version: alpha_t factors, h * (eta + 1) instead of -h - eta * h, seeded Brownian tree."""
    if len(sigmas) <= 1:
        return x
    noise = _brownian(x, sigmas, seed, cpu_tree)
    s_in = x.new_ones([x.shape[0]])
    old_denoised = None
    h, h_last = None, None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            lambda_s, lambda_t = _lambda(sigmas[i]), _lambda(sigmas[i + 1])
            h = lambda_t - lambda_s
            h_eta = h * (eta + 1)
            alpha_t = sigmas[i + 1] * lambda_t.exp()
            x = sigmas[i + 1] / sigmas[i] * (-h * eta).exp() * x + alpha_t * (-h_eta).expm1().neg() * denoised
            if old_denoised is not None:
                r = h_last / h
                if solver_type == "heun":
                    x = x + alpha_t * ((-h_eta).expm1().neg() / (-h_eta) + 1) * (1 / r) * (denoised - old_denoised)
                else:
                    x = x + 0.5 * alpha_t * (-h_eta).expm1().neg() * (1 / r) * (denoised - old_denoised)
            if eta > 0 and s_noise > 0:
                x = x + noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * (-2 * h * eta).expm1().neg().sqrt() * s_noise
        old_denoised = denoised
        h_last = h
    return x


def _sample_dpmpp_3m_sde(model, x, sigmas, seed, cpu_tree=True, eta=1.0, s_noise=1.0):
    """ComfyUI's version: sigma ratio * exp(-h * eta) instead of exp(-h_eta), alpha_t factors, seeded tree."""
    if len(sigmas) <= 1:
        return x
    noise = _brownian(x, sigmas, seed, cpu_tree)
    s_in = x.new_ones([x.shape[0]])
    denoised_1, denoised_2 = None, None
    h, h_1, h_2 = None, None, None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            lambda_s, lambda_t = _lambda(sigmas[i]), _lambda(sigmas[i + 1])
            h = lambda_t - lambda_s
            h_eta = h * (eta + 1)
            alpha_t = sigmas[i + 1] * lambda_t.exp()
            x = sigmas[i + 1] / sigmas[i] * (-h * eta).exp() * x + alpha_t * (-h_eta).expm1().neg() * denoised
            if h_2 is not None:
                r0 = h_1 / h
                r1 = h_2 / h
                d1_0 = (denoised - denoised_1) / r0
                d1_1 = (denoised_1 - denoised_2) / r1
                d1 = d1_0 + (d1_0 - d1_1) * r0 / (r0 + r1)
                d2 = (d1_0 - d1_1) / (r0 + r1)
                phi_2 = h_eta.neg().expm1() / h_eta + 1
                phi_3 = phi_2 / h_eta - 0.5
                x = x + (alpha_t * phi_2) * d1 - (alpha_t * phi_3) * d2
            elif h_1 is not None:
                r = h_1 / h
                d = (denoised - denoised_1) / r
                phi_2 = h_eta.neg().expm1() / h_eta + 1
                x = x + (alpha_t * phi_2) * d
            if eta > 0 and s_noise > 0:
                x = x + noise(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * (-2 * h * eta).expm1().neg().sqrt() * s_noise
        denoised_1, denoised_2 = denoised, denoised_1
        h_1, h_2 = h, h_1
    return x


class _DPMSolver:
    """comfy/k_diffusion/sampling.py DPMSolver (the same arithmetic as k-diffusion 0.1.1's), without callbacks."""

    def __init__(self, model, extra_args=None):
        self.model = model
        self.extra_args = {} if extra_args is None else extra_args

    def t(self, sigma):
        return -sigma.log()

    def sigma(self, t):
        return t.neg().exp()

    def eps(self, eps_cache, key, x, t):
        if key in eps_cache:
            return eps_cache[key], eps_cache
        sigma = self.sigma(t) * x.new_ones([x.shape[0]])
        eps = (x - self.model(x, sigma)) / self.sigma(t)
        return eps, {key: eps, **eps_cache}

    def dpm_solver_1_step(self, x, t, t_next, eps_cache=None):
        eps_cache = {} if eps_cache is None else eps_cache
        h = t_next - t
        eps, eps_cache = self.eps(eps_cache, "eps", x, t)
        x_1 = x - self.sigma(t_next) * h.expm1() * eps
        return x_1, eps_cache

    def dpm_solver_2_step(self, x, t, t_next, r1=1 / 2, eps_cache=None):
        eps_cache = {} if eps_cache is None else eps_cache
        h = t_next - t
        eps, eps_cache = self.eps(eps_cache, "eps", x, t)
        s1 = t + r1 * h
        u1 = x - self.sigma(s1) * (r1 * h).expm1() * eps
        eps_r1, eps_cache = self.eps(eps_cache, "eps_r1", u1, s1)
        x_2 = x - self.sigma(t_next) * h.expm1() * eps - self.sigma(t_next) / (2 * r1) * h.expm1() * (eps_r1 - eps)
        return x_2, eps_cache

    def dpm_solver_3_step(self, x, t, t_next, r1=1 / 3, r2=2 / 3, eps_cache=None):
        eps_cache = {} if eps_cache is None else eps_cache
        h = t_next - t
        eps, eps_cache = self.eps(eps_cache, "eps", x, t)
        s1 = t + r1 * h
        s2 = t + r2 * h
        u1 = x - self.sigma(s1) * (r1 * h).expm1() * eps
        eps_r1, eps_cache = self.eps(eps_cache, "eps_r1", u1, s1)
        u2 = x - self.sigma(s2) * (r2 * h).expm1() * eps - self.sigma(s2) * (r2 / r1) * (
            (r2 * h).expm1() / (r2 * h) - 1) * (eps_r1 - eps)
        eps_r2, eps_cache = self.eps(eps_cache, "eps_r2", u2, s2)
        x_3 = x - self.sigma(t_next) * h.expm1() * eps - self.sigma(t_next) / r2 * (h.expm1() / h - 1) * (eps_r2 - eps)
        return x_3, eps_cache

    def dpm_solver_fast(self, x, t_start, t_end, nfe, eta=0.0, s_noise=1.0, noise_sampler=None):
        noise_sampler = (_default_noise_sampler(x, self.extra_args.get("seed")) if noise_sampler is None
                         else noise_sampler)
        if not t_end > t_start and eta:
            raise ValueError("eta must be 0 for reverse sampling")
        m = math.floor(nfe / 3) + 1
        ts = torch.linspace(t_start, t_end, m + 1, device=x.device)
        if nfe % 3 == 0:
            orders = [3] * (m - 2) + [2, 1]
        else:
            orders = [3] * (m - 1) + [nfe % 3]
        for i in range(len(orders)):
            eps_cache = {}
            t, t_next = ts[i], ts[i + 1]
            if eta:
                sd, su = _ancestral_step(self.sigma(t), self.sigma(t_next), eta)
                t_next_ = torch.minimum(t_end, self.t(sd))
                su = (self.sigma(t_next) ** 2 - self.sigma(t_next_) ** 2) ** 0.5
            else:
                t_next_, su = t_next, 0.0
            _, eps_cache = self.eps(eps_cache, "eps", x, t)  # (and denoised from it, for the callback)
            if orders[i] == 1:
                x, eps_cache = self.dpm_solver_1_step(x, t, t_next_, eps_cache=eps_cache)
            elif orders[i] == 2:
                x, eps_cache = self.dpm_solver_2_step(x, t, t_next_, eps_cache=eps_cache)
            else:
                x, eps_cache = self.dpm_solver_3_step(x, t, t_next_, eps_cache=eps_cache)
            x = x + su * s_noise * noise_sampler(self.sigma(t), self.sigma(t_next))
        return x

    # PIDStepSizeController inlined: h, b1..b3, the limiter and propose_step as ComfyUI's class computes them.
    def dpm_solver_adaptive(self, x, t_start, t_end, order=3, rtol=0.05, atol=0.0078, h_init=0.05, pcoeff=0.0,
                            icoeff=1.0, dcoeff=0.0, accept_safety=0.81, eta=0.0, s_noise=1.0, noise_sampler=None):
        noise_sampler = (_default_noise_sampler(x, self.extra_args.get("seed")) if noise_sampler is None
                         else noise_sampler)
        forward = t_end > t_start
        if not forward and eta:
            raise ValueError("eta must be 0 for reverse sampling")
        h = abs(h_init) * (1 if forward else -1)
        atol = torch.tensor(atol)
        rtol = torch.tensor(rtol)
        s = t_start
        x_prev = x
        pid_order = 1.5 if eta else order
        b1, b2, b3 = (pcoeff + icoeff + dcoeff) / pid_order, -(pcoeff + 2 * dcoeff) / pid_order, dcoeff / pid_order
        errs = []
        while s < t_end - 1e-5 if forward else s > t_end + 1e-5:
            eps_cache = {}
            t = torch.minimum(t_end, s + h) if forward else torch.maximum(t_end, s + h)
            if eta:
                sd, su = _ancestral_step(self.sigma(s), self.sigma(t), eta)
                t_ = torch.minimum(t_end, self.t(sd))
                su = (self.sigma(t) ** 2 - self.sigma(t_) ** 2) ** 0.5
            else:
                t_, su = t, 0.0
            _, eps_cache = self.eps(eps_cache, "eps", x, s)  # (and denoised from it, for the callback)
            if order == 2:
                x_low, eps_cache = self.dpm_solver_1_step(x, s, t_, eps_cache=eps_cache)
                x_high, eps_cache = self.dpm_solver_2_step(x, s, t_, eps_cache=eps_cache)
            else:
                x_low, eps_cache = self.dpm_solver_2_step(x, s, t_, r1=1 / 3, eps_cache=eps_cache)
                x_high, eps_cache = self.dpm_solver_3_step(x, s, t_, eps_cache=eps_cache)
            delta = torch.maximum(atol, rtol * torch.maximum(x_low.abs(), x_prev.abs()))
            error = torch.linalg.norm((x_low - x_high) / delta) / x.numel() ** 0.5
            inv_error = 1 / (float(error) + 1e-8)
            if not errs:
                errs = [inv_error, inv_error, inv_error]
            errs[0] = inv_error
            factor = 1 + math.atan(errs[0] ** b1 * errs[1] ** b2 * errs[2] ** b3 - 1)
            accept = factor >= accept_safety
            if accept:
                errs[2] = errs[1]
                errs[1] = errs[0]
            h *= factor
            if accept:
                x_prev = x_low
                x = x_high + su * s_noise * noise_sampler(self.sigma(s), self.sigma(t))
                s = t
        return x


def _sample_dpm_fast(model, x, sigmas, seed):
    """comfy/samplers.py ksampler("dpm_fast") -> sample_dpm_fast(model, x, sigma_min, sigmas[0], len(sigmas) - 1)."""
    if len(sigmas) <= 1:
        return x
    sigma_min = sigmas[-1]
    if sigma_min == 0:
        sigma_min = sigmas[-2]
    sigma_max, n = sigmas[0], len(sigmas) - 1
    if sigma_min <= 0 or sigma_max <= 0:
        raise ValueError("sigma_min and sigma_max must not be 0")
    solver = _DPMSolver(model, {"seed": seed})
    return solver.dpm_solver_fast(x, solver.t(torch.tensor(sigma_max)), solver.t(torch.tensor(sigma_min)), n)


def _sample_dpm_adaptive(model, x, sigmas, seed):
    """comfy/samplers.py ksampler("dpm_adaptive") -> sample_dpm_adaptive(model, x, sigma_min, sigmas[0]), defaults."""
    if len(sigmas) <= 1:
        return x
    sigma_min = sigmas[-1]
    if sigma_min == 0:
        sigma_min = sigmas[-2]
    sigma_max = sigmas[0]
    if sigma_min <= 0 or sigma_max <= 0:
        raise ValueError("sigma_min and sigma_max must not be 0")
    solver = _DPMSolver(model, {"seed": seed})
    return solver.dpm_solver_adaptive(x, solver.t(torch.tensor(sigma_max)), solver.t(torch.tensor(sigma_min)))


def _sampler(name: str):
    """sampler_object(name); "ddim" is ksampler("euler") (its random inpaint noise only matters with a mask)."""
    table = {
        "euler": _sample_euler,
        "ddim": _sample_euler,
        "euler_ancestral": _sample_euler_ancestral,
        "heun": _sample_heun,
        "dpm_2": _sample_dpm_2,
        "dpm_2_ancestral": _sample_dpm_2_ancestral,
        "lms": _sample_lms,
        "dpm_fast": _sample_dpm_fast,
        "dpm_adaptive": _sample_dpm_adaptive,
        "dpmpp_2s_ancestral": _sample_dpmpp_2s_ancestral,
        "dpmpp_sde": lambda m, x, s, seed: _sample_dpmpp_sde(m, x, s, seed, cpu_tree=True),
        "dpmpp_sde_gpu": lambda m, x, s, seed: _sample_dpmpp_sde(m, x, s, seed, cpu_tree=False),
        "dpmpp_2m": _sample_dpmpp_2m,
        "dpmpp_2m_sde": lambda m, x, s, seed: _sample_dpmpp_2m_sde(m, x, s, seed, cpu_tree=True),
        "dpmpp_2m_sde_gpu": lambda m, x, s, seed: _sample_dpmpp_2m_sde(m, x, s, seed, cpu_tree=False),
        "dpmpp_2m_sde_heun": lambda m, x, s, seed: _sample_dpmpp_2m_sde(m, x, s, seed, True, "heun"),
        "dpmpp_2m_sde_heun_gpu": lambda m, x, s, seed: _sample_dpmpp_2m_sde(m, x, s, seed, False, "heun"),
        "dpmpp_3m_sde": lambda m, x, s, seed: _sample_dpmpp_3m_sde(m, x, s, seed, cpu_tree=True),
        "dpmpp_3m_sde_gpu": lambda m, x, s, seed: _sample_dpmpp_3m_sde(m, x, s, seed, cpu_tree=False),
    }
    table.update(MORE_SAMPLERS)
    if name not in table:
        raise ValueError(f"unknown sampler {name!r}; expected one of {SAMPLERS}")
    return table[name]


# --- the KSampler node ------------------------------------------------------------------------------------------

def comfyui_noise(latent: torch.Tensor, seed: int) -> torch.Tensor:
    """comfy.sample.prepare_noise without batch_index: one randn of the latent's size from a CPU generator."""
    generator = torch.Generator("cpu").manual_seed(seed)
    return torch.randn(latent.size(), dtype=latent.dtype, layout=latent.layout, generator=generator, device="cpu")


@torch.no_grad()
def comfyui_ksampler(unet, betas_config: dict, *, cond: torch.Tensor, uncond: torch.Tensor, seed: int,
                     latent: torch.Tensor, steps: int, cfg: float, sampler_name: str, scheduler: str,
                     denoise: float = 1.0, start_step: int | None = None, last_step: int | None = None,
                     force_full_denoise: bool = False, disable_noise: bool = False) -> torch.Tensor:
    """The KSampler node's output latents (before the VAE), on the CPU, float32.

    `latent` is a ComfyUI LATENT's samples (raw VAE latents: EmptyLatentImage's zeros or an upscaled first pass);
    the result is in the same space (sampled latents / 0.18215). KSamplerAdvanced is the same node with denoise 1
    and start_step = start_at_step, last_step = end_at_step, force_full_denoise = return_with_leftover_noise is
    "disable", disable_noise = add_noise is "disable" (nodes.py KSamplerAdvanced.sample).
    """
    if sampler_name not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler_name!r}; expected one of {SAMPLERS}")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; expected one of {SCHEDULERS}")
    ms = _ModelSampling(betas_config)
    latent = latent.detach().cpu()
    # common_ksampler: zeros instead of the seed's noise when add_noise is disabled.
    noise = torch.zeros(latent.size(), dtype=latent.dtype) if disable_noise else comfyui_noise(latent, seed)
    sigmas = _ksampler_sigmas(ms, sampler_name, scheduler, steps, denoise)
    # comfy.samplers.KSampler.sample: cut the schedule after last_step (its end set to 0 when fully denoised),
    # then start it at start_step; with no step left the input latent comes back as it is.
    if last_step is not None and last_step < len(sigmas) - 1:
        sigmas = sigmas[:last_step + 1]
        if force_full_denoise:
            sigmas[-1] = 0
    if start_step is not None:
        if start_step >= len(sigmas) - 1:
            return latent
        sigmas = sigmas[start_step:]
    if sigmas.shape[-1] == 0:  # CFGGuider.sample: denoise <= 0 returns the input latent
        return latent
    # CFGGuider.inner_sample: an all-zero latent is not shifted into the model's space.
    latent_image = latent * SD1_LATENT_SCALE_FACTOR if torch.count_nonzero(latent) > 0 else latent
    # KSAMPLER.sample / Sampler.max_denoise.
    sigma_max = float(ms.sigma_max)
    first = float(sigmas[0])
    max_denoise = math.isclose(sigma_max, first, rel_tol=1e-05) or first > sigma_max
    x = ms.noise_scaling(sigmas[0], noise, latent_image, max_denoise)
    model = _CFGModel(unet, ms, cond.detach().cpu(), uncond.detach().cpu(), cfg)
    samples = _sampler(sampler_name)(model, x, sigmas, seed)  # extra_args["seed"] is the node's seed
    return samples.to(torch.float32) / SD1_LATENT_SCALE_FACTOR  # process_latent_out


# --- LatentUpscale / LatentUpscaleBy (nodes.py, comfy/utils.py) -------------------------------------------------

def _slerp_rows(a: torch.Tensor, b: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor:
    """bislerp's slerp of rows a, b (N x C) by ratio (N x 1), rescaled to the lerped norm."""
    channels = a.shape[-1]
    a_norm = torch.norm(a, dim=-1, keepdim=True)
    b_norm = torch.norm(b, dim=-1, keepdim=True)
    a_unit = a / a_norm
    b_unit = b / b_norm
    a_unit[a_norm.expand(-1, channels) == 0.0] = 0.0
    b_unit[b_norm.expand(-1, channels) == 0.0] = 0.0
    dot = (a_unit * b_unit).sum(1)
    omega = torch.acos(dot)
    sin_omega = torch.sin(omega)
    r = ratio.squeeze(1)
    out = (torch.sin((1.0 - r) * omega) / sin_omega).unsqueeze(1) * a_unit \
        + (torch.sin(r * omega) / sin_omega).unsqueeze(1) * b_unit
    out *= (a_norm * (1.0 - ratio) + b_norm * ratio).expand(-1, channels)
    same = dot > 1 - 1e-5
    out[same] = a[same]
    opposite = dot < 1e-5 - 1
    out[opposite] = (a * (1.0 - ratio) + b * ratio)[opposite]
    return out


def _bilinear_taps(old: int, new: int, device):
    """The two source indices and the blend ratio of each output index, as bilinear interpolation picks them."""
    left = torch.arange(old, dtype=torch.float32, device=device).reshape((1, 1, 1, -1))
    left = torch.nn.functional.interpolate(left, size=(1, new), mode="bilinear")
    ratio = left - left.floor()
    left = left.to(torch.int64)
    right = torch.arange(old, dtype=torch.float32, device=device).reshape((1, 1, 1, -1)) + 1
    right[:, :, :, -1] -= 1
    right = torch.nn.functional.interpolate(right, size=(1, new), mode="bilinear")
    return ratio, left, right.to(torch.int64)


def _bislerp(samples: torch.Tensor, width: int, height: int) -> torch.Tensor:
    dtype = samples.dtype
    samples = samples.float()
    n, c, h, w = samples.shape

    ratio, left, right = _bilinear_taps(w, width, samples.device)
    left = left.expand((n, c, h, -1))
    right = right.expand((n, c, h, -1))
    ratio = ratio.expand((n, 1, h, -1))
    rows = _slerp_rows(samples.gather(-1, left).movedim(1, -1).reshape((-1, c)),
                       samples.gather(-1, right).movedim(1, -1).reshape((-1, c)),
                       ratio.movedim(1, -1).reshape((-1, 1)))
    wide = rows.reshape(n, h, width, c).movedim(-1, 1)

    ratio, top, bottom = _bilinear_taps(h, height, samples.device)
    top = top.reshape((1, 1, -1, 1)).expand((n, c, -1, width))
    bottom = bottom.reshape((1, 1, -1, 1)).expand((n, c, -1, width))
    ratio = ratio.reshape((1, 1, -1, 1)).expand((n, 1, -1, width))
    rows = _slerp_rows(wide.gather(-2, top).movedim(1, -1).reshape((-1, c)),
                       wide.gather(-2, bottom).movedim(1, -1).reshape((-1, c)),
                       ratio.movedim(1, -1).reshape((-1, 1)))
    return rows.reshape(n, height, width, c).movedim(-1, 1).to(dtype)


def _common_upscale(samples: torch.Tensor, width: int, height: int, method: str, crop: str) -> torch.Tensor:
    """comfy.utils.common_upscale for 4-d latents; width and height in latent pixels."""
    if method not in LATENT_UPSCALE_METHODS:
        raise ValueError(f"unknown upscale method {method!r}; expected one of {LATENT_UPSCALE_METHODS}")
    if crop not in LATENT_CROP_METHODS:
        raise ValueError(f"unknown crop {crop!r}; expected one of {LATENT_CROP_METHODS}")
    if crop == "center":
        old_w, old_h = samples.shape[-1], samples.shape[-2]
        old_aspect, new_aspect = old_w / old_h, width / height
        x0 = y0 = 0
        if old_aspect > new_aspect:
            x0 = round((old_w - old_w * (new_aspect / old_aspect)) / 2)
        elif old_aspect < new_aspect:
            y0 = round((old_h - old_h * (old_aspect / new_aspect)) / 2)
        samples = samples.narrow(-2, y0, old_h - y0 * 2).narrow(-1, x0, old_w - x0 * 2)
    if method == "bislerp":
        return _bislerp(samples, width, height)
    return torch.nn.functional.interpolate(samples, size=(height, width), mode=method)


@torch.no_grad()
def comfyui_latent_upscale(latent: torch.Tensor, method: str, width: int, height: int,
                           crop: str = "disabled") -> torch.Tensor:
    """LatentUpscale (pixel width/height, /8 as ComfyUI does)."""
    if width == 0 and height == 0:
        return latent
    if width == 0:
        height = max(64, height)
        width = max(64, round(latent.shape[-1] * height / latent.shape[-2]))
    elif height == 0:
        width = max(64, width)
        height = max(64, round(latent.shape[-2] * width / latent.shape[-1]))
    else:
        width = max(64, width)
        height = max(64, height)
    return _common_upscale(latent, width // 8, height // 8, method, crop)


@torch.no_grad()
def comfyui_latent_upscale_by(latent: torch.Tensor, method: str, scale_by: float) -> torch.Tensor:
    """LatentUpscaleBy."""
    width = round(latent.shape[-1] * scale_by)
    height = round(latent.shape[-2] * scale_by)
    return _common_upscale(latent, width, height, method, "disabled")


import tests.reference.comfyui_samplers  # noqa: E402  (adds ComfyUI's other samplers above)
import tests.reference.unipc  # noqa: E402, F401  (adds uni_pc and uni_pc_bh2 above)
