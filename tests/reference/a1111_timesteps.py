"""A reference re-creation of A1111 1.10's own samplers for txt2img: DDIM, DDIM CFG++, PLMS, UniPC and LCM.

It follows AUTOMATIC1111 stable-diffusion-webui 1.10's sources step by step and plugs into tests/reference/a1111.py's
harness (its _CompVisModel, _CFGDenoiser, _ImageRNG and TorchHijack, _KDiffusionSampler and k-diffusion as loaded
there). The names in brackets say which A1111 function each part re-creates:

- modules/sd_samplers_timesteps.py: samplers_timesteps, CompVisTimestepsDenoiser, CompVisTimestepsVDenoiser,
  CFGDenoiserTimesteps, CompVisSampler.get_timesteps and sample (txt2img: the first noise as it is).
- modules/sd_samplers_timesteps_impl.py: ddim, ddim_cfgpp, plms, UniPCCFG, unipc (txt2img, is_img2img False),
  k_diffusion.sampling.torch.randn_like being A1111's TorchHijack (the image's generator, continued).
- modules/sd_samplers_cfg_denoiser.py: CFGDenoiser.forward's cond_scale * cond_scale_miltiplier and
  last_noise_uncond (which DDIM CFG++ sets).
- modules/sd_samplers_common.py: Sampler.initialize (eta: p.eta, else the Eta DDIM setting, 0).
- modules/models/diffusion/uni_pc/uni_pc.py: NoiseScheduleVP('discrete'), interpolate_fn, UniPC.data_prediction_fn,
  multistep_uni_pc_bh_update (einsum), sample (multistep) with A1111's settings (order 3, bh1, time_uniform,
  lower_order_final).
- modules/sd_samplers_lcm.py: LCMCompVisDenoiser (over k-diffusion's DiscreteEpsDDPMDenoiser), sample_lcm,
  CFGDenoiserLCM, LCMSampler (a KDiffusionSampler: A1111's schedules apply, "Automatic" being its get_sigmas).
- ldm/models/diffusion/ddpm.py register_schedule: sqrt_alphas_cumprod and sqrt_one_minus_alphas_cumprod, float64
  square roots stored as float32.

The stored A1111 sources read here: sd_samplers_timesteps(_impl).py before DDIM CFG++ (1.7/1.8) and the 1.10
sd_samplers_cfg_denoiser.py and sd_samplers_lcm.py; ddim_cfgpp as 1.10 adds it (its arithmetic is DDIM's with
last_noise_uncond as the direction, the scale times 1 / 12.5).
"""

from __future__ import annotations

import inspect

import numpy as np
import torch

import tests.reference.a1111 as base

SAMPLERS = ("DDIM", "DDIM CFG++", "PLMS", "UniPC", "LCM")
ETA_DDIM_DEFAULT = 0.0  # shared_options eta_ddim
UNI_PC = {"variant": "bh1", "skip_type": "time_uniform", "order": 3, "lower_order_final": True}


class _LDM(base._CompVisModel):
    """LatentDiffusion with the schedule buffers register_schedule makes from float64 alphas_cumprod."""

    def __init__(self, unet, alphas_cumprod64: np.ndarray):
        super().__init__(unet, torch.tensor(alphas_cumprod64, dtype=torch.float32))
        self.sqrt_alphas_cumprod = torch.tensor(np.sqrt(alphas_cumprod64), dtype=torch.float32)
        self.sqrt_one_minus_alphas_cumprod = torch.tensor(np.sqrt(1. - alphas_cumprod64), dtype=torch.float32)


class _TimestepsDenoiser:
    """CompVisTimestepsDenoiser / CompVisTimestepsVDenoiser; remembers its last output (for last_noise_uncond)."""

    def __init__(self, model: _LDM, v: bool):
        self.inner_model, self.v, self.last = model, v, None

    def __call__(self, input, timesteps, **kwargs):
        output = self.inner_model.apply_model(input, timesteps, **kwargs)
        if self.v:  # predict_eps_from_z_and_v
            index = timesteps.to(torch.int)
            output = (self.inner_model.sqrt_alphas_cumprod[index, None, None, None] * output
                      + self.inner_model.sqrt_one_minus_alphas_cumprod[index, None, None, None] * input)
        self.last = output
        return output


