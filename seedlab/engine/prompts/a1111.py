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
- clip skip N: the text encoder's N-th layer from the end, through its final layer norm;
- textual inversion (modules/textual_inversion/textual_inversion.py, sd_hijack.py): an embedding's name is
  found by its token ids, the longest name first, within one attention piece; its n vectors take n places of
  the chunk (token 0 as a placeholder, the piece's weight), in the next chunk when they do not fit in this one;
  they replace the token embeddings of those places, before the position embeddings are added. The vectors
  come from text_inversion.py; here they are a mapping name -> [n, hidden] tensor.

"a1111" on SDXL (two encoders, a pooled vector) is engine/prompts/sdxl.py's, on these chunks and emphasis.
"novelai" is this pipeline with NovelAI's brackets for the weights (engine/prompts/novelai.py); "comfyui" is ComfyUI's
own reading (engine/prompts/comfyui.py). "plain" (the default, what every earlier link and PNG meant) passes the text to
the pipeline as it is.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import torch

from ..recipe import FieldError
from . import novelai as prompts_novelai

MAX_CHUNKS = 32  # a prompt of at most 2,000 characters has at most ~10 chunks of 75 tokens
COMMA_BACKTRACK = 20  # A1111's comma_padding_backtrack default
# An attention weight's magnitude: A1111 takes any number, and past this the image is noise or NaN.
MAX_WEIGHT = 100
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
    fixes: list[tuple[int, str]] = field(default_factory=list)  # (place after BOS, embedding name): A1111's fixes


Lookup = dict[int, list[tuple[list[int], str]]]  # first token id -> (a name's token ids, the name), longest first


def lookup(tokenizer, names) -> Lookup:
    """A1111's ids_lookup (register_embedding_by_name): each name by its token ids, longest first."""
    names = list(names)
    found: Lookup = {}
    ids = tokenizer(names, truncation=False, add_special_tokens=False)["input_ids"] if names else []
    for name, tokens in zip(names, ids):
        if tokens:  # a name with no tokens can never be found (A1111 fails to register it)
            found.setdefault(tokens[0], []).append((list(tokens), name))
    for entries in found.values():
        entries.sort(key=lambda entry: len(entry[0]), reverse=True)  # stable: equal lengths keep their order
    return found


def match(names: Lookup, tokens: list[int], position: int) -> tuple[str | None, int]:
    """A1111's find_embedding_at_position: the embedding whose name's ids start at `position`, and their count."""
    for ids, name in names.get(tokens[position], ()):
        if tokens[position:position + len(ids)] == ids:
            return name, len(ids)
    return None, 0


def pieces(tokenizer, text: str, emphasis: str = "Original",
           syntax: str = "a1111") -> list[tuple[list[int], str, float]]:
    """The prompt's attention pieces (BREAK included) with their token ids, as tokenize_line tokenizes them; the
    brackets are A1111's or, with `syntax` "novelai", NovelAI's."""
    parse = prompts_novelai.parse if syntax == "novelai" else parse_attention
    parsed = parse(text) if emphasis != "None" else [[text, 1.0]]
    for piece, weight in parsed:  # (x:1e308) or a thousand brackets: an image of NaN, with nothing said
        if (piece, weight) != _BREAK_MARK and not abs(weight) <= MAX_WEIGHT:
            raise FieldError("prompt", f"gives {piece.strip()[:40]!r} the weight {weight:.4g}: attention weights must "
                                       f"be from -{MAX_WEIGHT} to {MAX_WEIGHT}")
    tokenized = tokenizer([piece for piece, _ in parsed], truncation=False, add_special_tokens=False)["input_ids"]
    return [(tokens, piece, weight) for tokens, (piece, weight) in zip(tokenized, parsed)]


def names_used(tokenizer, text: str, names: Lookup, emphasis: str = "Original") -> list[str]:
    """The embeddings the prompt uses, in order, each once: where tokenize_line finds them (chunks aside)."""
    used: dict[str, None] = {}
    for tokens, piece, weight in pieces(tokenizer, text, emphasis):
        position = 0
        while (piece, weight) != _BREAK_MARK and position < len(tokens):
            name, size = match(names, tokens, position)
            if name is not None:
                used.setdefault(name, None)
            position += size or 1
    return list(used)


class _Chunker:
    """tokenize_line's state: the chunk being filled, the last comma in it, the chunks closed."""

    def __init__(self, tokenizer):
        self.length = tokenizer.model_max_length - 2
        self.start, self.end = tokenizer.bos_token_id, tokenizer.eos_token_id
        self.pad = self.end if tokenizer.pad_token_id is None else tokenizer.pad_token_id
        self.chunks: list[Chunk] = []
        self.chunk, self.last_comma = Chunk(), -1

    def close(self) -> None:
        chunk, missing = self.chunk, self.length - len(self.chunk.tokens)
        chunk.tokens = [self.start, *chunk.tokens, *[self.end] * max(missing, 0), self.end]
        chunk.weights = [1.0, *chunk.weights, *[1.0] * max(missing, 0), 1.0]
        if self.pad != self.end:  # SD 2.x: after the first end token, the pad token (A1111's process_tokens)
            first = chunk.tokens.index(self.end)
            chunk.tokens[first + 1:] = [self.pad] * (len(chunk.tokens) - first - 1)
        self.chunks.append(chunk)
        self.chunk, self.last_comma = Chunk(), -1
        if len(self.chunks) > MAX_CHUNKS:
            raise FieldError("prompt", f"must be at most {MAX_CHUNKS} chunks of {self.length} tokens with A1111's "
                                       "reading of prompts")

    def before(self, token: int, comma: int) -> None:
        """Before a token is placed: note a comma, or move what follows the last one out of a full chunk."""
        chunk = self.chunk
        if token == comma:
            self.last_comma = len(chunk.tokens)
        elif len(chunk.tokens) == self.length and self.last_comma != -1 \
                and len(chunk.tokens) - self.last_comma <= COMMA_BACKTRACK:
            cut = self.last_comma + 1  # the chunk's fixes stay with it, as in A1111
            moved = (chunk.tokens[cut:], chunk.weights[cut:])
            chunk.tokens, chunk.weights = chunk.tokens[:cut], chunk.weights[:cut]
            self.close()
            self.chunk.tokens, self.chunk.weights = list(moved[0]), list(moved[1])
        if len(self.chunk.tokens) == self.length:
            self.close()

    def place(self, name: str, count: int, weight: float) -> None:
        """An embedding's `count` vectors: in the next chunk when they do not fit in this one."""
        if count > self.length:
            raise FieldError("prompt", f"uses the embedding {name!r} of {count} vectors; a chunk holds {self.length}")
        if len(self.chunk.tokens) + count > self.length:
            self.close()
        self.chunk.fixes.append((len(self.chunk.tokens), name))
        self.chunk.tokens += [0] * count
        self.chunk.weights += [weight] * count


def chunks_of(tokenizer, text: str, emphasis: str = "Original",
              embeddings: Mapping[str, torch.Tensor] | None = None, syntax: str = "a1111") -> list[Chunk]:
    """A1111's tokenize_line: the prompt's chunks, each [BOS] + L tokens (padded) + [EOS], with weights, and
    where each embedding's vectors go (`embeddings`: name -> [n, hidden] vectors)."""
    names = lookup(tokenizer, embeddings) if embeddings else {}
    comma = tokenizer.convert_tokens_to_ids(",</w>")
    chunker = _Chunker(tokenizer)
    for tokens, piece, weight in pieces(tokenizer, text, emphasis, syntax):
        if (piece, weight) == _BREAK_MARK:
            chunker.close()
            continue
        position = 0
        while position < len(tokens):
            chunker.before(tokens[position], comma)
            name, size = match(names, tokens, position) if names else (None, 0)
            if name is None:
                chunker.chunk.tokens.append(tokens[position])
                chunker.chunk.weights.append(weight)
                position += 1
            else:
                chunker.place(name, len(embeddings[name]), weight)
                position += size
    if chunker.chunk.tokens or not chunker.chunks:
        chunker.close()
    return chunker.chunks


def encode(tokenizer, text_encoder, text: str, *, emphasis: str = "Original", clip_skip: int = 1,
           device: torch.device | None = None, embeddings: Mapping[str, torch.Tensor] | None = None,
           syntax: str = "a1111") -> torch.Tensor:
    """A1111's conditioning of one prompt: (1, chunks x (L + 2), hidden), each chunk encoded on its own."""
    device = device or text_encoder.device
    encoded = []
    for chunk in chunks_of(tokenizer, text, emphasis, embeddings, syntax):
        tokens = torch.asarray([chunk.tokens]).to(device)
        with fixed(text_encoder, chunk.fixes, embeddings) if chunk.fixes else nullcontext():
            output = text_encoder(input_ids=tokens, output_hidden_states=clip_skip > 1)
        if clip_skip > 1:
            z = text_encoder.final_layer_norm(output.hidden_states[-clip_skip])
        else:
            z = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
        encoded.append(emphasize(z, chunk.weights, emphasis))
    return torch.hstack(encoded)


def emphasize(z: torch.Tensor, weights: list[float], emphasis: str) -> torch.Tensor:
    """A1111's sd_emphasis after_transformers on one chunk's output z (1, L + 2, hidden): "Original" multiplies each
    token by its weight and rescales to the old mean, "No norm" multiplies only, "None" leaves z as it is."""
    weights = torch.asarray([weights]).to(z.device)
    if emphasis == "Original":
        mean = z.mean()
        z = z * weights.reshape(weights.shape + (1,)).expand(z.shape)
        z = z * (mean / z.mean())
    elif emphasis == "No norm":
        z = z * weights.reshape(weights.shape + (1,)).expand(z.shape)
    return z


def token_embedding(text_encoder) -> torch.nn.Module:
    """The CLIP text encoder's token embedding (transformers 5.x: at the top; earlier: under text_model)."""
    return getattr(text_encoder, "text_model", text_encoder).embeddings.token_embedding


@contextmanager
def fixed(text_encoder, fixes: list[tuple[int, str]], embeddings: Mapping[str, torch.Tensor]):
    """A1111's EmbeddingsWithFixes for one chunk: the token embeddings' output with each embedding's vectors
    written at its places (after BOS), in the output's dtype; only for this thread's call."""
    owner = threading.get_ident()

    def hook(module, inputs, output):
        if threading.get_ident() != owner:
            return None
        output = output.clone()
        for offset, name in fixes:
            vectors = embeddings[name].to(output.device, torch.float32)
            count = min(output.shape[1] - offset - 1, vectors.shape[0])
            output[0, offset + 1:offset + 1 + count] = vectors[:count].to(output.dtype)
        return output

    handle = token_embedding(text_encoder).register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def check_encoder(pipe, syntax: str = "a1111") -> None:
    """A1111's, NovelAI's and ComfyUI's syntaxes need one CLIP text encoder and its tokenizer (SD 1.x / 2.x); refused
    by name elsewhere. (A1111's on SDXL's pair of encoders is engine/prompts/sdxl.py's, which embeddings.py calls
    instead.)"""
    tokenizer, encoder = getattr(pipe, "tokenizer", None), getattr(pipe, "text_encoder", None)
    if tokenizer is None or encoder is None or hasattr(pipe, "text_encoder_2") \
            or type(encoder).__name__ != "CLIPTextModel" or not hasattr(encoder, "final_layer_norm"):
        also = " or SDXL's two" if syntax == "a1111" else ""
        raise FieldError("prompt_syntax", f"{syntax} needs one CLIP text encoder (Stable Diffusion 1.x, 2.x){also}; "
                                          f"{type(pipe).__name__} encodes prompts its own way: use plain")
