"""The Fooocus family's JSON: Fooocus (its "fooocus" metadata scheme), FooocusPlus and SimpleSDXL ("simple"),
RuinedFooocus, Fooocus-MRE and Fooocus-API, as recipe fields.

Where each writes it: Fooocus a `parameters` PNG chunk (with `fooocus_scheme`) or the EXIF UserComment (the
scheme in MakerNote); FooocusPlus and Fooocus-MRE a `Comment` PNG chunk; RuinedFooocus `parameters`. Fooocus
writes snake_case keys (prompt, guidance_scale, resolution "(1024, 1024)", seed as text), FooocusPlus the
labels of its log (Prompt, Guidance Scale, Resolution, Seed), Fooocus-MRE cfg, width and height, RuinedFooocus
Prompt, Negative, cfg, sampler_name. Keys are matched without case, spaces or underscores, so every spelling
lands on one table. Their samplers are ComfyUI's, and so is their last step: ComfyUI's VAE decode, then
`np.clip(255. * y.cpu().numpy(), 0, 255).astype(np.uint8)` (Fooocus' modules/core.py `pytorch_to_numpy`, its forks'
copies, RuinedFooocus' sdxl_pipeline.py): to_8bit truncate. Its "a1111" scheme is A1111 text, read by infotext.py.
"""

from __future__ import annotations

from typing import Any

from .formats import odd, put_number, put_size, tool_sampling

# Recipe field -> the keys the forks write it under, squeezed (lower case, no spaces, underscores or hyphens).
KEYS = {
    "prompt": ("prompt",),
    "negative_prompt": ("negativeprompt", "negative"),
    "num_inference_steps": ("steps",),
    "guidance_scale": ("guidancescale", "cfg", "cfgscale"),
    "seed": ("seed", "imageseed"),
    "model": ("basemodel", "basemodelname"),
}
_SAMPLER, _SCHEDULER = ("sampler", "samplername"), ("scheduler", "schedulername")
_SILENT = {"metadatascheme", "version", "software", "fullprompt", "fullnegativeprompt", "realprompt",
           "realnegativeprompt", "fooocusv2expansion", "promptexpansion", "basemodelhash", "styles", "performance",
           "width", "height", "resolution", *_SAMPLER, *_SCHEDULER}


def squeeze(key: Any) -> str:
    """"Negative Prompt", "negative_prompt" and "negative-prompt" as one key: "negativeprompt"."""
    return str(key).lower().replace(" ", "").replace("_", "").replace("-", "")


def is_fooocus(data: dict[str, Any], chunks: dict[str, str]) -> bool:
    """Whether a JSON object is one of the Fooocus family's (by its scheme, its keys or its software's name)."""
    keys = {squeeze(key) for key in data}
    written = f"{data.get('software', '')} {data.get('version', '')} {data.get('Version', '')}"
    return (chunks.get("fooocus_scheme") in ("fooocus", "simple") or "metadatascheme" in keys
            or "fullprompt" in keys or "realprompt" in keys or "Fooocus" in written
            or ("Prompt" in data and "Negative" in data))


def read_fooocus(data: dict[str, Any], chunks: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    """Every field the object states; one value that cannot be read is named in a note, the rest still read."""
    name = _name(data)
    by_key = {squeeze(key): value for key, value in data.items()}
    fields: dict[str, Any] = {"to_8bit": "truncate"}  # every fork truncates (see above)
    notes: list[str] = []
    for field, keys in KEYS.items():
        blank = () if field in ("prompt", "negative_prompt") else ("",)  # an empty negative prompt is stated
        key = next((key for key in keys if by_key.get(key) is not None and by_key[key] not in blank), None)
        if key is None:
            continue
        value = by_key[key]
        if field == "num_inference_steps":
            put_number(fields, notes, name, key, value, field, int)
        elif field == "guidance_scale":
            put_number(fields, notes, name, key, value, field, float)
        elif field == "seed":  # Fooocus writes its 64-bit seeds as text
            put_number(fields, notes, name, key, value, field, int)
        elif isinstance(value, str):
            fields[field] = value
        else:
            odd(notes, name, key, value, "not text")
    if by_key.get("resolution") not in (None, ""):
        put_size(fields, notes, name, "resolution", by_key["resolution"])
    elif "width" in by_key and "height" in by_key:
        put_number(fields, notes, name, "width", by_key["width"], "width", int)
        put_number(fields, notes, name, "height", by_key["height"], "height", int)
    sampler = next((by_key[key] for key in _SAMPLER if by_key.get(key)), None)
    if sampler is not None:
        schedule = next((by_key[key] for key in _SCHEDULER if by_key.get(key)), None)
        fields.update(tool_sampling(sampler, schedule, notes, "comfyui"))
    if any(by_key.get(key) for key in ("fullprompt", "realprompt", "promptexpansion", "fooocusv2expansion")):
        notes.append("Fooocus expanded the prompt (styles, Fooocus V2) before encoding it: the prompt restored is "
                     "the one typed, so the image differs unless the expansion is pasted in")
    used = {key for keys in KEYS.values() for key in keys} | _SILENT
    rest = [key for key, value in data.items() if squeeze(key) not in used and value not in (None, "", [], {}, False)]
    if rest:
        notes.append(f"{name}: {', '.join(str(key)[:40] for key in rest[:12])}"
                     f"{f' and {len(rest) - 12} more' if len(rest) > 12 else ''} have no SeedLab equivalent and are "
                     "ignored")
    return name, fields, notes


def _name(data: dict[str, Any]) -> str:
    """Which fork wrote it: the label `info` shows."""
    written = f"{data.get('software', '')} {data.get('version', '')} {data.get('Version', '')}"
    if "RuinedFooocus" in written or ("Prompt" in data and "Negative" in data):
        return "RuinedFooocus"
    for fork in ("FooocusPlus", "SimpleSDXL", "MRE"):
        if fork in written:
            return f"Fooocus ({fork})"
    if "Metadata Scheme" in data:  # FooocusPlus and SimpleSDXL write their log's labels as keys
        return "Fooocus (FooocusPlus)"
    return "Fooocus"