class _CFGDenoiserTimesteps(base._CFGDenoiser):
    """CFGDenoiserTimesteps: CFGDenoiser.forward with cond_scale * cond_scale_miltiplier and, when asked,
    last_noise_uncond = x_out[-len(uncond):] (the last inner call's tail: the uncond half, or the uncond call)."""

    def __init__(self, inner_model: _TimestepsDenoiser):
        super().__init__(inner_model)
        self.cond_scale_miltiplier = 1.0
        self.need_last_noise_uncond = False
        self.last_noise_uncond = None

    def __call__(self, x, sigma, uncond, cond, cond_scale, s_min_uncond, image_cond):
        # the base multiplies by its own multiplier, 1.0: cond_scale * m * 1.0 is cond_scale * m
        denoised = super().__call__(x, sigma, uncond, cond, cond_scale * self.cond_scale_miltiplier, s_min_uncond,
                                    image_cond)
        if self.need_last_noise_uncond:
            self.last_noise_uncond = torch.clone(self.inner_model.last[-uncond.shape[0]:])
        return denoised


# --- sd_samplers_timesteps_impl ----------------------------------------------------------------------------------

def _float64(x):  # modules.torch_utils.float64
    return torch.float32 if x.device.type in ("mps", "xpu") else torch.float64


def _tables(model, x, timesteps):
    alphas_cumprod = model.inner_model.inner_model.alphas_cumprod
    alphas = alphas_cumprod[timesteps]
    alphas_prev = alphas_cumprod[torch.nn.functional.pad(timesteps[:-1], pad=(1, 0))].to(_float64(x))
    return alphas, alphas_prev, torch.sqrt(1 - alphas)


def _ddim(model, x, timesteps, extra_args=None, callback=None, disable=None, eta=0.0, cfgpp=False):
    sampling, _ = base.load_k_diffusion()
    alphas, alphas_prev, sqrt_one_minus_alphas = _tables(model, x, timesteps)
    # numpy and torch mixed as in A1111: an array divided by a tensor is the tensor's reciprocal times the array
    sigmas = eta * np.sqrt((1 - alphas_prev.cpu().numpy()) / (1 - alphas.cpu())
                           * (1 - alphas.cpu() / alphas_prev.cpu().numpy()))
    if cfgpp:  # ddim_cfgpp
        model.cond_scale_miltiplier = 1 / 12.5
        model.need_last_noise_uncond = True
    extra_args = {} if extra_args is None else extra_args
    s_in = x.new_ones(x.shape[0])
    s_x = x.new_ones((x.shape[0], 1, 1, 1))
    for i in range(len(timesteps) - 1):
        index = len(timesteps) - 1 - i
        e_t = model(x, timesteps[index].item() * s_in, **extra_args)
        direction_noise = model.last_noise_uncond if cfgpp else e_t
        a_t = alphas[index].item() * s_x
        a_prev = alphas_prev[index].item() * s_x
        sigma_t = sigmas[index].item() * s_x
        sqrt_one_minus_at = sqrt_one_minus_alphas[index].item() * s_x
        pred_x0 = (x - sqrt_one_minus_at * e_t) / a_t.sqrt()
        dir_xt = (1. - a_prev - sigma_t ** 2).sqrt() * direction_noise
        noise = sigma_t * sampling.torch.randn_like(x)  # drawn at eta 0 too
        x = a_prev.sqrt() * pred_x0 + dir_xt + noise
    return x


def _ddim_cfgpp(model, x, timesteps, extra_args=None, callback=None, disable=None, eta=0.0):
    return _ddim(model, x, timesteps, extra_args, callback, disable, eta, cfgpp=True)


