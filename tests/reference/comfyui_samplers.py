"""A reference re-creation of ComfyUI's other KSampler samplers (every KSAMPLER_NAMES entry that
tests/reference/comfyui.py does not re-create, uni_pc and uni_pc_bh2 aside), for tests.

It follows ComfyUI's sources step by step at COMFYUI_COMMIT (master on 2025-10-12, the last commit of October 2025
this session could read; the samplers' files did not change again before November) and adds each sampler to
tests/reference/comfyui.py's KSampler harness (MORE_SAMPLERS, SAMPLERS), which drives it exactly as it drives the
others: fn(model, x, sigmas, seed), `seed` being extra_args["seed"] (the node's seed). The names in brackets say
which ComfyUI function each part re-creates:

- comfy/k_diffusion/sampling.py: sample_euler_ancestral_cfg_pp / sample_euler_cfg_pp, sample_dpmpp_2s_ancestral_cfg_pp,
  sample_dpmpp_2m_cfg_pp, sample_heunpp2, generic_step_sampler + DDPMSampler_step (sample_ddpm), sample_lcm,
  sample_ipndm, sample_ipndm_v, sample_deis, res_multistep and its four presets, sample_gradient_estimation(_cfg_pp),
  sample_er_sde, sample_seeds_2, sample_seeds_3, sample_sa_solver(_pece); sigma_to_half_log_snr,
  half_log_snr_to_sigma, offset_first_sigma_for_snr and ei_h_phi_1/2 for an eps (non-CONST) model.
- comfy/k_diffusion/deis.py: get_deis_coeff_list in "tab" mode (edm2t, cal_poly, cal_intergrand).
- comfy/k_diffusion/sa_solver.py: compute_exponential_coeffs, compute_stochastic_adams_b_coeffs, get_tau_interval_func.
- comfy/model_sampling.py: ModelSamplingDiscrete.percent_to_sigma; EPS.noise_scaling (LCM's re-noising).
- comfy/model_patcher.py / comfy/samplers.py: set_model_options_post_cfg_function(..., disable_cfg1_optimization=True)
  and cfg_function's sampler_post_cfg_function, through which the CFG++ samplers read the negative prompt's denoised.

default_noise_sampler: in October 2025 its generator is seeded with the seed; since PR 11528 (December 2025) with
seed + 1 on the CPU. CPU_SEED_OFFSET picks which (1 by default, as tests/reference/comfyui.py's own samplers).
What changed after October 2025: dpmpp_2s_ancestral_cfg_pp was rewritten (a guidance vector added after each step,
and the second model call's uncond no longer mixed in; not re-created); sa_solver returns its last predictor's state
(the same image when the schedule ends at 0, as every KSampler's does); seeds_2 gained a phi_2 solver type and the
exp_heun_2_x0 / exp_heun_2_x0_sde presets (new names, re-created here from LATER_COMMIT); lcm gained s_noise options
(their defaults change nothing).
"""

from __future__ import annotations

import math

import numpy as np
import torch

import tests.reference.comfyui as base

COMFYUI_COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"  # Comfy-Org/ComfyUI master, 2025-10-12
LATER_COMMIT = "02159d814dee609acc27994c1bf25fc5b40e2aaa"  # a 2026 master: exp_heun_2_x0 and _sde (PR 11360) only
CPU_SEED_OFFSET = 1  # default_noise_sampler's seed on the CPU: + 1 since PR 11528 (December 2025), + 0 before


def _default_noise_sampler(x: torch.Tensor, seed: int):
    """default_noise_sampler(x, seed): a generator of its own (seed + CPU_SEED_OFFSET on the CPU)."""
    generator = torch.Generator(device=x.device)
    generator.manual_seed(seed + CPU_SEED_OFFSET if x.device == torch.device("cpu") else seed)

    def draw(sigma, sigma_next):
        return torch.randn(x.size(), dtype=x.dtype, layout=x.layout, device=x.device, generator=generator)

    return draw


def _capture_uncond(model) -> list:
    """set_model_options_post_cfg_function(post_cfg_function, disable_cfg1_optimization=True): after every model
    call, holder[0] is that call's uncond_denoised (the negative prompt is evaluated at cfg 1 too)."""
    holder = [None]

    def post_cfg_function(args):
        holder[0] = args["uncond_denoised"]
        return args["denoised"]

    model.post_cfg_functions.append(post_cfg_function)
    model.disable_cfg1_optimization = True
    return holder


def _lambda(sigma):  # sigma_to_half_log_snr, non-CONST
    return sigma.log().neg()


def _sigma(half_log_snr):  # half_log_snr_to_sigma, non-CONST
    return half_log_snr.neg().exp()


def _percent_to_sigma(ms, percent: float) -> float:  # ModelSamplingDiscrete.percent_to_sigma
    if percent <= 0.0:
        return 999999999.9
    if percent >= 1.0:
        return 0.0
    percent = 1.0 - percent
    return ms.sigma(torch.tensor(percent * 999.0)).item()


