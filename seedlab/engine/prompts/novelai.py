"""NovelAI's prompt syntax for its Stable Diffusion 1.x-based models, read through A1111's pipeline (prompts.py).

A recipe with `prompt_syntax` "novelai" reads `{word}` as weight x1.05 and `[word]` as weight / 1.05, each further
pair of brackets multiplying again ({{word}} = 1.1025), and encodes the weighted pieces as A1111 does: chunks of
75 tokens, A1111's emphasis (the recipe's `emphasis`, Original by default) and clip skip.

What is known: the bracket strengths are NovelAI's documented ones ("Strengthening & Weakening Vectors": 5% per
pair); round brackets are plain text in NovelAI; its SD 1.x-based models read CLIP's penultimate layer through the
final layer norm, and take up to 225 tokens as 75-token chunks encoded apart and concatenated (NovelAI's blog,
"NovelAI Improvements on Stable Diffusion", October 2022). A1111 reads a NovelAI image as Clip skip 2 and ENSD
31337 and passes its prompt on unchanged (modules/images.py, read_info_from_image): NovelAI files read here get
this syntax and clip skip 2.

What is not known, NovelAI's code not being public, and is A1111's here: how a weight acts on the conditioning
(A1111's Original emphasis: multiply, then restore the mean), where a long prompt is cut (after a comma within 20
tokens of a chunk's end), brackets left open (they weigh to the end) or closed with none open (text), and a prompt
beyond 225 tokens (more chunks). `(word:1.2)`, BREAK, backslashes, textual-inversion names and `<lora:...>` tags
are read as text, as NovelAI has none of them.
"""

from __future__ import annotations

import re

STRENGTH = 1.05
_PIECES = re.compile(r"[{}\[\]]|[^{}\[\]]+")


def parse(text: str) -> list[list]:
    """[[text, weight], ...] as prompts.parse_attention gives them: runs of one weight merged, at least one piece."""
    parts: list[list] = []
    curly: list[int] = []
    square: list[int] = []

    def multiply(start: int, factor: float) -> None:
        for part in parts[start:]:
            part[1] *= factor

    for match in _PIECES.finditer(text):
        piece = match.group(0)
        if piece == "{":
            curly.append(len(parts))
        elif piece == "[":
            square.append(len(parts))
        elif piece == "}" and curly:
            multiply(curly.pop(), STRENGTH)
        elif piece == "]" and square:
            multiply(square.pop(), 1 / STRENGTH)
        else:
            parts.append([piece, 1.0])
    for start in curly:
        multiply(start, STRENGTH)
    for start in square:
        multiply(start, 1 / STRENGTH)
    if not parts:
        return [["", 1.0]]
    merged = [parts[0]]
    for part in parts[1:]:
        if part[1] == merged[-1][1]:
            merged[-1][0] += part[0]
        else:
            merged.append(part)
    return merged
