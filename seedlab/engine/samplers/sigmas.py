"""Noise levels: a model's discrete sigmas and the schedules A1111 and ComfyUI pick from them.

A k-diffusion sampler walks a decreasing list of sigmas (noise standard deviations) that ends in 0.
The model was trained on 1000 discrete levels, sigma_t = sqrt((1 - alphas_cumprod_t) / alphas_cumprod_t);
`ModelSigmas` maps between a sigma and the (fractional) timestep the UNet is called with, by linear
interpolation in log sigma, as k-diffusion's DiscreteSchedule does (A1111 leaves quantization off;
ComfyUI rounds to the nearest timestep).

Schedules are keyed by the names the tools write: A1111's "Schedule type" labels (Karras, Exponential,
...) and ComfyUI's `scheduler` values (karras, exponential, ...). Each returns float32 sigmas with a
trailing 0, computed on the CPU as those tools compute them (the same torch or numpy operations, in
the same order, so the values agree to the bit).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from .. import cpu

# Align Your Steps (NVIDIA's published tables; A1111 and ComfyUI interpolate them log-linearly).
AYS_SD15 = (14.615, 6.475, 3.861, 2.697, 1.886, 1.396, 0.963, 0.652, 0.399, 0.152, 0.029)
AYS_SDXL = (14.615, 6.315, 3.771, 2.181, 1.342, 0.862, 0.555, 0.380, 0.234, 0.113, 0.029)
BETA_ALPHA = BETA_BETA = 0.6  # A1111's and ComfyUI's defaults for the Beta schedule


class ModelSigmas:
    """A discrete-time model's sigmas (ascending, float32) and its sigma <-> timestep maps."""

    def __init__(self, alphas_cumprod: torch.Tensor, *, quantize: bool = False):
        alphas_cumprod = alphas_cumprod.to(torch.float32)
        self.sigmas = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5
        self.log_sigmas = self.sigmas.log()
        self.quantize = quantize

    @classmethod
    def from_config(cls, config: dict, *, quantize: bool = False) -> ModelSigmas:
        """From a diffusers scheduler config, with alphas_cumprod computed as the original (CompVis) code does."""
        return cls(torch.tensor(alphas_cumprod(config), dtype=torch.float32), quantize=quantize)

    @property
    def sigma_min(self) -> float:
        return self.sigmas[0].item()

    @property
    def sigma_max(self) -> float:
        return self.sigmas[-1].item()

    def sigma_to_t(self, sigma: torch.Tensor) -> torch.Tensor:
        """The timestep of a sigma: fractional (A1111), or the nearest level's (ComfyUI, quantize=True)."""
        log_sigma = sigma.log()
        dists = log_sigma - self.log_sigmas[:, None]
        if self.quantize:
            return dists.abs().argmin(dim=0).view(sigma.shape)
        low = dists.ge(0).cumsum(dim=0).argmax(dim=0).clamp(max=self.log_sigmas.shape[0] - 2)
        high = low + 1
        low_log, high_log = self.log_sigmas[low], self.log_sigmas[high]
        weight = ((low_log - log_sigma) / (low_log - high_log)).clamp(0, 1)
        return ((1 - weight) * low + weight * high).view(sigma.shape)

    def t_to_sigma(self, t: torch.Tensor) -> torch.Tensor:
        """The sigma at timestep `t`, float32; a float64 `t` (the universal baseline) is interpolated in float64."""
        if t.dtype == torch.float64:
            low, high, weight = t.floor().long(), t.ceil().long(), t.frac()
            logs = self.log_sigmas.double()
            return ((1 - weight) * logs[low] + weight * logs[high]).exp().float()
        t = t.float()
        low, high, weight = t.floor().long(), t.ceil().long(), t.frac()
        return ((1 - weight) * self.log_sigmas[low] + weight * self.log_sigmas[high]).exp()

    def uniform(self, n: int) -> torch.Tensor:
        """n sigmas at evenly spaced timesteps from the last to the first, then 0 (k-diffusion's get_sigmas)."""
        t = torch.linspace(len(self.sigmas) - 1, 0, n, dtype=_computed())
        return _append_zero(self.t_to_sigma(t))


def alphas_cumprod(config: dict) -> np.ndarray:
    """A diffusers scheduler config's alphas_cumprod in float64, as CompVis/LDM (which A1111 runs) computes them.

    LDM computes betas and their cumulative product in float64 and stores float32 (alphas_cumprod, and the float64
    square roots as sqrt_alphas_cumprod...); diffusers computes them in float32, which differs in the last bits.
    """
    count = int(config.get("num_train_timesteps", 1000))
    start, end = float(config.get("beta_start", 0.00085)), float(config.get("beta_end", 0.012))
    kind = config.get("beta_schedule", "scaled_linear")
    if config.get("trained_betas") is not None:
        betas = np.asarray(config["trained_betas"], dtype=np.float64)
    elif kind == "scaled_linear":
        betas = (torch.linspace(start ** 0.5, end ** 0.5, count, dtype=torch.float64) ** 2).numpy()
    elif kind == "linear":
        betas = np.linspace(start, end, count, dtype=np.float64)
    else:
        raise ValueError(f"the beta schedule {kind!r:.40} has no A1111/ComfyUI sigmas: choose a diffusers scheduler")
    return np.cumprod(1.0 - betas, axis=0)