def _plms(model, x, timesteps, extra_args=None, callback=None, disable=None):
    alphas, alphas_prev, sqrt_one_minus_alphas = _tables(model, x, timesteps)
    extra_args = {} if extra_args is None else extra_args
    s_in = x.new_ones([x.shape[0]])
    s_x = x.new_ones((x.shape[0], 1, 1, 1))
    old_eps = []

    def get_x_prev_and_pred_x0(e_t, index):
        a_t = alphas[index].item() * s_x
        a_prev = alphas_prev[index].item() * s_x
        sqrt_one_minus_at = sqrt_one_minus_alphas[index].item() * s_x
        pred_x0 = (x - sqrt_one_minus_at * e_t) / a_t.sqrt()
        dir_xt = (1. - a_prev).sqrt() * e_t
        return a_prev.sqrt() * pred_x0 + dir_xt, pred_x0

    for i in range(len(timesteps) - 1):
        index = len(timesteps) - 1 - i
        ts = timesteps[index].item() * s_in
        t_next = timesteps[max(index - 1, 0)].item() * s_in
        e_t = model(x, ts, **extra_args)
        if len(old_eps) == 0:  # pseudo improved Euler
            x_prev, _ = get_x_prev_and_pred_x0(e_t, index)
            e_t_next = model(x_prev, t_next, **extra_args)
            e_t_prime = (e_t + e_t_next) / 2
        elif len(old_eps) == 1:
            e_t_prime = (3 * e_t - old_eps[-1]) / 2
        elif len(old_eps) == 2:
            e_t_prime = (23 * e_t - 16 * old_eps[-1] + 5 * old_eps[-2]) / 12
        else:
            e_t_prime = (55 * e_t - 59 * old_eps[-1] + 37 * old_eps[-2] - 9 * old_eps[-3]) / 24
        x_prev, _ = get_x_prev_and_pred_x0(e_t_prime, index)
        old_eps.append(e_t)
        if len(old_eps) >= 4:
            old_eps.pop(0)
        x = x_prev
    return x


# --- modules/models/diffusion/uni_pc/uni_pc.py -------------------------------------------------------------------

def _interpolate_fn(x, xp, yp):
    n, k = x.shape[0], xp.shape[1]
    all_x = torch.cat([x.unsqueeze(2), xp.unsqueeze(0).repeat((n, 1, 1))], dim=2)
    sorted_all_x, x_indices = torch.sort(all_x, dim=2)
    x_idx = torch.argmin(x_indices, dim=2)
    cand_start_idx = x_idx - 1
    start_idx = torch.where(torch.eq(x_idx, 0), torch.tensor(1, device=x.device),
                            torch.where(torch.eq(x_idx, k), torch.tensor(k - 2, device=x.device), cand_start_idx))
    end_idx = torch.where(torch.eq(start_idx, cand_start_idx), start_idx + 2, start_idx + 1)
    start_x = torch.gather(sorted_all_x, dim=2, index=start_idx.unsqueeze(2)).squeeze(2)
    end_x = torch.gather(sorted_all_x, dim=2, index=end_idx.unsqueeze(2)).squeeze(2)
    start_idx2 = torch.where(torch.eq(x_idx, 0), torch.tensor(0, device=x.device),
                             torch.where(torch.eq(x_idx, k), torch.tensor(k - 2, device=x.device), cand_start_idx))
    y_positions_expanded = yp.unsqueeze(0).expand(n, -1, -1)
    start_y = torch.gather(y_positions_expanded, dim=2, index=start_idx2.unsqueeze(2)).squeeze(2)
    end_y = torch.gather(y_positions_expanded, dim=2, index=(start_idx2 + 1).unsqueeze(2)).squeeze(2)
    return start_y + (x - start_x) * (end_y - start_y) / (end_x - start_x)


def _expand_dims(v, dims):
    return v[(...,) + (None,) * (dims - 1)]


class _NoiseScheduleVP:
    """NoiseScheduleVP('discrete', alphas_cumprod=...)."""

    def __init__(self, alphas_cumprod):
        log_alphas = 0.5 * torch.log(alphas_cumprod)
        self.total_N = len(log_alphas)
        self.T = 1.
        self.t_array = torch.linspace(0., 1., self.total_N + 1)[1:].reshape((1, -1))
        self.log_alpha_array = log_alphas.reshape((1, -1,))

    def marginal_log_mean_coeff(self, t):
        return _interpolate_fn(t.reshape((-1, 1)), self.t_array.to(t.device),
                               self.log_alpha_array.to(t.device)).reshape(-1)

    def marginal_alpha(self, t):
        return torch.exp(self.marginal_log_mean_coeff(t))

    def marginal_std(self, t):
        return torch.sqrt(1. - torch.exp(2. * self.marginal_log_mean_coeff(t)))

    def marginal_lambda(self, t):
        log_mean_coeff = self.marginal_log_mean_coeff(t)
        log_std = 0.5 * torch.log(1. - torch.exp(2. * log_mean_coeff))
        return log_mean_coeff - log_std


