"""The widget names of ComfyUI's common nodes, in the order a UI workflow's "widgets_values" holds them."""

# The UI graph's widget values in order, by node type. None: the "control after generate" value the UI
# stores after a seed ("randomize", "fixed", ...), when present.
WIDGETS = {
    "KSampler": ("seed", None, "steps", "cfg", "sampler_name", "scheduler", "denoise"),
    "KSamplerAdvanced": ("add_noise", "noise_seed", None, "steps", "cfg", "sampler_name", "scheduler",
                         "start_at_step", "end_at_step", "return_with_leftover_noise"),
    "CheckpointLoaderSimple": ("ckpt_name",),
    "VAELoader": ("vae_name",),
    "LoraLoader": ("lora_name", "strength_model", "strength_clip"),
    "LoraLoaderModelOnly": ("lora_name", "strength_model"),
    "LatentUpscale": ("upscale_method", "width", "height", "crop"),
    "LatentUpscaleBy": ("upscale_method", "scale_by"),
    "CLIPTextEncode": ("text",),
    "CLIPSetLastLayer": ("stop_at_clip_layer",),
    "EmptyLatentImage": ("width", "height", "batch_size"),
    "EmptySD3LatentImage": ("width", "height", "batch_size"),
    # Size presets of custom nodes ("832 x 1216"): Inspire Pack's and Essentials' (then its overrides).
    "EmptyLatentImageFromPresetsSDXL": ("preset", "batch_size"),
    "EmptyLatentImageFromPresetsSD15": ("preset", "batch_size"),
    "SDXLEmptyLatentSizePicker+": ("resolution", "batch_size", "width_override", "height_override"),
}
