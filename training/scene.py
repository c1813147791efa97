"""The world of the embedded-v2 model: one flat shape on a flat background, in a few styles, named by
prompts whose last word on each attribute wins.

A scene is decided by two things that never mix:

- the seed's part, the composition: where the shape is (its centre) and its size relative to its size word
  (a layout disk of DISK_RANGE pixels, the width a medium shape has);
- the words' part: the kind, the shape's colour, the background's colour, the size word (small, medium,
  large: the drawn width is SIZE_SCALE times the disk's) and the style.

`read_prompt` is the grammar, the one the model is trained on and the evaluation reads prompts by: words are
read left to right and the last one naming an attribute wins, so "a red circle, green" is green, "a red circle
on a blue background, on a yellow background" has a yellow background, ", star" replaces the kind and ", small"
the size. A colour word followed by "background" names the background; any other colour word names the shape.
What a prompt leaves out takes its default: a circle, medium, plain, and flat black-on-white colours (a white
shape gets a black background; a shape on a black background is white when it names no colour).

Styles keep the outline (the shape's mask is the plain shape's) and change its inside:

- realistic: shaded, lit from above (light at the top, dark at the bottom and along the rim);
- artsy: a thick brush outline in a colour that stands out from both the shape and the background;
- colorful: concentric rings of several colours;
- trending: two-tone, its lower half in a second colour.

Every styled pixel keeps its distance from the background colour (at least MIN_CONTRAST in RGB, or the plain
colour's own distance where that is less), so a pixel classifier finds the same mask.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from training.shapes import COLOURS, IMAGE_SIZE, KINDS, kind_mask

MARGIN = 2
SIZE_WORDS = ("small", "medium", "large")
SIZE_SCALE = {"small": 0.6, "medium": 1.0, "large": 1.5}  # drawn width / layout disk diameter
DISK_RANGE = (20, 28)  # the layout disk's diameter in pixels, inclusive: the seed's relative size
STYLES = ("plain", "realistic", "artsy", "colorful", "trending")
# Words that name a style (the last one wins, like every attribute); "highly" and "artstation" go with them.
STYLE_WORDS = {"realistic": "realistic", "photorealistic": "realistic", "artsy": "artsy", "artistic": "artsy",
               "colorful": "colorful", "colourful": "colorful", "trending": "trending"}
STYLE_PHRASES = {"realistic": ("highly realistic", "realistic", "photorealistic"), "artsy": ("artsy", "artistic"),
                 "colorful": ("colorful", "colourful"), "trending": ("trending", "trending on artstation")}
SIZE_SYNONYMS = {"small": "small", "tiny": "small", "medium": "medium", "large": "large", "big": "large"}
VOCABULARY = ["a", "an", "the", "on", "background", "shape", "highly", "artstation", *COLOURS, *KINDS,
              *SIZE_SYNONYMS, *STYLE_WORDS]
# embedded-v2's colours, by the same names as embedded's (training/shapes.py) but farther apart: its closest pairs
# (orange-yellow, red-orange, blue-purple) are 117-122 RGB levels apart where embedded's were 81-112, so that a
# decoded edge a pixel soft still falls on the same side of a classifier's threshold whichever two colours meet.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (230, 25, 35),
    "orange": (255, 135, 0),
    "yellow": (255, 245, 40),
    "green": (30, 175, 50),
    "blue": (35, 75, 235),
    "purple": (145, 35, 205),
    "white": (250, 250, 250),
    "black": (12, 12, 12),
}
assert list(PALETTE) == COLOURS
MIN_CONTRAST = 100.0  # RGB distance styled pixels keep from the background (evaluate.MASK_DISTANCE is 80)
GREY = (128, 128, 128)


@dataclass(frozen=True)
class Words:
    """What a prompt says, after its defaults: the words' part of a scene."""

    kind: str = "circle"
    colour: str = "black"
    background: str = "white"
    size: str = "medium"
    style: str = "plain"


@dataclass(frozen=True)
class Scene:
    """Everything one image shows: the words' part and the seed's part (centre and disk, in pixels)."""

    words: Words
    cx: float
    cy: float
    disk: int

    @property
    def width(self) -> float:
        return self.disk * SIZE_SCALE[self.words.size]


def read_prompt(prompt: str) -> Words:
    """The attributes a prompt names, left to right with the last one winning, and the defaults for the rest."""
    tokens = re.findall(r"[a-z]+", prompt.lower())
    named: dict[str, str] = {}
    for i, token in enumerate(tokens):
        if token in PALETTE:
            named["background" if i + 1 < len(tokens) and tokens[i + 1] == "background" else "colour"] = token
        elif token in KINDS:
            named["kind"] = token
        elif token in SIZE_SYNONYMS:
            named["size"] = SIZE_SYNONYMS[token]
        elif token in STYLE_WORDS:
            named["style"] = STYLE_WORDS[token]
    colour, background = named.get("colour"), named.get("background")
    if background is None:
        background = "black" if colour == "white" else "white"
    if colour is None:
        colour = "white" if background == "black" else "black"
    return Words(named.get("kind", "circle"), colour, background, named.get("size", "medium"),
                 named.get("style", "plain"))