# --- CFG++ ------------------------------------------------------------------------------------------------------

def _sample_euler_ancestral_cfg_pp(model, x, sigmas, seed, eta=1.0, s_noise=1.0):
    """sample_euler_ancestral_cfg_pp (sample_euler_cfg_pp: eta 0, s_noise 0)."""
    noise_sampler = _default_noise_sampler(x, seed)
    uncond = _capture_uncond(model)
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        alpha_s = sigmas[i] * _lambda(sigmas[i]).exp()
        alpha_t = sigmas[i + 1] * _lambda(sigmas[i + 1]).exp()
        d = base._to_d(x, sigmas[i], alpha_s * uncond[0])
        sigma_down, sigma_up = base._ancestral_step(sigmas[i] / alpha_s, sigmas[i + 1] / alpha_t, eta=eta)
        sigma_down = alpha_t * sigma_down
        x = alpha_t * denoised + sigma_down * d
        if eta > 0 and s_noise > 0:
            x = x + alpha_t * noise_sampler(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def _sample_dpmpp_2s_ancestral_cfg_pp(model, x, sigmas, seed, eta=1.0, s_noise=1.0):
    """sample_dpmpp_2s_ancestral_cfg_pp as of October 2025: temp[0] is read again after the second model call."""
    noise_sampler = _default_noise_sampler(x, seed)
    temp = _capture_uncond(model)
    s_in = x.new_ones([x.shape[0]])

    def sigma_fn(t):
        return t.neg().exp()

    def t_fn(sigma):
        return sigma.log().neg()

    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        sigma_down, sigma_up = base._ancestral_step(sigmas[i], sigmas[i + 1], eta=eta)
        if sigma_down == 0:
            d = base._to_d(x, sigmas[i], temp[0])
            x = denoised + d * sigma_down
        else:
            t, t_next = t_fn(sigmas[i]), t_fn(sigma_down)
            r = 1 / 2
            h = t_next - t
            s = t + r * h
            x_2 = (sigma_fn(s) / sigma_fn(t)) * (x + (denoised - temp[0])) - (-h * r).expm1() * denoised
            denoised_2 = model(x_2, sigma_fn(s) * s_in)  # this call replaces temp[0]
            x = (sigma_fn(t_next) / sigma_fn(t)) * (x + (denoised - temp[0])) - (-h).expm1() * denoised_2
        if sigmas[i + 1] > 0:
            x = x + noise_sampler(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
    return x


def _sample_dpmpp_2m_cfg_pp(model, x, sigmas, seed):
    """sample_dpmpp_2m_cfg_pp."""
    uncond = _capture_uncond(model)
    s_in = x.new_ones([x.shape[0]])

    def t_fn(sigma):
        return sigma.log().neg()

    old_uncond_denoised = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        t, t_next = t_fn(sigmas[i]), t_fn(sigmas[i + 1])
        h = t_next - t
        if old_uncond_denoised is None or sigmas[i + 1] == 0:
            denoised_mix = -torch.exp(-h) * uncond[0]
        else:
            h_last = t - t_fn(sigmas[i - 1])
            r = h_last / h
            denoised_mix = -torch.exp(-h) * uncond[0] - torch.expm1(-h) * (1 / (2 * r)) * (
                denoised - old_uncond_denoised)
        x = denoised + denoised_mix + torch.exp(-h) * x
        old_uncond_denoised = uncond[0]
    return x


# --- single-step samplers ---------------------------------------------------------------------------------------

def _sample_heunpp2(model, x, sigmas, seed):
    """sample_heunpp2 at s_churn 0 (its torch.randn_like draw on the global generator is never used then)."""
    s_in = x.new_ones([x.shape[0]])
    s_end = sigmas[-1]
    for i in range(len(sigmas) - 1):
        sigma_hat = sigmas[i] * (0.0 + 1)  # gamma = min(0 / steps, sqrt(2) - 1) = 0
        denoised = model(x, sigma_hat * s_in)
        d = base._to_d(x, sigma_hat, denoised)
        dt = sigmas[i + 1] - sigma_hat
        if sigmas[i + 1] == s_end:
            x = x + d * dt
        elif sigmas[i + 2] == s_end:
            x_2 = x + d * dt
            denoised_2 = model(x_2, sigmas[i + 1] * s_in)
            d_2 = base._to_d(x_2, sigmas[i + 1], denoised_2)
            w = 2 * sigmas[0]
            w2 = sigmas[i + 1] / w
            w1 = 1 - w2
            x = x + (d * w1 + d_2 * w2) * dt
        else:
            x_2 = x + d * dt
            denoised_2 = model(x_2, sigmas[i + 1] * s_in)
            d_2 = base._to_d(x_2, sigmas[i + 1], denoised_2)
            dt_2 = sigmas[i + 2] - sigmas[i + 1]
            x_3 = x_2 + d_2 * dt_2
            denoised_3 = model(x_3, sigmas[i + 2] * s_in)
            d_3 = base._to_d(x_3, sigmas[i + 2], denoised_3)
            w = 3 * sigmas[0]
            w2 = sigmas[i + 1] / w
            w3 = sigmas[i + 2] / w
            w1 = 1 - w2 - w3
            x = x + (w1 * d + w2 * d_2 + w3 * d_3) * dt
    return x


def _ddpm_step(x, sigma, sigma_prev, noise, noise_sampler):  # DDPMSampler_step
    alpha_cumprod = 1 / ((sigma * sigma) + 1)
    alpha_cumprod_prev = 1 / ((sigma_prev * sigma_prev) + 1)
    alpha = alpha_cumprod / alpha_cumprod_prev
    mu = (1.0 / alpha).sqrt() * (x - (1 - alpha) * noise / (1 - alpha_cumprod).sqrt())
    if sigma_prev > 0:
        mu += ((1 - alpha) * (1. - alpha_cumprod_prev) / (1. - alpha_cumprod)).sqrt() * noise_sampler(sigma, sigma_prev)
    return mu


def _sample_ddpm(model, x, sigmas, seed):
    """sample_ddpm = generic_step_sampler(..., DDPMSampler_step)."""
    noise_sampler = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        x = _ddpm_step(x / torch.sqrt(1.0 + sigmas[i] ** 2.0), sigmas[i], sigmas[i + 1], (x - denoised) / sigmas[i],
                       noise_sampler)
        if sigmas[i + 1] != 0:
            x *= torch.sqrt(1.0 + sigmas[i + 1] ** 2.0)
    return x


def _sample_lcm(model, x, sigmas, seed):
    """sample_lcm: the denoised latents, re-noised to the next sigma by EPS.noise_scaling (max_denoise False)."""
    noise_sampler = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        x = denoised
        if sigmas[i + 1] > 0:
            noise = noise_sampler(sigmas[i], sigmas[i + 1]) * sigmas[i + 1].view(())
            noise += x
            x = noise
    return x


def _sample_seeds_2(model, x, sigmas, seed, eta=1.0, s_noise=1.0, r=0.5, solver_type="phi_1"):
    """sample_seeds_2; its phi_2 update (solver_type) and the exp_heun_2_x0 / _sde presets came with PR 11360
    (December 2025) and were read at LATER_COMMIT."""
    noise_sampler = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])
    inject_noise = eta > 0 and s_noise > 0
    fac = 1 / (2 * r)
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        lambda_s, lambda_t = _lambda(sigmas[i]), _lambda(sigmas[i + 1])
        h = lambda_t - lambda_s
        h_eta = h * (eta + 1)
        lambda_s_1 = torch.lerp(lambda_s, lambda_t, r)
        sigma_s_1 = _sigma(lambda_s_1)
        alpha_s_1 = sigma_s_1 * lambda_s_1.exp()
        alpha_t = sigmas[i + 1] * lambda_t.exp()
        x_2 = sigma_s_1 / sigmas[i] * (-r * h * eta).exp() * x - alpha_s_1 * torch.expm1(-r * h_eta) * denoised
        if inject_noise:
            sde_noise = (-2 * r * h * eta).expm1().neg().sqrt() * noise_sampler(sigmas[i], sigma_s_1)
            x_2 = x_2 + sde_noise * sigma_s_1 * s_noise
        denoised_2 = model(x_2, sigma_s_1 * s_in)
        if solver_type == "phi_1":
            denoised_d = torch.lerp(denoised, denoised_2, fac)
            x = sigmas[i + 1] / sigmas[i] * (-h * eta).exp() * x - alpha_t * torch.expm1(-h_eta) * denoised_d
        else:
            b2 = _ei_h_phi_2(-h_eta) / r
            b1 = torch.expm1(-h_eta) - b2
            x = sigmas[i + 1] / sigmas[i] * (-h * eta).exp() * x - alpha_t * (b1 * denoised + b2 * denoised_2)
        if inject_noise:
            segment_factor = (r - 1) * h * eta
            sde_noise = sde_noise * segment_factor.exp()
            sde_noise = sde_noise + segment_factor.mul(2).expm1().neg().sqrt() * noise_sampler(sigma_s_1, sigmas[i + 1])
            x = x + sde_noise * sigmas[i + 1] * s_noise
    return x


