"""The last step of an image: the decoded floats in [0, 1] as 8-bit pixels, rounded or truncated (`to_8bit`).

diffusers rounds (`VaeImageProcessor.numpy_to_pil`: `(images * 255).round().astype("uint8")`), and so did every
SeedLab image before this field. A1111 and ComfyUI truncate:

- A1111 (modules/processing.py, `process_images_inner`): the decoded batch made float32, then
  `torch.clamp((x + 1.0) / 2.0, min=0.0, max=1.0)`, then per image `255. * np.moveaxis(x.cpu().numpy(), 0, 2)`
  and `x.astype(np.uint8)`;
- ComfyUI (comfy/sd.py, `VAE.decode`): `torch.clamp((image + 1.0) / 2.0, min=0.0, max=1.0)` on the decoder's output
  made float32, then `SaveImage` (nodes.py): `i = 255. * image.cpu().numpy()` and
  `Image.fromarray(np.clip(i, 0, 255).astype(np.uint8))` (the clip changes nothing in [0, 255]).

Truncating here starts from diffusers' float output (`output_type="np"`): its `(x * 0.5 + 0.5).clamp(0, 1)` is
`(x + 1) / 2` clamped, bit for bit in float32 (halving is exact, so both round the same real number once), and
numpy keeps `255. * float32_array` in float32 (a Python float does not widen it), as both tools compute it. A
truncated pixel is the rounded one or one level below it.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

# What a pipeline (or its image processor) is asked to return for each step: diffusers' rounded PIL image, or the
# floats (H, W, 3) that are truncated here.
OUTPUT_TYPE = {"round": "pil", "truncate": "np"}


def to_rgb(image: Image.Image | np.ndarray, step: str) -> Image.Image:
    """The pipeline's image (of OUTPUT_TYPE[step]) as 8-bit RGB: "round" keeps the PIL image diffusers rounded,
    "truncate" cuts 255 * x as A1111 and ComfyUI do."""
    if step == "round":
        return image.convert("RGB")
    if isinstance(image, Image.Image):  # a pipeline without output_type: it rounded already
        raise ValueError(f"to_8bit {step} needs the pipeline's float output, but it returned 8-bit pixels; "
                         "choose to_8bit round")
    values = 255.0 * np.asarray(image, dtype=np.float32)  # float32, as both tools multiply
    return Image.fromarray(values.astype(np.uint8)).convert("RGB")
