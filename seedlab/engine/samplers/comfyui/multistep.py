"""ComfyUI's multistep samplers (comfy/k_diffusion/sampling.py, October 2025): one model call a step, earlier steps'
derivatives or predictions kept: iPNDM and its variable-step twin, RES multistep (its ancestral and CFG++ presets),
gradient estimation, ER-SDE. DEIS and SA-Solver, whose weights are integrals, are in adams.py.

Terms are written in ComfyUI's order so that the latents are the same to the bit (tests/test_comfy_samplers_more.py);
a CFG++ preset reads `model.uncond_denoised` as cfgpp.py explains.
"""

from __future__ import annotations

import torch

from .. import kdiffusion
from ..kdiffusion import Denoiser, NoiseFn

# iPNDM's fixed Adams-Bashforth weights by order: (weights of d and the newest stored derivatives, divisor)
_IPNDM = {2: ((3, -1), 2), 3: ((23, -16, 5), 12), 4: ((55, -59, 37, -9), 24)}


def _remember(derivatives: list, d, order: int) -> list:
    """The derivatives a step of at most `order` reads: the newest order - 1, oldest first."""
    return [*derivatives, d][-(order - 1):]


def _ipndm(model: Denoiser, x, sigmas, max_order: int, weights_of):
    """The iPNDM loop both samplers share: Adams-Bashforth in sigma on the derivatives kept, the denoised latents at
    the last step. `weights_of(sigmas, i, order)`: the weights of d and the stored derivatives, and their divisor."""
    ones, derivatives = x.new_ones([x.shape[0]]), []
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        d = (x - denoised) / sigmas[i]
        order = min(max_order, i + 1)
        if sigmas[i + 1] == 0:
            x_next = denoised
        elif order == 1:
            x_next = x + (sigmas[i + 1] - sigmas[i]) * d
        else:
            weights, divisor = weights_of(sigmas, i, order)
            total = weights[0] * d
            for k in range(1, order):
                total = total + weights[k] * derivatives[-k]
            step = (sigmas[i + 1] - sigmas[i]) * total  # then / divisor: ComfyUI's order of operations, to the bit
            x_next = x + (step / divisor if divisor != 1 else step)
        x, derivatives = x_next, _remember(derivatives, d, max_order)
    return x


def ipndm(model: Denoiser, x, sigmas, noise: NoiseFn, max_order: int = 4):
    """sample_ipndm: iPNDM with the fixed weights of equal steps."""
    return _ipndm(model, x, sigmas, max_order, lambda sigmas, i, order: _IPNDM[order])


def _ipndm_v_weights(sigmas, i: int, order: int) -> tuple:
    """sample_ipndm_v's weights of d and the stored derivatives, newest first, for unequal steps (order 2 to 4)."""
    h, h1 = sigmas[i + 1] - sigmas[i], sigmas[i] - sigmas[i - 1]
    if order == 2:
        return (2 + (h / h1)) / 2, -(h / h1) / 2
    h2 = sigmas[i - 1] - sigmas[i - 2]
    temp1 = (1 - h / (3 * (h + h1)) * (h * (h + h1)) / (h1 * (h1 + h2))) / 2
    if order == 3:
        return (2 + (h / h1)) / 2 + temp1, -(h / h1) / 2 - (1 + h1 / h2) * temp1, temp1 * h1 / h2
    h3 = sigmas[i - 2] - sigmas[i - 3]
    temp2 = ((1 - h / (3 * (h + h1))) / 2 + (1 - h / (2 * (h + h1))) * h / (6 * (h + h1 + h2))) \
        * (h * (h + h1) * (h + h1 + h2)) / (h1 * (h1 + h2) * (h1 + h2 + h3))
    ratio = h1 * (h1 + h2) / (h2 * (h2 + h3))
    return ((2 + (h / h1)) / 2 + temp1 + temp2,
            -(h / h1) / 2 - (1 + h1 / h2) * temp1 - (1 + (h1 / h2) + ratio) * temp2,
            temp1 * h1 / h2 + ((h1 / h2) + ratio * (1 + h2 / h3)) * temp2,
            -temp2 * ratio * h1 / h2)


def ipndm_v(model: Denoiser, x, sigmas, noise: NoiseFn, max_order: int = 4):
    """sample_ipndm_v: iPNDM with weights for the schedule's unequal steps."""
    return _ipndm(model, x, sigmas, max_order, lambda sigmas, i, order: (_ipndm_v_weights(sigmas, i, order), 1))