def _ei_h_phi_2(h):
    return (torch.expm1(h) - h) / h


def _sample_seeds_3(model, x, sigmas, seed, eta=1.0, s_noise=1.0, r_1=1. / 3, r_2=2. / 3):
    """sample_seeds_3."""
    noise_sampler = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])
    inject_noise = eta > 0 and s_noise > 0
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        if sigmas[i + 1] == 0:
            x = denoised
            continue
        lambda_s, lambda_t = _lambda(sigmas[i]), _lambda(sigmas[i + 1])
        h = lambda_t - lambda_s
        h_eta = h * (eta + 1)
        lambda_s_1 = torch.lerp(lambda_s, lambda_t, r_1)
        lambda_s_2 = torch.lerp(lambda_s, lambda_t, r_2)
        sigma_s_1, sigma_s_2 = _sigma(lambda_s_1), _sigma(lambda_s_2)
        alpha_s_1 = sigma_s_1 * lambda_s_1.exp()
        alpha_s_2 = sigma_s_2 * lambda_s_2.exp()
        alpha_t = sigmas[i + 1] * lambda_t.exp()
        x_2 = sigma_s_1 / sigmas[i] * (-r_1 * h * eta).exp() * x - alpha_s_1 * torch.expm1(-r_1 * h_eta) * denoised
        if inject_noise:
            sde_noise = (-2 * r_1 * h * eta).expm1().neg().sqrt() * noise_sampler(sigmas[i], sigma_s_1)
            x_2 = x_2 + sde_noise * sigma_s_1 * s_noise
        denoised_2 = model(x_2, sigma_s_1 * s_in)
        a3_2 = r_2 / r_1 * _ei_h_phi_2(-r_2 * h_eta)
        a3_1 = torch.expm1(-r_2 * h_eta) - a3_2
        x_3 = sigma_s_2 / sigmas[i] * (-r_2 * h * eta).exp() * x - alpha_s_2 * (a3_1 * denoised + a3_2 * denoised_2)
        if inject_noise:
            segment_factor = (r_1 - r_2) * h * eta
            sde_noise = sde_noise * segment_factor.exp()
            sde_noise = sde_noise + segment_factor.mul(2).expm1().neg().sqrt() * noise_sampler(sigma_s_1, sigma_s_2)
            x_3 = x_3 + sde_noise * sigma_s_2 * s_noise
        denoised_3 = model(x_3, sigma_s_2 * s_in)
        b3 = _ei_h_phi_2(-h_eta) / r_2
        b1 = torch.expm1(-h_eta) - b3
        x = sigmas[i + 1] / sigmas[i] * (-h * eta).exp() * x - alpha_t * (b1 * denoised + b3 * denoised_3)
        if inject_noise:
            segment_factor = (r_2 - 1) * h * eta
            sde_noise = sde_noise * segment_factor.exp()
            sde_noise = sde_noise + segment_factor.mul(2).expm1().neg().sqrt() * noise_sampler(sigma_s_2, sigmas[i + 1])
            x = x + sde_noise * sigmas[i + 1] * s_noise
    return x