class _UniPCCFG:
    """UniPC (predict_x0, no thresholding) as UniPCCFG: the model is the CFG denoiser at (t - 1/N) * 1000."""

    def __init__(self, cfg_model, extra_args, noise_schedule, variant):
        self.cfg_model, self.extra_args = cfg_model, extra_args
        self.noise_schedule, self.variant = noise_schedule, variant

    def model(self, x, t):
        t_input = (t - 1. / self.noise_schedule.total_N) * 1000.
        return self.cfg_model(x, t_input, **self.extra_args)

    def model_fn(self, x, t):  # data_prediction_fn
        noise = self.model(x, t)
        dims = x.dim()
        alpha_t, sigma_t = self.noise_schedule.marginal_alpha(t), self.noise_schedule.marginal_std(t)
        return (x - _expand_dims(sigma_t, dims) * noise) / _expand_dims(alpha_t, dims)

    def update(self, x, model_prev_list, t_prev_list, t, order, use_corrector=True):
        """multistep_uni_pc_update -> multistep_uni_pc_bh_update, x_t None."""
        if len(t.shape) == 0:
            t = t.view(-1)
        ns = self.noise_schedule
        dims = x.dim()
        t_prev_0 = t_prev_list[-1]
        lambda_prev_0 = ns.marginal_lambda(t_prev_0)
        lambda_t = ns.marginal_lambda(t)
        model_prev_0 = model_prev_list[-1]
        sigma_prev_0, sigma_t = ns.marginal_std(t_prev_0), ns.marginal_std(t)
        alpha_t = torch.exp(ns.marginal_log_mean_coeff(t))
        h = lambda_t - lambda_prev_0
        rks, d1s = [], []
        for i in range(1, order):
            lambda_prev_i = ns.marginal_lambda(t_prev_list[-(i + 1)])
            rk = ((lambda_prev_i - lambda_prev_0) / h)[0]
            rks.append(rk)
            d1s.append((model_prev_list[-(i + 1)] - model_prev_0) / rk)
        rks.append(1.)
        rks = torch.tensor(rks, device=x.device)
        hh = -h[0]
        h_phi_1 = torch.expm1(hh)
        h_phi_k = h_phi_1 / hh - 1
        factorial_i = 1
        b_h = hh if self.variant == "bh1" else torch.expm1(hh)
        rows, b = [], []
        for i in range(1, order + 1):
            rows.append(torch.pow(rks, i - 1))
            b.append(h_phi_k * factorial_i / b_h)
            factorial_i *= (i + 1)
            h_phi_k = h_phi_k / hh - 1 / factorial_i
        big_r = torch.stack(rows)
        b = torch.tensor(b, device=x.device)
        use_predictor = len(d1s) > 0
        if d1s:
            d1s = torch.stack(d1s, dim=1)
            rhos_p = torch.tensor([0.5], device=b.device) if order == 2 else torch.linalg.solve(big_r[:-1, :-1], b[:-1])
        else:
            d1s = None
        if use_corrector:
            rhos_c = torch.tensor([0.5], device=b.device) if order == 1 else torch.linalg.solve(big_r, b)
        model_t = None
        x_t_ = _expand_dims(sigma_t / sigma_prev_0, dims) * x - _expand_dims(alpha_t * h_phi_1, dims) * model_prev_0
        pred_res = torch.einsum("k,bkchw->bchw", rhos_p, d1s) if use_predictor else 0
        x_t = x_t_ - _expand_dims(alpha_t * b_h, dims) * pred_res
        if use_corrector:
            model_t = self.model_fn(x_t, t)
            corr_res = torch.einsum("k,bkchw->bchw", rhos_c[:-1], d1s) if d1s is not None else 0
            d1_t = model_t - model_prev_0
            x_t = x_t_ - _expand_dims(alpha_t * b_h, dims) * (corr_res + rhos_c[-1] * d1_t)
        return x_t, model_t

    def sample(self, x, steps, order, lower_order_final):
        """UniPC.sample, method "multistep", skip_type "time_uniform", t_start / t_end None."""
        t_0 = 1. / self.noise_schedule.total_N
        t_T = self.noise_schedule.T
        assert steps >= order, "UniPC order must be < sampling steps"
        timesteps = torch.linspace(t_T, t_0, steps + 1).to(x.device)
        vec_t = timesteps[0].expand(x.shape[0])
        model_prev_list = [self.model_fn(x, vec_t)]
        t_prev_list = [vec_t]
        for init_order in range(1, order):
            vec_t = timesteps[init_order].expand(x.shape[0])
            x, model_x = self.update(x, model_prev_list, t_prev_list, vec_t, init_order, use_corrector=True)
            if model_x is None:
                model_x = self.model_fn(x, vec_t)
            model_prev_list.append(model_x)
            t_prev_list.append(vec_t)
        for step in range(order, steps + 1):
            vec_t = timesteps[step].expand(x.shape[0])
            step_order = min(order, steps + 1 - step) if lower_order_final else order
            use_corrector = step != steps
            x, model_x = self.update(x, model_prev_list, t_prev_list, vec_t, step_order, use_corrector=use_corrector)
            for i in range(order - 1):
                t_prev_list[i] = t_prev_list[i + 1]
                model_prev_list[i] = model_prev_list[i + 1]
            t_prev_list[-1] = vec_t
            if step < steps:
                if model_x is None:
                    model_x = self.model_fn(x, vec_t)
                model_prev_list[-1] = model_x
        return x