def sample_layout(rng: np.random.Generator) -> tuple[float, float, int]:
    """A centre and disk where even the largest size word's shape fits inside the margin."""
    disk = int(rng.integers(DISK_RANGE[0], DISK_RANGE[1] + 1))
    reach = int(np.ceil(SIZE_SCALE["large"] * disk / 2))
    low, high = MARGIN + reach, IMAGE_SIZE - MARGIN - reach
    return float(rng.integers(low, high + 1)), float(rng.integers(low, high + 1)), disk


# ---------------------------------------------------------------- captions


def _article(word: str, rng: np.random.Generator) -> str:
    if rng.random() < 0.1:
        return ""
    return "an " if word[0] in "aeiou" and rng.random() < 0.8 else "a "


def _background_phrase(colour: str, rng: np.random.Generator) -> str:
    return f"on {_article(colour, rng) or 'a '}{colour} background"


def _variation(kind_of: str, rng: np.random.Generator) -> str:
    """One appended variation of an attribute, with a random value."""
    if kind_of == "background":
        return _background_phrase(str(rng.choice(COLOURS)), rng)
    if kind_of == "colour":
        return str(rng.choice(COLOURS))
    if kind_of == "kind":
        return str(rng.choice(KINDS))
    if kind_of == "size":
        return str(rng.choice(list(SIZE_SYNONYMS)))
    style = str(rng.choice(STYLES[1:]))
    return str(rng.choice(STYLE_PHRASES[style]))


def random_caption(rng: np.random.Generator) -> str:
    """A prompt as people write them: a base phrase, then zero to three appended variations that may override it.

    The base names the kind most of the time and the colour, size and background some of the time; each
    variation names one attribute (background, colour alone, kind alone, size or style); now and then a word
    it does not know sits among them, to be ignored.
    """
    noun = str(rng.choice(KINDS)) if rng.random() < 0.9 else "shape"
    if rng.random() < 0.85:
        noun = f"{rng.choice(COLOURS)} {noun}"
    if rng.random() < 0.3:
        noun = f"{rng.choice(list(SIZE_SYNONYMS))} {noun}"
    text = _article(noun, rng) + noun
    if rng.random() < 0.45:
        text += " " + _background_phrase(str(rng.choice(COLOURS)), rng)
    count = rng.choice(4, p=[0.3, 0.35, 0.2, 0.15])
    kinds = rng.choice(["background", "colour", "kind", "size", "style"], size=count, p=[0.25, 0.2, 0.15, 0.15, 0.25])
    parts = [text, *(_variation(str(k), rng) for k in kinds)]
    if rng.random() < 0.15:  # a word it does not know ("award winning"), spelt letter by letter: it means nothing
        parts.insert(int(rng.integers(1, len(parts) + 1)), _filler(rng))
    return ", ".join(parts)


def _filler(rng: np.random.Generator) -> str:
    """A made-up word that names no attribute."""
    while True:
        word = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=int(rng.integers(3, 9))))
        if word not in VOCABULARY:
            return word


def sample_scene(rng: np.random.Generator) -> tuple[Scene, str]:
    """A random prompt and the scene it reads as (prompts giving a shape its background's colour are redrawn)."""
    while True:
        prompt = random_caption(rng)
        words = read_prompt(prompt)
        if words.colour != words.background:
            return Scene(words, *sample_layout(rng)), prompt


def partner_scene(scene: Scene, prompt: str, rng: np.random.Generator) -> tuple[Scene, str]:
    """Another scene on `scene`'s layout, and its prompt: what a user's variation of `prompt` shows from the same seed.

    Mostly `prompt` with one appended variation (a colour alone most often: the one a causal text encoder learns
    last); sometimes a caption of its own. Training pairs the two (same noise, same timestep) so that the words
    cannot move the layout (TrainConfig.layout_consistency).
    """
    while True:
        if rng.random() < 0.8:
            kind_of = str(rng.choice(["background", "colour", "kind", "size", "style"], p=[0.2, 0.3, 0.15, 0.15, 0.2]))
            text = f"{prompt}, {_variation(kind_of, rng)}" if prompt else _variation(kind_of, rng)
        else:
            text = random_caption(rng)
        words = read_prompt(text)
        if words.colour != words.background:
            return Scene(words, scene.cx, scene.cy, scene.disk), text


# ---------------------------------------------------------------- rendering


def shape_box(scene: Scene) -> tuple[float, float, float]:
    """(x0, y0, width) of the square box the kind is drawn in, centred on the layout.

    A triangle's box sits a twelfth of its width higher, so its box centre and its centroid (two thirds down)
    are equally near the layout's centre: a kind variation moves neither by more than width / 12.
    """
    width = scene.width
    lift = width / 12 if scene.words.kind == "triangle" else 0.0
    return scene.cx - width / 2, scene.cy - width / 2 - lift, width