# --- multistep samplers -----------------------------------------------------------------------------------------

def _sample_ipndm(model, x, sigmas, seed, max_order=4):
    """sample_ipndm."""
    s_in = x.new_ones([x.shape[0]])
    x_next = x
    buffer_model = []
    for i in range(len(sigmas) - 1):
        t_cur, t_next = sigmas[i], sigmas[i + 1]
        x_cur = x_next
        denoised = model(x_cur, t_cur * s_in)
        d_cur = (x_cur - denoised) / t_cur
        order = min(max_order, i + 1)
        if t_next == 0:
            x_next = denoised
        elif order == 1:
            x_next = x_cur + (t_next - t_cur) * d_cur
        elif order == 2:
            x_next = x_cur + (t_next - t_cur) * (3 * d_cur - buffer_model[-1]) / 2
        elif order == 3:
            x_next = x_cur + (t_next - t_cur) * (23 * d_cur - 16 * buffer_model[-1] + 5 * buffer_model[-2]) / 12
        elif order == 4:
            x_next = x_cur + (t_next - t_cur) * (55 * d_cur - 59 * buffer_model[-1] + 37 * buffer_model[-2]
                                                 - 9 * buffer_model[-3]) / 24
        _push(buffer_model, d_cur, max_order)
    return x_next


def _push(buffer_model: list, d_cur, max_order: int) -> None:  # the shared buffer update of ipndm, ipndm_v, deis
    if len(buffer_model) == max_order - 1:
        for k in range(max_order - 2):
            buffer_model[k] = buffer_model[k + 1]
        buffer_model[-1] = d_cur
    else:
        buffer_model.append(d_cur)