def _unipc(model, x, timesteps, extra_args=None, callback=None, disable=None, is_img2img=False):
    alphas_cumprod = model.inner_model.inner_model.alphas_cumprod
    ns = _NoiseScheduleVP(alphas_cumprod)
    sampler = _UniPCCFG(model, extra_args, ns, UNI_PC["variant"])
    return sampler.sample(x, steps=len(timesteps), order=UNI_PC["order"], lower_order_final=UNI_PC["lower_order_final"])


_FUNCTIONS = {"DDIM": _ddim, "DDIM CFG++": _ddim_cfgpp, "PLMS": _plms, "UniPC": _unipc}


class _CompVisSampler:
    """sd_samplers_timesteps.CompVisSampler for txt2img."""

    def __init__(self, label: str, model: _LDM, v: bool):
        self.func = _FUNCTIONS[label]
        self.model_wrap_cfg = _CFGDenoiserTimesteps(_TimestepsDenoiser(model, v))

    @staticmethod
    def get_timesteps(steps: int) -> torch.Tensor:
        # always_discard_next_to_last_sigma is off and no timestep sampler asks for it
        return torch.clip(torch.asarray(list(range(0, 1000, 1000 // steps))) + 1, 0, 999)

    def sample(self, p: base._P, x, cond, uncond, eta_ddim: float):
        timesteps = self.get_timesteps(p.steps)
        parameters = inspect.signature(self.func).parameters
        extra_params_kwargs = {"timesteps": timesteps}
        if "eta" in parameters:  # Sampler.initialize: p.eta, else the Eta DDIM setting
            extra_params_kwargs["eta"] = p.eta if p.eta is not None else eta_ddim
        extra_args = {"cond": cond, "image_cond": x.new_zeros(x.shape[0], 5, 1, 1), "uncond": uncond,
                      "cond_scale": p.cfg_scale, "s_min_uncond": 0.0}
        sampling, _ = base.load_k_diffusion()
        with base._hijacked(sampling, p.rng):
            return self.func(self.model_wrap_cfg, x, extra_args=extra_args, disable=True, callback=None,
                             **extra_params_kwargs)


# --- modules/sd_samplers_lcm.py ----------------------------------------------------------------------------------

def _lcm_denoiser_class():
    """LCMCompVisDenoiser, over the loaded k-diffusion's DiscreteEpsDDPMDenoiser."""
    sampling, external = base.load_k_diffusion()

    class LCMCompVisDenoiser(external.DiscreteEpsDDPMDenoiser):
        def __init__(self, model):
            timesteps = 1000
            original_timesteps = 50
            self.skip_steps = timesteps // original_timesteps
            alphas_cumprod_valid = torch.zeros((original_timesteps), dtype=torch.float32)
            for x in range(original_timesteps):
                index = timesteps - 1 - x * self.skip_steps
                alphas_cumprod_valid[original_timesteps - 1 - x] = model.alphas_cumprod[index]
            super().__init__(model, alphas_cumprod_valid, quantize=None)

        def get_sigmas(self, n=None):
            if n is None:
                return sampling.append_zero(self.sigmas.flip(0))
            start = self.sigma_to_t(self.sigma_max)
            end = self.sigma_to_t(self.sigma_min)
            t = torch.linspace(start, end, n)
            return sampling.append_zero(self.t_to_sigma(t))

        def sigma_to_t(self, sigma, quantize=None):
            log_sigma = sigma.log()
            dists = log_sigma - self.log_sigmas[:, None]
            return dists.abs().argmin(dim=0).view(sigma.shape) * self.skip_steps + (self.skip_steps - 1)

        def t_to_sigma(self, timestep):
            t = torch.clamp(((timestep - (self.skip_steps - 1)) / self.skip_steps).float(), min=0,
                            max=(len(self.sigmas) - 1))
            return super().t_to_sigma(t)

        def get_eps(self, *args, **kwargs):
            return self.inner_model.apply_model(*args, **kwargs)

        def get_scaled_out(self, sigma, output, input):
            sigma_data = 0.5
            scaled_timestep = base._append_dims(self.sigma_to_t(sigma), output.ndim) * 10.0
            c_skip = sigma_data ** 2 / (scaled_timestep ** 2 + sigma_data ** 2)
            c_out = scaled_timestep / (scaled_timestep ** 2 + sigma_data ** 2) ** 0.5
            return c_out * output + c_skip * input

        def forward(self, input, sigma, **kwargs):
            c_out, c_in = [base._append_dims(x, input.ndim) for x in self.get_scalings(sigma)]
            eps = self.get_eps(input * c_in, self.sigma_to_t(sigma), **kwargs)
            return self.get_scaled_out(sigma, input + eps * c_out, input)

    return LCMCompVisDenoiser


def _sample_lcm(model, x, sigmas, extra_args=None, callback=None, disable=None, noise_sampler=None):
    sampling, _ = base.load_k_diffusion()
    extra_args = {} if extra_args is None else extra_args
    noise_sampler = sampling.default_noise_sampler(x) if noise_sampler is None else noise_sampler
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in, **extra_args)
        x = denoised
        if sigmas[i + 1] > 0:
            x += sigmas[i + 1] * noise_sampler(sigmas[i], sigmas[i + 1])
    return x


class _LCMSampler(base._KDiffusionSampler):
    """LCMSampler: a KDiffusionSampler whose CFG denoiser wraps LCMCompVisDenoiser (options {})."""

    def __init__(self, model: _LDM):
        self.sampling, _ = base.load_k_diffusion()
        self.label, self.funcname, self.options = "LCM", "sample_lcm", {}
        self.func = _sample_lcm
        self.extra_params = []
        self.model_wrap = _lcm_denoiser_class()(model)
        self.model_wrap_cfg = base._CFGDenoiser(self.model_wrap)


# --- txt2img -----------------------------------------------------------------------------------------------------

@torch.no_grad()
def a1111_own_txt2img(unet, alphas_cumprod64: np.ndarray, *, cond, uncond, seed: int, width: int, height: int,
                      steps: int, cfg_scale: float, sampler: str, schedule: str = "Automatic", eta: float | None = None,
                      eta_ddim: float = ETA_DDIM_DEFAULT, ensd: int = 0, prediction_type: str = "epsilon"):
    """Final latents (1, 4, H/8, W/8) as A1111 1.10 makes them with one of its own samplers and RNG "CPU".

    `sampler` is an A1111 label of SAMPLERS; `schedule` applies to LCM only (the timestep samplers ignore it, as
    A1111 does). eta None is A1111's default (the Eta DDIM setting, `eta_ddim`); `ensd` is eta_noise_seed_delta.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; expected one of {SAMPLERS}")
    base.load_k_diffusion()
    model = _LDM(unet, alphas_cumprod64)
    p = base._P(seed=int(seed), steps=int(steps), cfg_scale=cfg_scale, scheduler=schedule, eta=eta, ensd=int(ensd),
                s_churn=0.0, s_tmin=0.0, s_tmax=float("inf"), s_noise=1.0, sigma_min=0.0, sigma_max=0.0, rho=0.0)
    with base._K_LOCK:
        p.rng = base._ImageRNG((base.LATENT_CHANNELS, height // base.LATENT_SCALE_FACTOR,
                                width // base.LATENT_SCALE_FACTOR), p.seed, p.ensd, "cpu")
        x = p.rng.next()
        if sampler == "LCM":
            return _LCMSampler(model).sample(p, x, cond, uncond)
        return _CompVisSampler(sampler, model, prediction_type == "v_prediction").sample(p, x, cond, uncond, eta_ddim)
