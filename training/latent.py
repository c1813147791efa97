"""The embedded model's latent space: designed, not learned, so that colour and composition separate.

A 64x64 image of one flat shape on a flat background is described by a (10, 16, 16) latent:

- channels 0-3: the shape mask at 32x32 (coverage of each 2x2 pixel block, mapped to [-1, 1]),
  folded into 16x16 by pixel-unshuffle: channel 2 * dy + dx holds the sub-pixel (dy, dx);
- channels 4-6: the shape colour, 7-9: the background colour (RGB in [-1, 1]), constant over space.

Position, size and kind live only in channels 0-3 and colours only in 4-9, and the two are
independent in the training data. So the denoiser of the mask channels has no use for the colour
words, and a prompt variation that changes a colour leaves the seed's mask noise, and with it the
composition, to decide the same shape in the same place. The VAE is trained to encode images to
this code and to decode it (and codes near it) back to sharp images.
"""

import numpy as np

from training.shapes import IMAGE_SIZE, PALETTE, Shape, render

LATENT_SIZE = 16
LATENT_CHANNELS = 10
MASK_CHANNELS = 4


def latent_code(mask: np.ndarray, colour: str, background: str) -> np.ndarray:
    """(64, 64) bool mask and two palette names -> the (10, 16, 16) float32 code."""
    half = IMAGE_SIZE // 2
    coverage = mask.reshape(half, 2, half, 2).mean(axis=(1, 3))  # (32, 32) in {0, .25, .5, .75, 1}
    signed = 2.0 * coverage - 1.0
    # (y, dy, x, dx) -> (dy, dx, y, x): torch.nn.functional.pixel_unshuffle's channel order
    folded = signed.reshape(LATENT_SIZE, 2, LATENT_SIZE, 2).transpose(1, 3, 0, 2).reshape(MASK_CHANNELS, LATENT_SIZE, LATENT_SIZE)
    colours = np.array([*PALETTE[colour], *PALETTE[background]], dtype=np.float32) / 127.5 - 1.0  # (6,)
    constant = np.broadcast_to(colours[:, None, None], (6, LATENT_SIZE, LATENT_SIZE))
    return np.concatenate([folded, constant]).astype(np.float32)


def unfold_mask(code: np.ndarray) -> np.ndarray:
    """The (32, 32) signed mask of a (10, 16, 16) code (inverse of the folding in latent_code)."""
    folded = code[:MASK_CHANNELS].reshape(2, 2, LATENT_SIZE, LATENT_SIZE)
    return folded.transpose(2, 0, 3, 1).reshape(2 * LATENT_SIZE, 2 * LATENT_SIZE)


def shape_code(shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """Render a shape; return its (64, 64, 3) uint8 image and its (10, 16, 16) code."""
    image, mask = render(shape)
    return image, latent_code(mask, shape.colour, shape.background)
