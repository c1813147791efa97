"""The embedded model's latent space: designed, not learned, so that what the seed decides and what
the words decide live in different channels.

A 64x64 image of one flat shape on a flat background is described by a (14, 16, 16) latent:

- channels 0-3, the layout: a disk whose diameter is the shape's width, centred on the shape's
  bounding box, at 32x32 (coverage of each 2x2 pixel block, mapped to [-1, 1]) and folded into
  16x16 by pixel-unshuffle (channel 2 * dy + dx holds the sub-pixel (dy, dx));
- channels 4-7: the kind, one-hot (+1 for the shape's kind, -1 for the others);
- channels 8-10: the shape colour, 11-13: the background colour (RGB in [-1, 1]).
Channels 4-13 are constant over space.

Only channels 0-3 vary over space, and they are the same disk for every kind and colour, so the
denoiser draws one thing the seed decides (where, how big) and reads everything the words decide
(kind, colours) into constants. A prompt variation that changes a colour, or even the kind, leaves
the seed's layout in place. The VAE decoder draws the named kind inside the disk's box; the encoder
maps an image back to its code.
"""

import numpy as np

from training.shapes import IMAGE_SIZE, KINDS, PALETTE, Shape, kind_mask, render, shape_height

LATENT_SIZE = 16
LATENT_CHANNELS = 14
LAYOUT_CHANNELS = 4


def layout_disk(shape: Shape) -> np.ndarray:
    """(64, 64) bool disk of the shape's width, centred on its bounding box."""
    height = shape_height(shape.kind, shape.width)
    top = shape.y0 + height / 2 - shape.width / 2
    return kind_mask("circle", shape.x0, top, shape.width, shape.width)


def fold_layout(disk: np.ndarray) -> np.ndarray:
    """The (4, 16, 16) layout channels of a (64, 64) bool disk: its 2x2 coverage in [-1, 1], pixel-unshuffled."""
    half = IMAGE_SIZE // 2
    coverage = disk.reshape(half, 2, half, 2).mean(axis=(1, 3))  # (32, 32) in {0, .25, .5, .75, 1}
    signed = 2.0 * coverage - 1.0
    # (y, dy, x, dx) -> (dy, dx, y, x): torch.nn.functional.pixel_unshuffle's channel order
    return (signed.reshape(LATENT_SIZE, 2, LATENT_SIZE, 2).transpose(1, 3, 0, 2)
            .reshape(LAYOUT_CHANNELS, LATENT_SIZE, LATENT_SIZE))


def latent_code(shape: Shape) -> np.ndarray:
    """The (14, 16, 16) float32 code of a shape."""
    folded = fold_layout(layout_disk(shape))
    kind = np.where(np.array(KINDS) == shape.kind, 1.0, -1.0)  # (4,)
    colours = np.array([*PALETTE[shape.colour], *PALETTE[shape.background]]) / 127.5 - 1.0  # (6,)
    constants = np.concatenate([kind, colours])[:, None, None]
    return np.concatenate([folded, np.broadcast_to(constants, (10, LATENT_SIZE, LATENT_SIZE))]).astype(np.float32)


def unfold_layout(code: np.ndarray) -> np.ndarray:
    """The (32, 32) signed layout disk of a (14, 16, 16) code (inverse of the folding in latent_code)."""
    folded = code[:LAYOUT_CHANNELS].reshape(2, 2, LATENT_SIZE, LATENT_SIZE)
    return folded.transpose(2, 0, 3, 1).reshape(2 * LATENT_SIZE, 2 * LATENT_SIZE)


def shape_code(shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """Render a shape; return its (64, 64, 3) uint8 image and its (14, 16, 16) code."""
    return render(shape)[0], latent_code(shape)
