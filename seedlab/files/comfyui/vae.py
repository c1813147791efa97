"""The VAE a ComfyUI graph decodes its saved image with: a VAELoader's `vae_name`, as the `vae` field.

The saved image comes from a VAEDecode (or VAEDecodeTiled) whose `samples` come from the pass's last sampler and
whose `vae` input comes from a VAELoader (its file in `models/vae`, "sub/NAME.safetensors") or from the
checkpoint loader (the checkpoint's own VAE: no field). Of several decoders of that sampler's latents, the one
behind a Save node is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_HOPS = 64  # as comfyui.py: a longer chain of links is not followed (and cycles end here)
DECODERS = ("VAEDecode", "VAEDecodeTiled")
_IMAGES = ("images", "image", "pixels")  # image inputs between a decoder and a Save node (scaling, saving)
_LATENTS = ("samples", "latent", "latent_image")


def decoder_vae(graph: dict[str, Any], sampler: str, link: Callable[[Any], str | None],
                notes: list[str]) -> dict[str, Any]:
    """{"vae": NAME} when the decoder of `sampler`'s latents loads its own VAE, else {} (the checkpoint's)."""
    decoders = [key for key, node in graph.items()
                if node["class_type"] in DECODERS and _reaches(graph, node["inputs"].get("samples"), sampler, link)]
    if not decoders:
        return {}
    saved = [_decoder_behind(graph, key, link) for key, node in graph.items() if "Save" in node["class_type"]]
    chosen = next((key for key in saved if key in decoders), decoders[0])
    value = graph[chosen]["inputs"].get("vae")
    for _ in range(MAX_HOPS):
        node = graph.get(link(value) or "")
        if node is None:
            return {}
        inputs = node["inputs"]
        if node["class_type"] == "VAELoader" or "vae_name" in inputs:
            name = inputs.get("vae_name")
            if isinstance(name, str) and name.strip() and len(name) <= 300:
                return {"vae": name.strip()}
            notes.append(f"the VAE loader's vae_name {str(name)[:60]!r} is not a file name: the checkpoint's own VAE "
                         "decodes the image")
            return {}
        if "ckpt_name" in inputs or "Checkpoint" in node["class_type"]:
            return {}  # the checkpoint's own VAE
        value = inputs.get("vae")
    return {}


def _reaches(graph: dict[str, Any], value: Any, sampler: str, link: Callable[[Any], str | None]) -> bool:
    """Whether latents `value` come from `sampler`, through latent nodes (upscales, batch picks)."""
    for _ in range(MAX_HOPS):
        target = link(value)
        if target is None or target not in graph:
            return False
        if target == sampler:
            return True
        inputs = graph[target]["inputs"]
        value = next((inputs[name] for name in _LATENTS if name in inputs), None)
    return False


def _decoder_behind(graph: dict[str, Any], key: str, link: Callable[[Any], str | None]) -> str | None:
    """The decoder whose image the Save node `key` saves, through image nodes."""
    value = next((graph[key]["inputs"][name] for name in _IMAGES if name in graph[key]["inputs"]), None)
    for _ in range(MAX_HOPS):
        target = link(value)
        if target is None or target not in graph:
            return None
        if graph[target]["class_type"] in DECODERS:
            return target
        inputs = graph[target]["inputs"]
        value = next((inputs[name] for name in _IMAGES if name in inputs), None)
    return None