def shape_mask(scene: Scene) -> np.ndarray:
    """(64, 64) bool mask of the plain shape: every style keeps it."""
    x0, y0, width = shape_box(scene)
    return kind_mask(scene.words.kind, x0, y0, width, width)


def layout_disk(scene: Scene) -> np.ndarray:
    """(64, 64) bool disk of the layout: the seed's part, the same whatever the words say."""
    return kind_mask("circle", scene.cx - scene.disk / 2, scene.cy - scene.disk / 2, scene.disk, scene.disk)


def depth(mask: np.ndarray, limit: int = 32) -> np.ndarray:
    """Per pixel of `mask`, 1 + the number of 4-neighbour erosions it survives (1 on the outline); 0 outside."""
    result = np.zeros(mask.shape, dtype=np.int32)
    current = mask.copy()
    for level in range(1, limit + 1):
        if not current.any():
            break
        result[current] = level
        padded = np.pad(current, 1)
        current = (current & padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:])
    return result


def _distance(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)))


def contrast_colour(colour: str, background: str, palette_only: bool = False) -> tuple[int, int, int]:
    """The colour (palette, or grey) farthest from both the shape's and the background's."""
    candidates = [PALETTE[c] for c in COLOURS] + ([] if palette_only else [GREY])
    return max(candidates, key=lambda c: min(_distance(c, PALETTE[colour]), _distance(c, PALETTE[background])))


def ring_colours(colour: str, background: str) -> list[tuple[int, int, int]]:
    """Three palette colours for the colorful style, after the shape's own in palette order, all far from the
    background."""
    start = COLOURS.index(colour)
    order = COLOURS[start + 1:] + COLOURS[:start + 1]
    far = [PALETTE[c] for c in order if _distance(PALETTE[c], PALETTE[background]) >= MIN_CONTRAST]
    return (far * 3)[:3]


def keep_contrast(pixels: np.ndarray, base: np.ndarray, background: np.ndarray, least: float) -> np.ndarray:
    """(n, 3) float colours moved back toward the plain colour `base` (no further than needed, in steps of 5%)
    wherever they come nearer the background than `least`; `base` itself is at least that far."""
    steps = np.linspace(0, 1, 21)[:, None, None]  # (21, 1, 1)
    candidates = pixels[None] + (base - pixels[None]) * steps  # (21, n, 3)
    far = np.linalg.norm(candidates - background, axis=2) >= least - 1e-6  # (21, n)
    first = np.where(far.any(axis=0), far.argmax(axis=0), len(steps) - 1)
    return candidates[first, np.arange(len(pixels))]


def style_pixels(scene: Scene, mask: np.ndarray) -> np.ndarray:
    """(n, 3) float colours of the mask's pixels (in row-major order) under the scene's style."""
    words = scene.words
    base = np.array(PALETTE[words.colour], dtype=float)
    background = np.array(PALETTE[words.background], dtype=float)
    ys, xs = np.nonzero(mask)
    inner = depth(mask)[ys, xs].astype(float)
    _, y0, width = shape_box(scene)
    if words.style == "plain":
        return np.broadcast_to(base, (len(ys), 3)).copy()
    if words.style == "realistic":
        t = np.clip((ys + 0.5 - y0) / width, 0, 1)  # 0 at the box's top, 1 at its bottom
        rim = np.clip(1 - (inner - 1) / 4, 0, 1)
        shadow = np.minimum(0.55 * t + 0.3 * rim, 0.85)[:, None]
        highlight = (0.6 * (1 - t))[:, None]
        shaded = base * (1 - shadow)
        pixels = shaded + (255 - shaded) * highlight
    elif words.style == "artsy":
        band = max(3, round(width / 7))
        pixels = np.where((inner <= band)[:, None], np.array(contrast_colour(words.colour, words.background), float),
                          base)
    elif words.style == "colorful":
        ring = max(2, round(width / 8))
        colours = np.array(ring_colours(words.colour, words.background), dtype=float)
        pixels = colours[((inner - 1) // ring).astype(int) % len(colours)]
    elif words.style == "trending":
        second = np.array(contrast_colour(words.colour, words.background, palette_only=True), float)
        pixels = np.where((ys + 0.5 > scene.cy)[:, None], second, base)
    else:
        raise ValueError(f"style must be one of {STYLES}, got {words.style!r}")
    return keep_contrast(pixels, base, background, min(MIN_CONTRAST, _distance(base, background)))


def render(scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """The (64, 64, 3) uint8 image of a scene and its (64, 64) bool shape mask."""
    mask = shape_mask(scene)
    image = np.empty((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    image[:] = PALETTE[scene.words.background]
    image[mask] = np.round(style_pixels(scene, mask)).astype(np.uint8)
    return image, mask
