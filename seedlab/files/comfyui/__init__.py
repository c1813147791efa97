"""ComfyUI's files read by meaning: the API graph (`prompt` chunk) and the UI workflow (`workflow` chunk).

reader turns a graph into recipe fields, followed from the sampler that made the image; graph finds
samplers and where values come from; text, clip, loras, vae and passes read prompts, sizes, LoRA, the VAE
and a second pass as hires fix; workflow, groups, widgets and widgets_packs turn a UI workflow into the API
graph's node map. Imports the engine and files' own modules only (the files layer's rule).
"""

from .reader import read_comfyui, read_comfyui_workflow

__all__ = ["read_comfyui", "read_comfyui_workflow"]