def _ipndm_v_coefficients(t_steps, i, order):
    """sample_ipndm_v's coefficients of d_cur and the buffer's entries for one step of `order` (2 to 4)."""
    h_n = (t_steps[i + 1] - t_steps[i])
    h_n_1 = (t_steps[i] - t_steps[i - 1])
    if order == 2:
        return (2 + (h_n / h_n_1)) / 2, -(h_n / h_n_1) / 2
    h_n_2 = (t_steps[i - 1] - t_steps[i - 2])
    temp1 = (1 - h_n / (3 * (h_n + h_n_1)) * (h_n * (h_n + h_n_1)) / (h_n_1 * (h_n_1 + h_n_2))) / 2
    if order == 3:
        return ((2 + (h_n / h_n_1)) / 2 + temp1, -(h_n / h_n_1) / 2 - (1 + h_n_1 / h_n_2) * temp1,
                temp1 * h_n_1 / h_n_2)
    h_n_3 = (t_steps[i - 2] - t_steps[i - 3])
    temp2 = ((1 - h_n / (3 * (h_n + h_n_1))) / 2
             + (1 - h_n / (2 * (h_n + h_n_1))) * h_n / (6 * (h_n + h_n_1 + h_n_2))) \
        * (h_n * (h_n + h_n_1) * (h_n + h_n_1 + h_n_2)) / (h_n_1 * (h_n_1 + h_n_2) * (h_n_1 + h_n_2 + h_n_3))
    coeff1 = (2 + (h_n / h_n_1)) / 2 + temp1 + temp2
    coeff2 = -(h_n / h_n_1) / 2 - (1 + h_n_1 / h_n_2) * temp1 - (1 + (h_n_1 / h_n_2) + (
        h_n_1 * (h_n_1 + h_n_2) / (h_n_2 * (h_n_2 + h_n_3)))) * temp2
    coeff3 = temp1 * h_n_1 / h_n_2 + ((h_n_1 / h_n_2) + (h_n_1 * (h_n_1 + h_n_2) / (h_n_2 * (h_n_2 + h_n_3))) * (
        1 + h_n_2 / h_n_3)) * temp2
    coeff4 = -temp2 * (h_n_1 * (h_n_1 + h_n_2) / (h_n_2 * (h_n_2 + h_n_3))) * h_n_1 / h_n_2
    return coeff1, coeff2, coeff3, coeff4


def _sample_ipndm_v(model, x, sigmas, seed, max_order=4):
    """sample_ipndm_v."""
    s_in = x.new_ones([x.shape[0]])
    x_next = x
    buffer_model = []
    for i in range(len(sigmas) - 1):
        t_cur, t_next = sigmas[i], sigmas[i + 1]
        x_cur = x_next
        denoised = model(x_cur, t_cur * s_in)
        d_cur = (x_cur - denoised) / t_cur
        order = min(max_order, i + 1)
        if t_next == 0:
            x_next = denoised
        elif order == 1:
            x_next = x_cur + (t_next - t_cur) * d_cur
        else:
            c = _ipndm_v_coefficients(sigmas, i, order)
            total = c[0] * d_cur + c[1] * buffer_model[-1]
            if order >= 3:
                total = total + c[2] * buffer_model[-2]
            if order == 4:
                total = total + c[3] * buffer_model[-3]
            x_next = x_cur + (t_next - t_cur) * total
        _push(buffer_model, d_cur.detach(), max_order)
    return x_next


def _edm2t(edm_steps, epsilon_s=1e-3, sigma_min=0.002, sigma_max=80):  # deis.edm2t
    vp_beta_d = 2 * (np.log(torch.tensor(sigma_min).cpu() ** 2 + 1) / epsilon_s
                     - np.log(torch.tensor(sigma_max).cpu() ** 2 + 1)) / (epsilon_s - 1)
    vp_beta_min = np.log(torch.tensor(sigma_max).cpu() ** 2 + 1) - 0.5 * vp_beta_d
    beta_d, beta_min, sigma = vp_beta_d.clone().detach().cpu(), vp_beta_min.clone().detach().cpu(), edm_steps.clone()
    t_steps = ((beta_min ** 2 + 2 * beta_d * (sigma.detach().cpu() ** 2 + 1).log()).sqrt() - beta_min) / beta_d
    return t_steps, vp_beta_min, vp_beta_d + vp_beta_min


def _integrand(beta_0, beta_1, taus):  # deis.cal_intergrand: d log(alpha) / d tau by autograd
    with torch.inference_mode(mode=False):
        taus, beta_0, beta_1 = taus.clone(), beta_0.clone(), beta_1.clone()
        with torch.enable_grad():
            taus.requires_grad_(True)
            alpha = torch.exp(-0.5 * taus ** 2 * (beta_1 - beta_0) - taus * beta_0)  # t2alpha_fn
            alpha.log().sum().backward()
            d_log_alpha_dtau = taus.grad
    return -0.5 * d_log_alpha_dtau / torch.sqrt(alpha * (1 - alpha))