def _res_weights(sigmas, i: int, sigma_down, old_sigma_down):
    """res_multistep's (h, b1, b2): the exponential integrator's weights of this and the last prediction."""
    t, t_next = kdiffusion.sigma_to_t(sigmas[i]), kdiffusion.sigma_to_t(sigma_down)
    h = t_next - t
    c2 = (kdiffusion.sigma_to_t(sigmas[i - 1]) - kdiffusion.sigma_to_t(old_sigma_down)) / h
    phi1 = kdiffusion.expm1(-h) / -h
    phi2 = (phi1 - 1.0) / -h
    return h, torch.nan_to_num(phi1 - phi2 / c2, nan=0.0), torch.nan_to_num(phi2 / c2, nan=0.0)


def res_multistep(model: Denoiser, x, sigmas, noise: NoiseFn, eta: float = 0.0, cfg_pp: bool = False,
                  s_noise: float = 1.0):
    """res_multistep (res_multistep: eta 0, _ancestral: eta 1; _cfg_pp: the step follows the uncond). Its noise is
    drawn at every step but the last, times sigma_up (0 at eta 0), as ComfyUI draws it."""
    ones = x.new_ones([x.shape[0]])
    old_sigma_down = old = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        followed = model.uncond_denoised if cfg_pp else denoised
        sigma_down, sigma_up = kdiffusion.ancestral_step(sigmas[i], sigmas[i + 1], eta)
        if sigma_down == 0 or old is None:
            if cfg_pp:
                x = denoised + kdiffusion.to_d(x, sigmas[i], followed) * sigma_down
            else:
                x = x + kdiffusion.to_d(x, sigmas[i], denoised) * (sigma_down - sigmas[i])
        else:
            h, b1, b2 = _res_weights(sigmas, i, sigma_down, old_sigma_down)
            if cfg_pp:
                x = x + (denoised - followed)
            x = kdiffusion.t_to_sigma(h) * x + h * (b1 * followed + b2 * old)
        if sigmas[i + 1] > 0:
            x = x + noise(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
        old, old_sigma_down = followed, sigma_down
    return x


def gradient_estimation(model: Denoiser, x, sigmas, noise: NoiseFn, ge_gamma: float = 2.0, cfg_pp: bool = False):
    """sample_gradient_estimation (and _cfg_pp): Euler plus (ge_gamma - 1) times the change of the derivative."""
    ones, old_d = x.new_ones([x.shape[0]]), None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        d = kdiffusion.to_d(x, sigmas[i], model.uncond_denoised if cfg_pp else denoised)
        dt = sigmas[i + 1] - sigmas[i]
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            x = denoised + d * sigmas[i + 1] if cfg_pp else x + d * dt
            if i >= 1:
                x = x + (ge_gamma - 1) * (d - old_d) * dt
        old_d = d
    return x


def _er_scale(v):
    """ER-SDE's default noise scaler."""
    return v * ((v ** 0.3).exp() + 10.0)


def _er_integrals(er_s, er_t, points: torch.Tensor):
    """ER-SDE's two integrals over [er_t, er_s] by 200-point sums: (dt, s, s_u)."""
    dt = er_t - er_s
    step = -dt / 200.0
    positions = er_t + points * step
    scaled = _er_scale(positions)
    return dt, torch.sum(1 / scaled) * step, torch.sum((positions - er_s) / scaled) * step


def er_sde(model: Denoiser, x, sigmas, noise: NoiseFn, s_noise: float = 1.0, max_stage: int = 3):
    """sample_er_sde: the VP ER-SDE-Solver-3, in er_lambda = sigma / alpha (exp(log sigma) for an eps model)."""
    ones = x.new_ones([x.shape[0]])
    points = torch.arange(0, 200.0, dtype=torch.float32, device=x.device)
    er = kdiffusion.sigma_to_t(sigmas).neg().exp()
    old = old_d = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * ones)
        if sigmas[i + 1] == 0:
            x, old = denoised, denoised
            continue
        alpha_t = sigmas[i + 1] / er[i + 1]
        r = _er_scale(er[i + 1]) / _er_scale(er[i])
        x = alpha_t / (sigmas[i] / er[i]) * r * x + alpha_t * (1 - r) * denoised
        if i >= 1 and max_stage >= 2:
            dt, s, s_u = _er_integrals(er[i], er[i + 1], points)
            d = (denoised - old) / (er[i] - er[i - 1])
            x = x + alpha_t * (dt + s * _er_scale(er[i + 1])) * d
            if i >= 2 and max_stage >= 3:
                d_u = (d - old_d) / ((er[i] - er[i - 2]) / 2)
                x = x + alpha_t * ((dt ** 2) / 2 + s_u * _er_scale(er[i + 1])) * d_u
            old_d = d
        if s_noise > 0:
            spread = (er[i + 1] ** 2 - er[i] ** 2 * r ** 2).sqrt().nan_to_num(nan=0.0)
            x = x + alpha_t * noise(sigmas[i], sigmas[i + 1]) * s_noise * spread
        old = denoised
    return x
