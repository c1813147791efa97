"""A reference re-creation of ComfyUI's uni_pc and uni_pc_bh2 samplers, for tests.

It follows ComfyUI's comfy/extra_samplers/uni_pc.py step by step as it was at COMFYUI_COMMIT (master on 2025-10-12,
the last commit of October 2025 this session could read; the file last changed on 2025-01-18, "Uni pc sampler now
works with audio and video models") and adds both samplers to tests/reference/comfyui.py's KSampler harness
(MORE_SAMPLERS, SAMPLERS), which drives them as comfy/samplers.py's sampler_object does: KSAMPLER(sample_unipc)
called on the noise KSAMPLER.sample has scaled (noise_scaling at sigma_max: noise * sqrt(1 + sigma ** 2)), with
the penultimate sigma discarded (KSampler.DISCARD_PENULTIMATE_SIGMA_SAMPLERS). The names in brackets say which
ComfyUI function each part re-creates: SigmaConvert (the VP schedule in sigma terms), predict_eps_sigma and
model_wrapper (the KSampler's denoised as noise, in VP space), UniPC.data_prediction_fn,
multistep_uni_pc_bh_update (predict_x0, no thresholding), sample (the multistep loop, lower_order_final) and
sample_unipc / sample_unipc_bh2.

Later ComfyUI (Comfy-Org master 0748e38, 2026) computes the `b` coefficients in float64 on the CPU before moving
them back to float32 ("near-cancelling terms for small hh"): that is not re-created here.
"""

from __future__ import annotations

import torch

import tests.reference.comfyui as base

COMFYUI_COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"  # Comfy-Org/ComfyUI master, 2025-10-12


# --- SigmaConvert: a VP schedule whose "time" is the sigma ------------------------------------------------------

def _log_mean_coeff(sigma: torch.Tensor) -> torch.Tensor:
    return 0.5 * torch.log(1 / ((sigma * sigma) + 1))


def _alpha(sigma: torch.Tensor) -> torch.Tensor:
    return torch.exp(_log_mean_coeff(sigma))