def _deis_coefficients(sigmas, max_order, n=10000):
    """deis.get_deis_coeff_list(t_steps, max_order, deis_mode="tab")."""
    t_steps, beta_0, beta_1 = _edm2t(sigmas)
    coefficients = []
    for i, (t_cur, t_next) in enumerate(zip(t_steps[:-1], t_steps[1:])):
        order = min(i + 1, max_order)
        if order == 1:
            coefficients.append([])
            continue
        taus = torch.linspace(t_cur, t_next, n)
        dtau = (t_next - t_cur) / n
        prev_t = t_steps[[i - k for k in range(order)]]
        integrand = _integrand(beta_0, beta_1, taus)
        row = []
        for j in range(order):
            poly = 1  # cal_poly
            for k in range(prev_t.shape[0]):
                if k != j:
                    poly *= (taus - prev_t[k]) / (prev_t[j] - prev_t[k])
            row.append(torch.sum(integrand * poly) * dtau)
        coefficients.append(row)
    return coefficients


def _sample_deis(model, x, sigmas, seed, max_order=3):
    """sample_deis(deis_mode="tab")."""
    s_in = x.new_ones([x.shape[0]])
    x_next = x
    coeff_list = _deis_coefficients(sigmas, max_order)
    buffer_model = []
    for i in range(len(sigmas) - 1):
        t_cur, t_next = sigmas[i], sigmas[i + 1]
        x_cur = x_next
        denoised = model(x_cur, t_cur * s_in)
        d_cur = (x_cur - denoised) / t_cur
        order = 1 if t_next <= 0 else min(max_order, i + 1)
        if order == 1:
            x_next = x_cur + (t_next - t_cur) * d_cur
        else:
            x_next = x_cur + coeff_list[i][0] * d_cur
            for k in range(1, order):
                x_next = x_next + coeff_list[i][k] * buffer_model[-k]
        _push(buffer_model, d_cur.detach(), max_order)
    return x_next


def _res_multistep(model, x, sigmas, seed, eta=1.0, cfg_pp=False, s_noise=1.0):
    """res_multistep (its presets: eta 0 or 1, CFG++ or not)."""
    noise_sampler = _default_noise_sampler(x, seed)
    uncond = _capture_uncond(model) if cfg_pp else [None]
    s_in = x.new_ones([x.shape[0]])

    def phi1_fn(t):
        return torch.expm1(t) / t

    def phi2_fn(t):
        return (phi1_fn(t) - 1.0) / t

    old_sigma_down = old_denoised = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        sigma_down, sigma_up = base._ancestral_step(sigmas[i], sigmas[i + 1], eta=eta)
        if sigma_down == 0 or old_denoised is None:
            if cfg_pp:
                x = denoised + base._to_d(x, sigmas[i], uncond[0]) * sigma_down
            else:
                x = x + base._to_d(x, sigmas[i], denoised) * (sigma_down - sigmas[i])
        else:
            t, t_old, t_next, t_prev = (_lambda(sigmas[i]), _lambda(old_sigma_down), _lambda(sigma_down),
                                        _lambda(sigmas[i - 1]))
            h = t_next - t
            c2 = (t_prev - t_old) / h
            phi1_val, phi2_val = phi1_fn(-h), phi2_fn(-h)
            b1 = torch.nan_to_num(phi1_val - phi2_val / c2, nan=0.0)
            b2 = torch.nan_to_num(phi2_val / c2, nan=0.0)
            if cfg_pp:
                x = x + (denoised - uncond[0])
                x = _sigma(h) * x + h * (b1 * uncond[0] + b2 * old_denoised)
            else:
                x = _sigma(h) * x + h * (b1 * denoised + b2 * old_denoised)
        if sigmas[i + 1] > 0:
            x = x + noise_sampler(sigmas[i], sigmas[i + 1]) * s_noise * sigma_up
        old_denoised = uncond[0] if cfg_pp else denoised
        old_sigma_down = sigma_down
    return x


def _sample_gradient_estimation(model, x, sigmas, seed, ge_gamma=2.0, cfg_pp=False):
    """sample_gradient_estimation (and _cfg_pp)."""
    uncond = _capture_uncond(model) if cfg_pp else None
    s_in = x.new_ones([x.shape[0]])
    old_d = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        d = base._to_d(x, sigmas[i], uncond[0] if cfg_pp else denoised)
        dt = sigmas[i + 1] - sigmas[i]
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            x = denoised + d * sigmas[i + 1] if cfg_pp else x + d * dt
            if i >= 1:
                x = x + (ge_gamma - 1) * (d - old_d) * dt
        old_d = d
    return x


