"""ComfyUI's sampling, computed as ComfyUI computes it: its KSampler loop on a diffusers model (loop.py: sigmas,
noise conventions, CFG), its copies of k-diffusion's samplers where they differ (kdiffusion.py) and its own samplers
(cfgpp.py: the CFG++ variants; multistep.py: ipndm, res_multistep, gradient_estimation, er_sde; adams.py: deis and
sa_solver; singlestep.py: heunpp2, ddpm, lcm, seeds). UniPC, which A1111 runs too, is samplers/unipc.py.

Imports samplers' kdiffusion, names, sigmas, unipc and upscale; the pipeline (engine/generation.py) calls
`sample_comfy`. Each sampler is compared bit for bit with tests/reference/comfyui_samplers.py.
"""

from .loop import COMFY_SAMPLERS, COMFY_SCHEDULES, comfy_sigmas, sample_comfy

__all__ = ["COMFY_SAMPLERS", "COMFY_SCHEDULES", "comfy_sigmas", "sample_comfy"]
