"""A1111's prompt syntax and conditioning for Stable Diffusion 1.x / 2.x, computed as A1111 1.10 computes it.

A recipe with `prompt_syntax` "a1111" reads its prompts as AUTOMATIC1111 does (modules/prompt_parser.py,
sd_hijack_clip.py, sd_emphasis.py):

- attention: `(word)` x1.1, `[word]` / 1.1, `(word:1.3)`, nested brackets multiply, `\\(` is a bracket
  in the text; `BREAK` ends a chunk;
- chunks: the tokens are cut into chunks of L tokens (75 for SD; the tokenizer's length - 2), a full
  chunk broken after its last comma when that comma is within 20 tokens of the end; each chunk is
  [BOS] + tokens + padding + [EOS], encoded on its own, and the chunks are concatenated;
- emphasis: "Original" multiplies each token's embedding by its weight and rescales the whole to its
  old mean; "No norm" multiplies only; "None" ignores the brackets;
- clip skip N: the text encoder's N-th layer from the end, through its final layer norm.

"plain" (the default, what every earlier link and PNG meant) passes the text to the pipeline as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from .recipe import FieldError

MAX_CHUNKS = 32  # a prompt of at most 2,000 characters has at most ~10 chunks of 75 tokens
COMMA_BACKTRACK = 20  # A1111's comma_padding_backtrack default
_ATTENTION = re.compile(r"\\\(|\\\)|\\\[|\\]|\\\\|\\|\(|\[|:\s*([+-]?[.\d]+)\s*\)|\)|]|[^\\()\[\]:]+|:")
_BREAK = re.compile(r"\s*\bBREAK\b\s*", re.DOTALL)
_BREAK_MARK = ("BREAK", -1.0)


def parse_attention(text: str) -> list[list]:
    """A1111's parse_prompt_attention: [[text, weight], ...], runs of one weight merged, BREAK as ["BREAK", -1]."""
    parts: list[list] = []
    round_open: list[int] = []
    square_open: list[int] = []

    def multiply(start: int, factor: float) -> None:
        for part in parts[start:]:
            part[1] *= factor

    for match in _ATTENTION.finditer(text):
        piece, weight = match.group(0), match.group(1)
        number = _number(weight)
        if piece.startswith("\\"):
            parts.append([piece[1:], 1.0])
        elif piece == "(":
            round_open.append(len(parts))
        elif piece == "[":
            square_open.append(len(parts))
        elif weight is not None and round_open and number is not None:
            multiply(round_open.pop(), number)
        elif piece == ")" and round_open:
            multiply(round_open.pop(), 1.1)
        elif piece == "]" and square_open:
            multiply(square_open.pop(), 1 / 1.1)
        else:
            for index, chunk in enumerate(_BREAK.split(piece)):
                if index:
                    parts.append(list(_BREAK_MARK))
                parts.append([chunk, 1.0])
    for start in round_open:
        multiply(start, 1.1)
    for start in square_open:
        multiply(start, 1 / 1.1)
    if not parts:
        parts = [["", 1.0]]
    merged = [parts[0]]
    for part in parts[1:]:
        if part[1] == merged[-1][1]:
            merged[-1][0] += part[0]
        else:
            merged.append(part)
    return merged


def _number(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:  # "1.2.3": A1111 raises; here the text stays text
        return None


@dataclass
class Chunk:
    tokens: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)


def chunks_of(tokenizer, text: str, emphasis: str = "Original") -> list[Chunk]:
    """A1111's tokenize_line: the prompt's chunks, each [BOS] + L tokens (padded) + [EOS], with weights."""
    length = tokenizer.model_max_length - 2
    parsed = parse_attention(text) if emphasis != "None" else [[text, 1.0]]
    tokenized = tokenizer([piece for piece, _ in parsed], truncation=False, add_special_tokens=False)["input_ids"]
    comma = tokenizer.convert_tokens_to_ids(",</w>")
    start, end = tokenizer.bos_token_id, tokenizer.eos_token_id
    pad = end if tokenizer.pad_token_id is None else tokenizer.pad_token_id
    chunks: list[Chunk] = []
    chunk, last_comma = Chunk(), -1

    def close() -> None:
        nonlocal chunk, last_comma
        missing = length - len(chunk.tokens)
        chunk.tokens = [start, *chunk.tokens, *[end] * max(missing, 0), end]
        chunk.weights = [1.0, *chunk.weights, *[1.0] * max(missing, 0), 1.0]
        if pad != end:  # SD 2.x: after the first end token, the pad token (A1111's process_tokens)
            first = chunk.tokens.index(end)
            chunk.tokens[first + 1:] = [pad] * (len(chunk.tokens) - first - 1)
        chunks.append(chunk)
        chunk, last_comma = Chunk(), -1
        if len(chunks) > MAX_CHUNKS:
            raise FieldError("prompt", f"must be at most {MAX_CHUNKS} chunks of {length} tokens with prompt syntax a1111")

    for tokens, (piece, weight) in zip(tokenized, parsed):
        if (piece, weight) == _BREAK_MARK:
            close()
            continue
        for token in tokens:
            if token == comma:
                last_comma = len(chunk.tokens)
            elif len(chunk.tokens) == length and last_comma != -1 and len(chunk.tokens) - last_comma <= COMMA_BACKTRACK:
                moved = (chunk.tokens[last_comma + 1:], chunk.weights[last_comma + 1:])
                chunk.tokens, chunk.weights = chunk.tokens[:last_comma + 1], chunk.weights[:last_comma + 1]
                close()
                chunk.tokens, chunk.weights = list(moved[0]), list(moved[1])
            if len(chunk.tokens) == length:
                close()
            chunk.tokens.append(token)
            chunk.weights.append(weight)
    if chunk.tokens or not chunks:
        close()
    return chunks


def encode(tokenizer, text_encoder, text: str, *, emphasis: str = "Original", clip_skip: int = 1,
           device: torch.device | None = None) -> torch.Tensor:
    """A1111's conditioning of one prompt: (1, chunks x (L + 2), hidden), each chunk encoded on its own."""
    device = device or text_encoder.device
    encoded = []
    for chunk in chunks_of(tokenizer, text, emphasis):
        tokens = torch.asarray([chunk.tokens]).to(device)
        output = text_encoder(input_ids=tokens, output_hidden_states=clip_skip > 1)
        if clip_skip > 1:
            z = text_encoder.final_layer_norm(output.hidden_states[-clip_skip])
        else:
            z = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
        weights = torch.asarray([chunk.weights]).to(device)
        if emphasis == "Original":
            mean = z.mean()
            z = z * weights.reshape(weights.shape + (1,)).expand(z.shape)
            z = z * (mean / z.mean())
        elif emphasis == "No norm":
            z = z * weights.reshape(weights.shape + (1,)).expand(z.shape)
        encoded.append(z)
    return torch.hstack(encoded)


def check_encoder(pipe) -> None:
    """A1111's syntax needs one CLIP text encoder and its tokenizer (SD 1.x / 2.x); refused by name elsewhere."""
    tokenizer, encoder = getattr(pipe, "tokenizer", None), getattr(pipe, "text_encoder", None)
    if tokenizer is None or encoder is None or hasattr(pipe, "text_encoder_2") \
            or type(encoder).__name__ != "CLIPTextModel" or not hasattr(encoder, "final_layer_norm"):
        raise FieldError("prompt_syntax", f"a1111 needs one CLIP text encoder (Stable Diffusion 1.x, 2.x); "
                                          f"{type(pipe).__name__} encodes prompts its own way: use plain")