def _sample_er_sde(model, x, sigmas, seed, s_noise=1.0, max_stage=3):
    """sample_er_sde with its default noise scaler (VP ER-SDE-Solver-3)."""
    noise_sampler = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])

    def noise_scaler(v):
        return v * ((v ** 0.3).exp() + 10.0)

    num_integration_points = 200.0
    point_indice = torch.arange(0, num_integration_points, dtype=torch.float32, device=x.device)
    er_lambdas = _lambda(sigmas).neg().exp()  # offset_first_sigma_for_snr leaves an eps model's sigmas alone
    old_denoised = old_denoised_d = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in)
        stage_used = min(max_stage, i + 1)
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            er_lambda_s, er_lambda_t = er_lambdas[i], er_lambdas[i + 1]
            alpha_s = sigmas[i] / er_lambda_s
            alpha_t = sigmas[i + 1] / er_lambda_t
            r_alpha = alpha_t / alpha_s
            r = noise_scaler(er_lambda_t) / noise_scaler(er_lambda_s)
            x = r_alpha * r * x + alpha_t * (1 - r) * denoised
            if stage_used >= 2:
                dt = er_lambda_t - er_lambda_s
                lambda_step_size = -dt / num_integration_points
                lambda_pos = er_lambda_t + point_indice * lambda_step_size
                scaled_pos = noise_scaler(lambda_pos)
                s = torch.sum(1 / scaled_pos) * lambda_step_size
                denoised_d = (denoised - old_denoised) / (er_lambda_s - er_lambdas[i - 1])
                x = x + alpha_t * (dt + s * noise_scaler(er_lambda_t)) * denoised_d
                if stage_used >= 3:
                    s_u = torch.sum((lambda_pos - er_lambda_s) / scaled_pos) * lambda_step_size
                    denoised_u = (denoised_d - old_denoised_d) / ((er_lambda_s - er_lambdas[i - 2]) / 2)
                    x = x + alpha_t * ((dt ** 2) / 2 + s_u * noise_scaler(er_lambda_t)) * denoised_u
                old_denoised_d = denoised_d
            if s_noise > 0:
                x = x + alpha_t * noise_sampler(sigmas[i], sigmas[i + 1]) * s_noise * (
                    er_lambda_t ** 2 - er_lambda_s ** 2 * r ** 2).sqrt().nan_to_num(nan=0.0)
        old_denoised = denoised
    return x


# --- SA-Solver (comfy/k_diffusion/sa_solver.py and sample_sa_solver) --------------------------------------------

def _exponential_coeffs(s, t, solver_order, tau_t):  # compute_exponential_coeffs
    tau_mul = 1 + tau_t ** 2
    h = t - s
    p = torch.arange(solver_order, dtype=s.dtype, device=s.device)
    product_terms_factored = (t ** p - s ** p * (-tau_mul * h).exp())
    recursive_depth_mat = p.unsqueeze(1) - p.unsqueeze(0)
    log_factorial = (p + 1).lgamma()
    recursive_coeff_mat = log_factorial.unsqueeze(1) - log_factorial.unsqueeze(0)
    if tau_t > 0:
        recursive_coeff_mat = recursive_coeff_mat - (recursive_depth_mat * math.log(tau_mul))
    signs = torch.where(recursive_depth_mat % 2 == 0, 1.0, -1.0)
    recursive_coeff_mat = (recursive_coeff_mat.exp() * signs).tril()
    return recursive_coeff_mat @ product_terms_factored


def _adams_b_coeffs(sigma_next, curr_lambdas, lambda_s, lambda_t, tau_t):
    """compute_stochastic_adams_b_coeffs without simple_order_2 (the sampler's default)."""
    num_timesteps = curr_lambdas.shape[0]
    exp_integral_coeffs = _exponential_coeffs(lambda_s, lambda_t, num_timesteps, tau_t)
    vandermonde_matrix_t = torch.vander(curr_lambdas, num_timesteps, increasing=True).T
    lagrange_integrals = torch.linalg.solve(vandermonde_matrix_t, exp_integral_coeffs)
    alpha_t = sigma_next * lambda_t.exp()
    return alpha_t * lagrange_integrals


