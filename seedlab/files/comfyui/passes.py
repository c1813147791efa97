"""A ComfyUI graph's second sampling pass as hires fix: KSampler -> LatentUpscale(By) -> KSampler at denoise <= 1.

The usual "hires fix" graph: the first KSampler's latents enlarged by LatentUpscale (to a width and height) or
LatentUpscaleBy (by a factor) with one of ComfyUI's methods, then sampled again by a second KSampler with the same
model and prompts and its own seed, steps, cfg, sampler, scheduler and denoise. That is the recipe's hires fields
(engine/samplers/comfyui.py runs them as ComfyUI does); anything else (an upscale in pixels, other prompts, a
refiner) keeps the note that only the first pass is restored, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...engine.recipe import LATENT_UPSCALERS, MAX_HIRES_SCALE
from ...engine.samplers.names import is_comfy_sampler

UPSCALERS = ("LatentUpscale", "LatentUpscaleBy")
SAME = ("prompt", "negative_prompt", "model", "loras")  # what the second pass must share with the first
MAX_HOPS = 16


def second_pass(graph: dict[str, Any], first: str, last: str, fields: dict[str, Any], read_sampler: Callable,
                link: Callable[[Any], str | None], notes: list[str]) -> bool:
    """Fill `fields` with hires fix from the pass `last` that refines `first`'s latents; False (and a note
    saying why) when the graph is not that shape."""
    upscale, why = _upscale_between(graph, first, last, link)
    second = read_sampler(graph, last, [])
    denoise = graph[last]["inputs"].get("denoise")
    if upscale is None:
        pass
    elif graph[last]["class_type"] != "KSampler" or graph[first]["class_type"] not in ("KSampler", "KSamplerAdvanced"):
        why = "its second pass is not a KSampler node (a KSamplerAdvanced second pass is not run as hires fix)"
    elif not all(is_comfy_sampler(str(values.get("scheduler"))) for values in (fields, second)):
        why = "a pass's sampler is not one of ComfyUI's that SeedLab runs"
    elif not isinstance(denoise, (int, float)) or isinstance(denoise, bool) or not 0 < denoise <= 1:
        why = f"the second pass's denoise {str(denoise)[:20]} is not from 0 to 1"
    elif any(second.get(name) != fields.get(name) for name in SAME):
        why = "the second pass has its own prompt, model or LoRA"
    else:
        scale, why = _scale(graph[upscale], fields)
        if scale is not None:
            fields.update(_hires_fields(fields, second, graph[upscale]["inputs"]["upscale_method"], scale, denoise))
            return True
    notes.append(f"the graph's second pass (node {last[:20]}) is not restored as hires fix: {why}")
    return False


def _upscale_between(graph: dict[str, Any], first: str, last: str, link: Callable) -> tuple[str | None, str]:
    """The one latent upscale node on the way from `last`'s latent back to `first` (through reroutes)."""
    value, upscale = graph[last]["inputs"].get("latent_image"), None
    for _ in range(MAX_HOPS):
        target = link(value)
        node = graph.get(target or "")
        if target == first:
            return (upscale, "") if upscale is not None else (None, "its latents are not upscaled")
        if node is None:
            break
        if node["class_type"] in UPSCALERS and upscale is None:
            upscale, value = target, node["inputs"].get("samples")
        elif node["class_type"] == "Reroute" and len(node["inputs"]) == 1:
            value = next(iter(node["inputs"].values()))
        else:
            return None, f"its latents come through {node['class_type'][:60]} (only a latent upscale is run)"
    return None, "its latents do not come from the first pass"


def _scale(node: dict[str, Any], fields: dict[str, Any]) -> tuple[float | None, str]:
    """The factor a LatentUpscale(By) node enlarges the first pass's size by, when one factor gives its sizes."""
    inputs, width, height = node["inputs"], fields.get("width"), fields.get("height")
    if inputs.get("upscale_method") not in LATENT_UPSCALERS:
        return None, f"its upscale method {str(inputs.get('upscale_method'))[:30]} is not one SeedLab runs"
    if not isinstance(width, int) or not isinstance(height, int) or inputs.get("crop", "disabled") != "disabled":
        return None, "the first pass's size is unknown, or the upscale crops"
    if node["class_type"] == "LatentUpscaleBy":
        scale = inputs.get("scale_by")
        if not isinstance(scale, (int, float)) or isinstance(scale, bool):
            return None, "its scale is not a number"
        targets = [round(side // 8 * scale) * 8 for side in (width, height)]  # ComfyUI rounds the latent size
    else:
        wide, high = inputs.get("width"), inputs.get("height")
        if not all(isinstance(side, int) and not isinstance(side, bool) and side > 0 for side in (wide, high)):
            return None, "its width and height are not both given"
        targets = [max(64, wide) // 8 * 8, max(64, high) // 8 * 8]
        scale = targets[0] / width
    if not 1 <= scale <= MAX_HIRES_SCALE or [int(width * scale), int(height * scale)] != targets:
        return None, (f"no one factor from 1 to {MAX_HIRES_SCALE:g} turns {width}x{height} "
                      f"into {targets[0]}x{targets[1]}")
    return float(scale), ""


def _hires_fields(first: dict[str, Any], second: dict[str, Any], method: str, scale: float, denoise: float) -> dict:
    """The hires fields: what the second pass sets that differs from the first (else "the same")."""
    def own(name: str, unset: Any) -> Any:
        return second[name] if name in second and second[name] != first.get(name) else unset

    return {"hires_scale": scale, "hires_upscaler": method, "denoising_strength": float(denoise),
            "hires_steps": own("num_inference_steps", 0), "hires_sampler": own("scheduler", ""),
            "hires_schedule": own("schedule", ""), "hires_cfg": float(own("guidance_scale", 0)),
            "hires_seed": own("seed", -1)}


def advanced_steps(inputs: dict[str, Any], fields: dict[str, Any], follow: Callable[[Any], Any],
                   notes: list[str]) -> None:
    """KSamplerAdvanced's part of the schedule: start_at_step and end_at_step (when it is not the whole), with noise
    added and without leftover noise as SeedLab runs it; the rest is named in a note."""
    steps = fields.get("num_inference_steps")
    start = follow(inputs.get("start_at_step", 0))
    end = follow(inputs.get("end_at_step", 10_000))
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in (steps, start, end)):
        notes.append("KSamplerAdvanced's start_at_step and end_at_step are not both numbers: all steps are run")
        return
    if start > 0:
        fields["start_step"] = start
    if end < steps:
        fields["end_step"] = end
        if inputs.get("return_with_leftover_noise") == "enable":
            notes.append(f"the sampler stops at step {end} of {steps} with its leftover noise (a graph that goes on in "
                         "another sampler, a refiner): SeedLab denoises fully at that step")
    if inputs.get("add_noise", "enable") == "disable":
        notes.append("the sampler adds no noise (add_noise disabled: it continues another pass's latents): SeedLab "
                     "starts from the seed's noise")
