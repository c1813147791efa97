"""Samplers: the noise levels and the sampling loops other tools run, written for SeedLab.

k-diffusion's samplers as A1111 and ComfyUI run them (kdiffusion: DPM-Solver and A1111's Restart included, and the
helpers every family shares), ComfyUI's own copies where they differ (comfyui_samplers), the sigma schedules
(sigmas), the names tools give them (names, read without torch), the loops that drive them on a diffusers model
(a1111, comfyui, sdcpp; apple: Apple's Core ML schedulers) and hires fix's latent upscalers (upscale). Imports the
engine's core modules (recipe, noise, philox) and weights.model_info only: never prompts, nor generation.
"""