def _append_zero(sigmas: torch.Tensor) -> torch.Tensor:
    sigmas = sigmas.float()  # a schedule computed in float64 (the universal baseline) is rounded once, here
    return torch.cat([sigmas, sigmas.new_zeros([1])])


def _computed() -> torch.dtype:
    """The dtype schedules are computed in: float32, as A1111 and ComfyUI compute them, or float64 under the
    universal baseline, since a float32 linspace, pow, exp or tan of a vector rounds by the CPU's instruction set."""
    return torch.float64 if cpu.is_universal() else torch.float32


def karras(n: int, sigma_min: float, sigma_max: float, rho: float = 7.0) -> torch.Tensor:
    """Karras et al. (2022): evenly spaced in sigma ** (1 / rho)."""
    ramp = torch.linspace(0, 1, n, dtype=_computed())
    low, high = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return _append_zero((high + ramp * (low - high)) ** rho)


def exponential(n: int, sigma_min: float, sigma_max: float) -> torch.Tensor:
    """Evenly spaced in log sigma."""
    return _append_zero(torch.linspace(math.log(sigma_max), math.log(sigma_min), n, dtype=_computed()).exp())


def polyexponential(n: int, sigma_min: float, sigma_max: float, rho: float = 1.0) -> torch.Tensor:
    """A polynomial of degree rho in log sigma (rho 1: exponential)."""
    ramp = torch.linspace(1, 0, n, dtype=_computed()) ** rho
    return _append_zero(torch.exp(ramp * (math.log(sigma_max) - math.log(sigma_min)) + math.log(sigma_min)))


def timestep_spaced(model: ModelSigmas, n: int, sigma_min: float, sigma_max: float, *, sgm: bool) -> torch.Tensor:
    """A1111's Normal and SGM Uniform: timesteps evenly spaced between those of sigma_max and sigma_min.

    SGM Uniform takes n of n + 1 points and so never reaches sigma_min.
    """
    start, end = model.sigma_to_t(torch.tensor(sigma_max)), model.sigma_to_t(torch.tensor(sigma_min))
    if _computed() == torch.float64:
        start, end = float(start), float(end)
    timesteps = (torch.linspace(start, end, n + 1, dtype=_computed())[:-1] if sgm
                 else torch.linspace(start, end, n, dtype=_computed()))
    return torch.FloatTensor([model.t_to_sigma(t) for t in timesteps] + [0.0])


def simple(model: ModelSigmas, n: int) -> torch.Tensor:
    """Every len/n-th level from the top (A1111's and ComfyUI's Simple)."""
    stride = len(model.sigmas) / n
    return torch.FloatTensor([float(model.sigmas[-(1 + int(x * stride))]) for x in range(n)] + [0.0])


def ddim_levels(model: ModelSigmas, n: int) -> torch.Tensor:
    """DDIM's spacing: every (len // n)-th level from the second, top down."""
    stride = max(len(model.sigmas) // n, 1)
    levels = [float(model.sigmas[x]) for x in range(1, len(model.sigmas), stride)]
    return torch.FloatTensor(levels[::-1] + [0.0])


def kl_optimal(n: int, sigma_min: float, sigma_max: float) -> torch.Tensor:
    """Evenly spaced in arctan(sigma) (Sabour et al., 2024). No trailing 0 is added: the last is sigma_min."""
    if _computed() == torch.float64:
        alpha_min, alpha_max = math.atan(sigma_min), math.atan(sigma_max)
        steps = torch.arange(n + 1, dtype=torch.float64)
        return torch.tan(steps / n * alpha_min + (1.0 - steps / n) * alpha_max).float()
    alpha_min, alpha_max = torch.arctan(torch.tensor(sigma_min)), torch.arctan(torch.tensor(sigma_max))
    steps = torch.arange(n + 1)
    return torch.tan(steps / n * alpha_min + (1.0 - steps / n) * alpha_max)


def align_your_steps(n: int, table: tuple[float, ...]) -> torch.Tensor:
    """NVIDIA's 10-step table, interpolated log-linearly to n steps."""
    if n == len(table):
        return torch.FloatTensor([*table, 0.0])
    xs = np.linspace(0, 1, len(table))
    ys = np.log(np.asarray(table[::-1]))
    interpolated = np.exp(np.interp(np.linspace(0, 1, n), xs, ys))[::-1].copy()
    return torch.FloatTensor(np.append(interpolated, [0.0]))


def beta(n: int, sigma_min: float, sigma_max: float, alpha: float = BETA_ALPHA,
         beta_: float = BETA_BETA) -> torch.Tensor:
    """A1111's Beta schedule (Lee et al., 2024): sigmas at the quantiles of a Beta distribution."""
    from scipy import stats  # imported when used: scipy is heavy

    quantiles = [stats.beta.ppf(x, alpha, beta_) for x in 1 - np.linspace(0, 1, n)]
    return torch.FloatTensor([sigma_min + (x * (sigma_max - sigma_min)) for x in quantiles] + [0.0])


ScheduleFn = Callable[..., torch.Tensor]