def _sample_sa_solver(model, x, sigmas, seed, use_pece=False, s_noise=1.0, predictor_order=3, corrector_order=4):
    """sample_sa_solver as of October 2025 (returns x, the last corrected or denoised state)."""
    if len(sigmas) <= 1:
        return x
    noise_sampler = _default_noise_sampler(x, seed)
    s_in = x.new_ones([x.shape[0]])
    lambdas = _lambda(sigmas)
    start_sigma, end_sigma = _percent_to_sigma(model.ms, 0.2), _percent_to_sigma(model.ms, 0.8)

    def tau_func(sigma):  # get_tau_interval_func(start_sigma, end_sigma, eta=1.0)
        sigma = sigma.item() if isinstance(sigma, torch.Tensor) else sigma
        return 1.0 if start_sigma >= sigma >= end_sigma else 0.0

    max_used_order = max(predictor_order, corrector_order)
    x_pred, h, tau_t, noise, pred_list = x, 0.0, 0.0, 0.0, []
    lower_order_to_end = sigmas[-1].item() == 0
    for i in range(len(sigmas) - 1):
        denoised = model(x_pred, sigmas[i] * s_in)
        pred_list = (pred_list + [denoised])[-max_used_order:]
        predictor_order_used = min(predictor_order, len(pred_list))
        no_corrector = i == 0 or (sigmas[i + 1] == 0 and not use_pece)
        corrector_order_used = 0 if no_corrector else min(corrector_order, len(pred_list))
        if lower_order_to_end:
            predictor_order_used = min(predictor_order_used, len(sigmas) - 2 - i)
            corrector_order_used = min(corrector_order_used, len(sigmas) - 1 - i)
        if corrector_order_used == 0:
            x = x_pred
        else:
            corr_res = _corrector(pred_list, corrector_order_used, sigmas[i], lambdas, i, tau_t)
            x = sigmas[i] / sigmas[i - 1] * (-(tau_t ** 2) * h).exp() * x + corr_res
            if tau_t > 0 and s_noise > 0:
                x = x + noise
            if use_pece:
                denoised = model(x, sigmas[i] * s_in)
                pred_list[-1] = denoised
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            tau_t = tau_func(sigmas[i + 1])
            pred_res = _predictor(pred_list, predictor_order_used, sigmas[i + 1], lambdas, i, tau_t)
            h = lambdas[i + 1] - lambdas[i]
            x_pred = sigmas[i + 1] / sigmas[i] * (-(tau_t ** 2) * h).exp() * x + pred_res
            if tau_t > 0 and s_noise > 0:
                noise = noise_sampler(sigmas[i], sigmas[i + 1]) * sigmas[i + 1] * (
                    -2 * tau_t ** 2 * h).expm1().neg().sqrt() * s_noise
                x_pred = x_pred + noise
    return x


def _corrector(pred_list, order, sigma, lambdas, i, tau_t):  # the corrector's b-coefficient sum at step i
    b_coeffs = _adams_b_coeffs(sigma, lambdas[i - order + 1:i + 1], lambdas[i - 1], lambdas[i], tau_t)
    return torch.tensordot(torch.stack(pred_list[-order:], dim=1), b_coeffs, dims=([1], [0]))


def _predictor(pred_list, order, sigma_next, lambdas, i, tau_t):  # the predictor's b-coefficient sum at step i
    b_coeffs = _adams_b_coeffs(sigma_next, lambdas[i - order + 1:i + 1], lambdas[i], lambdas[i + 1], tau_t)
    return torch.tensordot(torch.stack(pred_list[-order:], dim=1), b_coeffs, dims=([1], [0]))


MORE = {
    "euler_cfg_pp": lambda m, x, s, seed: _sample_euler_ancestral_cfg_pp(m, x, s, seed, eta=0.0, s_noise=0.0),
    "euler_ancestral_cfg_pp": _sample_euler_ancestral_cfg_pp,
    "heunpp2": _sample_heunpp2,
    "exp_heun_2_x0": lambda m, x, s, seed: _sample_seeds_2(m, x, s, seed, eta=0.0, s_noise=0.0, r=1.0,
                                                           solver_type="phi_2"),
    "exp_heun_2_x0_sde": lambda m, x, s, seed: _sample_seeds_2(m, x, s, seed, r=1.0, solver_type="phi_2"),
    "dpmpp_2s_ancestral_cfg_pp": _sample_dpmpp_2s_ancestral_cfg_pp,
    "dpmpp_2m_cfg_pp": _sample_dpmpp_2m_cfg_pp,
    "ddpm": _sample_ddpm,
    "lcm": _sample_lcm,
    "ipndm": _sample_ipndm,
    "ipndm_v": _sample_ipndm_v,
    "deis": _sample_deis,
    "res_multistep": lambda m, x, s, seed: _res_multistep(m, x, s, seed, eta=0.0),
    "res_multistep_cfg_pp": lambda m, x, s, seed: _res_multistep(m, x, s, seed, eta=0.0, cfg_pp=True),
    "res_multistep_ancestral": lambda m, x, s, seed: _res_multistep(m, x, s, seed, eta=1.0),
    "res_multistep_ancestral_cfg_pp": lambda m, x, s, seed: _res_multistep(m, x, s, seed, eta=1.0, cfg_pp=True),
    "gradient_estimation": _sample_gradient_estimation,
    "gradient_estimation_cfg_pp": lambda m, x, s, seed: _sample_gradient_estimation(m, x, s, seed, cfg_pp=True),
    "er_sde": _sample_er_sde,
    "seeds_2": _sample_seeds_2,
    "seeds_3": _sample_seeds_3,
    "sa_solver": _sample_sa_solver,
    "sa_solver_pece": lambda m, x, s, seed: _sample_sa_solver(m, x, s, seed, use_pece=True),
}
base.MORE_SAMPLERS.update(MORE)
base.SAMPLERS = base.SAMPLERS + tuple(name for name in MORE if name not in base.SAMPLERS)