def _std(sigma: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(1. - torch.exp(2. * _log_mean_coeff(sigma)))


def _lambda(sigma: torch.Tensor) -> torch.Tensor:
    log_mean_coeff = _log_mean_coeff(sigma)
    log_std = 0.5 * torch.log(1. - torch.exp(2. * log_mean_coeff))
    return log_mean_coeff - log_std


def _expand(v: torch.Tensor, dims: int) -> torch.Tensor:  # expand_dims
    return v[(...,) + (None,) * (dims - 1)]


# --- the model as UniPC sees it ---------------------------------------------------------------------------------

def _data_prediction(model, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """UniPC.data_prediction_fn over model_wrapper(predict_eps_sigma(model)), model_type "noise"."""
    if t.reshape((-1,)).shape[0] == 1:
        t = t.expand(x.shape[0])
    # predict_eps_sigma: the KSampler's denoised turned into the noise of a VP sample at this sigma
    sigma = t.view(t.shape[:1] + (1,) * (x.ndim - 1))
    scaled = x * ((sigma ** 2 + 1.0) ** 0.5)
    noise = (scaled - model(scaled, t)) / sigma
    dims = x.dim()
    return (x - _expand(_std(t), dims) * noise) / _expand(_alpha(t), dims)


def _bh_update(model, x, model_prev_list, t_prev_list, t, order, variant, use_corrector):
    """UniPC.multistep_uni_pc_update -> multistep_uni_pc_bh_update with predict_x0, x_t None."""
    if len(t.shape) == 0:
        t = t.view(-1)
    dims = x.dim()
    t_prev_0 = t_prev_list[-1]
    lambda_prev_0 = _lambda(t_prev_0)
    lambda_t = _lambda(t)
    model_prev_0 = model_prev_list[-1]
    sigma_prev_0, sigma_t = _std(t_prev_0), _std(t)
    alpha_t = torch.exp(_log_mean_coeff(t))
    h = lambda_t - lambda_prev_0

    rks, d1s = [], []
    for i in range(1, order):
        lambda_prev_i = _lambda(t_prev_list[-(i + 1)])
        rk = ((lambda_prev_i - lambda_prev_0) / h)[0]
        rks.append(rk)
        d1s.append((model_prev_list[-(i + 1)] - model_prev_0) / rk)
    rks.append(1.)
    rks = torch.tensor(rks, device=x.device)

    hh = -h[0]
    h_phi_1 = torch.expm1(hh)
    h_phi_k = h_phi_1 / hh - 1
    factorial_i = 1
    if variant == "bh1":
        b_h = hh
    elif variant == "bh2":
        b_h = torch.expm1(hh)
    else:
        raise NotImplementedError(variant)
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
    x_t_ = _expand(sigma_t / sigma_prev_0, dims) * x - _expand(alpha_t * h_phi_1, dims) * model_prev_0
    pred_res = torch.tensordot(d1s, rhos_p, dims=([1], [0])) if use_predictor else 0
    x_t = x_t_ - _expand(alpha_t * b_h, dims) * pred_res
    if use_corrector:
        model_t = _data_prediction(model, x_t, t)
        corr_res = torch.tensordot(d1s, rhos_c[:-1], dims=([1], [0])) if d1s is not None else 0
        d1_t = model_t - model_prev_0
        x_t = x_t_ - _expand(alpha_t * b_h, dims) * (corr_res + rhos_c[-1] * d1_t)
    return x_t, model_t


def _uni_pc_sample(model, x, timesteps, order, variant):
    """UniPC.sample, method "multistep", lower_order_final, no callback."""
    steps = len(timesteps) - 1
    assert steps >= order
    for step_index in range(steps):
        if step_index == 0:
            vec_t = timesteps[0].expand(x.shape[0])
            model_prev_list = [_data_prediction(model, x, vec_t)]
            t_prev_list = [vec_t]
        elif step_index < order:
            init_order = step_index
            vec_t = timesteps[init_order].expand(x.shape[0])
            x, model_x = _bh_update(model, x, model_prev_list, t_prev_list, vec_t, init_order, variant, True)
            if model_x is None:
                model_x = _data_prediction(model, x, vec_t)
            model_prev_list.append(model_x)
            t_prev_list.append(vec_t)
        else:
            extra_final_step = 1 if step_index == steps - 1 else 0
            for step in range(step_index, step_index + 1 + extra_final_step):
                vec_t = timesteps[step].expand(x.shape[0])
                step_order = min(order, steps + 1 - step)
                use_corrector = step != steps
                x, model_x = _bh_update(model, x, model_prev_list, t_prev_list, vec_t, step_order, variant,
                                        use_corrector)
                for i in range(order - 1):
                    t_prev_list[i] = t_prev_list[i + 1]
                    model_prev_list[i] = model_prev_list[i + 1]
                t_prev_list[-1] = vec_t
                if step < steps:
                    if model_x is None:
                        model_x = _data_prediction(model, x, vec_t)
                    model_prev_list[-1] = model_x
    return x


def sample_unipc(model, noise, sigmas, variant="bh1"):
    """sample_unipc(model, noise, sigmas, extra_args, callback, disable, variant) on an eps model."""
    if sigmas[-1] == 0:
        timesteps = sigmas[:]  # a view: ComfyUI sets the caller's last sigma to 0.001 too
        timesteps[-1] = 0.001
    else:
        timesteps = sigmas.clone()
    noise = noise / torch.sqrt(1.0 + timesteps[0] ** 2.0)
    order = min(3, len(timesteps) - 2)
    x = _uni_pc_sample(model, noise, timesteps, order, variant)
    x /= _alpha(timesteps[-1])
    return x


MORE = {
    "uni_pc": lambda model, x, sigmas, seed: sample_unipc(model, x, sigmas.clone(), "bh1"),
    "uni_pc_bh2": lambda model, x, sigmas, seed: sample_unipc(model, x, sigmas.clone(), "bh2"),
}
base.MORE_SAMPLERS.update(MORE)
base.SAMPLERS = base.SAMPLERS + tuple(name for name in MORE if name not in base.SAMPLERS)
