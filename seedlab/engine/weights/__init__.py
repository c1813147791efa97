"""Weights: the files a model is made of, found and loaded safely.

The user's models folder found by name or hash, never by a path (library); single-file checkpoints
(checkpoint_files without torch, checkpoints), LoRA (lora_names without torch, lora), VAE (vae_names without
torch, vae), safetensors opened only after free checks (safetensor_files), and what a model folder says of
itself without its weights (model_info). Imports the engine's core modules (recipe, spec, tracing) only: never
samplers, prompts, nor generation.
"""
