"""The embedded-v2 model's latent space: designed, so the seed's part and the words' part of a scene
(training/scene.py) live in different channels.

A scene is a (32, 16, 16) code:

- channels 0-3, the layout: the layout disk (centre and relative size, never the size word) as in
  training/latent.py: its coverage at 32x32, mapped to [-1, 1] and folded into 16x16 by pixel-unshuffle;
- then one-hot blocks (+1 for the named value, -1 for the others), constant over space: the kind (4),
  the shape colour (8), the background colour (8), the size word (3) and the style (5).

Only the layout varies over space, and no word changes it, so the denoiser's spatial work is the seed's and
the words only set constants: a variation of colour, background, kind, size or style keeps the seed's
position. The decoder draws the named kind, scaled by the size word around the disk's centre, in the named
colours and style; one-hot constants leave it a wide margin for the denoiser's errors (v1 coded colours as RGB).
"""

import numpy as np

from training.latent import LATENT_SIZE, LAYOUT_CHANNELS, fold_layout
from training.scene import SIZE_WORDS, STYLES, Scene, layout_disk, render
from training.shapes import COLOURS, KINDS

BLOCKS = {"kind": KINDS, "colour": COLOURS, "background": COLOURS, "size": SIZE_WORDS, "style": STYLES}
LATENT_CHANNELS = LAYOUT_CHANNELS + sum(len(values) for values in BLOCKS.values())  # 32


def block_slices() -> dict[str, slice]:
    """Each constant block's channels."""
    slices, start = {}, LAYOUT_CHANNELS
    for name, values in BLOCKS.items():
        slices[name] = slice(start, start + len(values))
        start += len(values)
    return slices


def scene_code(scene: Scene) -> np.ndarray:
    """The (32, 16, 16) float32 code of a scene."""
    constants = np.concatenate([np.where(np.array(values) == getattr(scene.words, name), 1.0, -1.0)
                                for name, values in BLOCKS.items()])
    spread = np.broadcast_to(constants[:, None, None], (len(constants), LATENT_SIZE, LATENT_SIZE))
    return np.concatenate([fold_layout(layout_disk(scene)), spread]).astype(np.float32)


def read_code(code: np.ndarray) -> dict[str, str]:
    """The value each constant block's spatial mean votes for (what a decoder reads from a denoised code)."""
    return {name: BLOCKS[name][int(np.argmax(code[block].mean(axis=(1, 2))))] for name, block in block_slices().items()}


def image_code(scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """Render a scene; return its (64, 64, 3) uint8 image and its (32, 16, 16) code."""
    return render(scene)[0], scene_code(scene)
