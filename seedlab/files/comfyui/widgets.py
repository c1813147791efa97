"""The widget names of ComfyUI's own nodes, in the order a UI workflow's "widgets_values" holds them.

Each entry is one order, or a list of orders where the node's widgets changed between versions (the one whose
length matches the values is used). None marks the "control after generate" value the UI stores after a seed
("randomize", "fixed", ..., true/false in the first frontends, null where a node pack hides it). Orders are
the node's INPUT_TYPES, required then optional, as the frontend lays out widgets; custom node packs' are in
files/comfyui/widgets_packs.py.
"""

from .widgets_packs import PACKS

Order = tuple[str | None, ...]

CORE: dict[str, Order | list[Order]] = {
    "KSampler": ("seed", None, "steps", "cfg", "sampler_name", "scheduler", "denoise"),
    "KSamplerAdvanced": ("add_noise", "noise_seed", None, "steps", "cfg", "sampler_name", "scheduler",
                         "start_at_step", "end_at_step", "return_with_leftover_noise"),
    "CheckpointLoaderSimple": ("ckpt_name",),
    "CheckpointLoader": ("config_name", "ckpt_name"),
    "VAELoader": ("vae_name",),
    "UNETLoader": ("unet_name", "weight_dtype"),
    "DualCLIPLoader": ("clip_name1", "clip_name2", "type", "device"),
    "LoraLoader": ("lora_name", "strength_model", "strength_clip"),
    "LoraLoaderModelOnly": ("lora_name", "strength_model"),
    "LatentUpscale": ("upscale_method", "width", "height", "crop"),
    "LatentUpscaleBy": ("upscale_method", "scale_by"),
    "CLIPTextEncode": ("text",),
    "CLIPTextEncodeSDXL": ("width", "height", "crop_w", "crop_h", "target_width", "target_height", "text_g",
                           "text_l"),
    "CLIPTextEncodeSDXLRefiner": ("ascore", "width", "height", "text"),
    "CLIPTextEncodeSD3": ("clip_l", "clip_g", "t5xxl", "empty_padding"),
    "CLIPTextEncodeFlux": ("clip_l", "t5xxl", "guidance"),
    "CLIPSetLastLayer": ("stop_at_clip_layer",),
    "ConditioningSetArea": ("width", "height", "x", "y", "strength"),
    "EmptyLatentImage": ("width", "height", "batch_size"),
    "EmptySD3LatentImage": ("width", "height", "batch_size"),
    "FluxGuidance": ("guidance",),
    # The custom sampling nodes: SamplerCustom, or SamplerCustomAdvanced fed by a noise, a guider, a sampler
    # and a scheduler node.
    "SamplerCustom": ("add_noise", "noise_seed", None, "cfg"),
    "RandomNoise": ("noise_seed", None),
    "BasicScheduler": ("scheduler", "steps", "denoise"),
    "KarrasScheduler": ("steps", "sigma_max", "sigma_min", "rho"),
    "KSamplerSelect": ("sampler_name",),
    "CFGGuider": ("cfg",),
    "StringConcatenate": ("string_a", "string_b", "delimiter"),
    # Size presets of custom nodes ("832 x 1216"): Inspire Pack's and Essentials' (then its overrides).
    "EmptyLatentImageFromPresetsSDXL": ("preset", "batch_size"),
    "EmptyLatentImageFromPresetsSD15": ("preset", "batch_size"),
    "SDXLEmptyLatentSizePicker+": ("resolution", "batch_size", "width_override", "height_override"),
}

WIDGETS: dict[str, Order | list[Order]] = {**PACKS, **CORE}


def orders(node_type: str) -> list[Order]:
    """The candidate widget orders of a node type (empty if SeedLab does not know it)."""
    known = WIDGETS.get(node_type)
    if known is None:
        return []
    return known if isinstance(known, list) else [known]
