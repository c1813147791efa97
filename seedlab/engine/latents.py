"""Latent geometry: the shape a pipeline's starting latents take at a size, and how Flux-style pipelines pack them.

Every family draws its noise in (1, C, h, w) at 1/vae_scale_factor of the image's sides; Flux's pipeline then packs
2x2 patches into tokens. Noise (noise.py), the budget's count (ModelInfo.noise_per_pixel) and the ComfyUI and A1111
loops agree on these shapes through this module.
"""

from __future__ import annotations

import functools
import inspect


class UnsupportedPipeline(ValueError):
    """SeedLab cannot shape this pipeline's starting noise (video latents, an unknown packing)."""


def latent_shape(pipeline, width: int, height: int) -> tuple[int, ...]:
    """(1, C, h, w): the latents a pipeline starts from at this size, before any packing (see `packs`).

    For packed pipelines (Flux) this is the shape diffusers draws in before it packs 2x2 patches into
    tokens, so variation seeds and seed resize work on it exactly as on any other latents.
    """
    denoiser = getattr(pipeline, "unet", None)
    if denoiser is None:
        denoiser = getattr(pipeline, "transformer", None)
    # Video latents and packings other than Flux's have other shapes and layouts.
    unusual = hasattr(pipeline, "vae_scale_factor_temporal") or (hasattr(pipeline, "_pack_latents")
                                                                 and not packs(pipeline))
    takes_latents = "latents" in inspect.signature(pipeline.__call__).parameters
    if denoiser is not None and not takes_latents:
        raise UnsupportedPipeline(
            f"{type(pipeline).__name__} draws its own starting noise (it takes no latents): it runs plain seeds "
            "with rng cpu or device; variation seeds, seed resize and other noise sources need a pipeline that "
            "takes starting latents")
    if denoiser is None or unusual or not hasattr(pipeline, "vae_scale_factor"):
        raise UnsupportedPipeline(
            f"{type(pipeline).__name__} is not supported: SeedLab makes the starting noise of UNet, unpacked "
            "transformer and Flux-style packed pipelines (SD 1.x/2.x, SDXL, SD3, PixArt, Sana, Flux, ...)"
        )
    scale = pipeline.vae_scale_factor
    if packs(pipeline):  # diffusers rounds the latent size down to whole 2x2 patches
        return (1, denoiser.config.in_channels // 4, 2 * (int(height) // (2 * scale)), 2 * (int(width) // (2 * scale)))
    return (1, denoiser.config.in_channels, int(height) // scale, int(width) // scale)


_PACK_PARAMETERS = ["latents", "batch_size", "num_channels_latents", "height", "width"]


def packs(pipeline) -> bool:
    """Does this pipeline pack its latents into 2x2-patch tokens as Flux does (`_pack_latents`, position ids)?"""
    return class_packs(type(pipeline))


@functools.cache  # asked several times for every image: once per pipeline class is enough
def class_packs(pipeline_class: type) -> bool:
    pack = getattr(pipeline_class, "_pack_latents", None)
    if pack is None or not hasattr(pipeline_class, "_prepare_latent_image_ids"):
        return False
    try:
        return list(inspect.signature(pack).parameters) == _PACK_PARAMETERS
    except (TypeError, ValueError):
        return False


def size_multiple(pipeline) -> int:
    """Width and height must be multiples of this for the image to have exactly the size asked for."""
    scale = int(getattr(pipeline, "vae_scale_factor", 8))
    return 2 * scale if packs(pipeline) else scale


def pack(pipeline, latents):
    """Unpacked (1, C, h, w) latents as the pipeline itself packs what it draws; others as they are."""
    if not packs(pipeline):
        return latents
    return pipeline._pack_latents(latents, 1, *latents.shape[1:])
