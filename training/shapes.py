"""The procedural world the embedded model learns: one upright flat shape on a flat background.

Images are 64x64 RGB uint8 with hard edges, so every pixel is exactly one of two palette colours.
Attributes are drawn from a seeded numpy Generator; captions are drawn separately, so one image
can be seen under many wordings during training.
"""

from dataclasses import dataclass
from itertools import product

import numpy as np

IMAGE_SIZE = 64
MARGIN = 2  # pixels kept free at the border so the background classifier always sees background

PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "orange": (245, 140, 30),
    "yellow": (240, 220, 40),
    "green": (50, 170, 70),
    "blue": (40, 90, 220),
    "purple": (140, 60, 180),
    "white": (245, 245, 245),
    "black": (20, 20, 20),
}
COLOURS = list(PALETTE)
KINDS = ["circle", "square", "triangle", "star"]
SIZES = {"small": (14, 24), "large": (34, 50)}  # bounding-box width in pixels, inclusive
VOCABULARY = ["a", "an", "on", "background", *COLOURS, *KINDS, *SIZES]

STAR_INNER_RATIO = 0.45  # inner/outer radius; fatter than the classic 0.38 so small stars keep their points
TRIANGLE_HEIGHT_RATIO = 0.9  # height/width of the upward triangle


@dataclass(frozen=True)
class Shape:
    """Everything that decides one training image."""

    colour: str
    kind: str
    size: str  # "small" or "large"
    background: str
    width: int  # bounding-box width in pixels
    x0: int  # bounding-box top-left corner
    y0: int


def held_out_triples(count: int = 16, seed: int = 1234) -> list[tuple[str, str, str]]:
    """(colour, kind, background) combinations never rendered for training: the evaluation set.

    Two per shape colour, with different kinds, so every colour and kind is tested while every
    colour-kind and colour-background pair still appears in training through other triples.
    """
    rng = np.random.default_rng(seed)
    triples = []
    for i, colour in enumerate(COLOURS):
        kinds = [KINDS[(2 * i) % 4], KINDS[(2 * i + 1) % 4]]
        backgrounds = [b for b in COLOURS if b != colour]
        for kind, background in zip(kinds, rng.choice(backgrounds, size=2, replace=False)):
            triples.append((colour, kind, str(background)))
    return triples[:count]


def training_triples() -> list[tuple[str, str, str]]:
    """All valid (colour, kind, background) triples minus the held-out ones."""
    held = set(held_out_triples())
    return [t for t in product(COLOURS, KINDS, COLOURS) if t[0] != t[2] and t not in held]


def shape_height(kind: str, width: int) -> int:
    """Bounding-box height of a shape of the given width."""
    if kind == "triangle":
        return round(width * TRIANGLE_HEIGHT_RATIO)
    if kind == "star":
        # Outer radius R gives width 2R sin72 and height R (1 + cos36).
        radius = width / (2 * np.sin(np.radians(72)))
        return round(radius * (1 + np.cos(np.radians(36))))
    return width


def sample_shape(rng: np.random.Generator, triples: list[tuple[str, str, str]]) -> Shape:
    """Draw a shape uniformly over the given triples, both sizes and every position that fits."""
    colour, kind, background = triples[rng.integers(len(triples))]
    size = "small" if rng.random() < 0.5 else "large"
    low, high = SIZES[size]
    width = int(rng.integers(low, high + 1))
    height = shape_height(kind, width)
    x0 = int(rng.integers(MARGIN, IMAGE_SIZE - MARGIN - width + 1))
    y0 = int(rng.integers(MARGIN, IMAGE_SIZE - MARGIN - height + 1))
    return Shape(colour, kind, size, background, width, x0, y0)


def _polygon_mask(vertices: np.ndarray, size: int = IMAGE_SIZE) -> np.ndarray:
    """Boolean (size, size) mask of pixel centres inside a polygon (even-odd rule), vertices (n, 2) as x, y."""
    ys, xs = np.mgrid[0:size, 0:size] + 0.5
    inside = np.zeros((size, size), dtype=bool)
    for (xa, ya), (xb, yb) in zip(vertices, np.roll(vertices, -1, axis=0)):
        crosses = (ya > ys) != (yb > ys)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_cross = xa + (ys - ya) * (xb - xa) / (yb - ya)
        inside ^= crosses & (xs < x_cross)
    return inside


def kind_mask(kind: str, x0: float, y0: float, width: float, height: float, size: int = IMAGE_SIZE) -> np.ndarray:
    """Mask of an upright shape filling the box (x0, y0, width, height); also the evaluation template."""
    if kind == "circle":
        ys, xs = np.mgrid[0:size, 0:size] + 0.5
        cx, cy = x0 + width / 2, y0 + height / 2
        return ((xs - cx) / (width / 2)) ** 2 + ((ys - cy) / (height / 2)) ** 2 <= 1.0
    if kind == "square":
        vertices = np.array([[x0, y0], [x0 + width, y0], [x0 + width, y0 + height], [x0, y0 + height]])
    elif kind == "triangle":
        vertices = np.array([[x0 + width / 2, y0], [x0 + width, y0 + height], [x0, y0 + height]])
    elif kind == "star":
        # Unit star: outer points at angles 90 + 72k degrees (y up), inner points halfway between.
        angles = np.radians(90 + 36 * np.arange(10))
        radii = np.where(np.arange(10) % 2 == 0, 1.0, STAR_INNER_RATIO)
        unit = np.stack([radii * np.cos(angles), -radii * np.sin(angles)], axis=1)
        low, high = unit.min(axis=0), unit.max(axis=0)
        vertices = (unit - low) / (high - low) * [width, height] + [x0, y0]
    else:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return _polygon_mask(vertices, size)


def render(shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """Return the (64, 64, 3) uint8 image and the (64, 64) bool shape mask."""
    height = shape_height(shape.kind, shape.width)
    mask = kind_mask(shape.kind, shape.x0, shape.y0, shape.width, height)
    image = np.empty((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    image[:] = PALETTE[shape.background]
    image[mask] = PALETTE[shape.colour]
    return image, mask


def _article(word: str, rng: np.random.Generator) -> str:
    """'an' before vowels most of the time, like people write; sometimes no article at all."""
    if rng.random() < 0.1:
        return ""
    if word[0] in "aeiou" and rng.random() < 0.8:
        return "an "
    return "a "


def caption(shape: Shape, rng: np.random.Generator) -> str:
    """A random wording of a random subset of the shape's attributes.

    Colour and kind are always named. The size word is left out, put before the colour
    ("a small red circle") or appended (", small"); the background is left out, inline
    ("... on a blue background") or appended (", on a blue background"), the way SeedLab
    writes prompt variations.
    """
    size_mode = rng.choice(["none", "prefix", "suffix"], p=[0.4, 0.3, 0.3])
    background_mode = rng.choice(["none", "inline", "suffix"], p=[0.3, 0.35, 0.35])
    noun = f"{shape.size} {shape.colour} {shape.kind}" if size_mode == "prefix" else f"{shape.colour} {shape.kind}"
    text = _article(noun, rng) + noun
    background = f"on {_article(shape.background, rng) or 'a '}{shape.background} background"
    if background_mode == "inline":
        text += " " + background
    suffixes = []
    if size_mode == "suffix":
        suffixes.append(shape.size)
    if background_mode == "suffix":
        suffixes.append(background)
    rng.shuffle(suffixes)
    return ", ".join([text, *suffixes])
