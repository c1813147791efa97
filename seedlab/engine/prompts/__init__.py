"""Prompts: the syntaxes tools write (A1111, ComfyUI, NovelAI, A1111 on SDXL) and the conditioning they compute.

a1111, comfyui, novelai and sdxl parse and encode a prompt as each tool does; text_inversion applies
embeddings from the models folder; embeddings encodes a request's prompt once for every image that uses it.
Imports the engine's core modules (recipe) and weights (the models folder: library, lora_names) only: never
samplers, nor generation.
"""
