"""ComfyUI's prompt syntax and conditioning for Stable Diffusion 1.x / 2.x, computed as ComfyUI computes it.

A recipe with `prompt_syntax` "comfyui" reads its prompts as ComfyUI's CLIPTextEncode does (read at
Comfy-Org/ComfyUI 4bd7a4004ab8: comfy/sd1_clip.py; 033046cc4fac: comfy/sd.py; comfy/text_encoders/sd2_clip.py,
comfy/clip_model.py and nodes.py' CLIPTextEncode and CLIPSetLastLayer):

- weights: `(word)` x1.1, nested groups multiply; `(word:1.2)` gives its group the weight 1.2 (it replaces the
  weight of the groups around it, it does not multiply with it); `\\(` and `\\)` are brackets in the text; a `)`
  with no group open makes the brackets after it text until the count climbs back; no `[word]`, no BREAK;
- `embedding:NAME`, at a weighted piece's start or after whitespace: a textual-inversion file of the models
  folder's embeddings, found as ComfyUI's load_embed finds it: NAME is the file's name with or without its
  extension (.safetensors, .pt, .bin, tried in that order), or a path under any folder of the embeddings; the name
  ends at whitespace, "<" or "["; "NAME," is tried without its commas; a name that is not found is left out of the
  prompt (ComfyUI warns);
- batches: each weighted piece is tokenized whole; a batch holds the tokenizer's length - 2 tokens (75) between
  its start and end tokens; a piece that does not fit moves whole to the next batch when it has fewer than 8
  tokens, else it is cut where the batch ends; a batch is padded with the end token (SD 1.x) or token 0 (SD 2.x);
- weighting: the batches, and when any weight is not 1 the empty prompt's tokens, are encoded together; a token of
  weight w becomes (z - z_empty) * w + z_empty at its position, no mean rescale; the batches are concatenated;
- CLIPSetLastLayer(-N), the recipe's clip skip N: SD 1.x reads the output of its N-th layer from the end through the
  final layer norm (N = 1: the last layer, ComfyUI's default). SD 2.x's default is OpenCLIP's penultimate layer,
  through the final layer norm: the last layer diffusers' SD 2.x text encoder keeps (it leaves OpenCLIP's last
  out), so clip skip 1 and 2 both read it and N > 2 reads the (N - 1)-th from the end of the diffusers encoder;
  ComfyUI's CLIPSetLastLayer(-1) on SD 2.x (OpenCLIP's last layer) cannot be made here.

Where SeedLab differs: a weight that is not a finite number, an embedding file that cannot be read or is made for
another width, more than MAX_CHUNKS batches and brackets nested deeper than MAX_DEPTH are refused with a message
naming the field (ComfyUI would give NaN conditioning, skip the file with a warning, or run out of stack).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from ..spec import FieldError
from ..weights import library
from . import text_inversion
from .a1111 import MAX_CHUNKS, MAX_WEIGHT, token_embedding

IDENTIFIER = "embedding:"
LONG_PIECE = 8  # ComfyUI's max_word_length: a piece this long is cut at a batch's end, a shorter one moved whole
EXTENSIONS = (".safetensors", ".pt", ".bin")  # load_embed's order for a name without one
MAX_DEPTH = 200  # bracket nesting (ComfyUI's recursion fails near 1,000)
_SPLIT = re.compile(r"(?<=\s)" + re.escape(IDENTIFIER))
_NAME_END = re.compile(r"[<\[]")

Token = int | tuple[str, int]  # a token id, or (embedding name, vector index)
Finder = Callable[[str], "torch.Tensor | None"]  # an embedding's vectors [n, width] by name; None: not found


def _top_level(text: str) -> list[str]:
    """ComfyUI's parse_parentheses: the runs of text and the whole "(...)" groups at the top level."""
    pieces, current, level = [], "", 0
    for char in text:
        if char == "(" and level == 0:
            if current:
                pieces.append(current)
            current, level = "(", 1
            continue
        if char == ")":
            level -= 1
            if level == 0:
                pieces.append(current + ")")
                current = ""
                continue
        elif char == "(":
            level += 1
        current += char
    if current:
        pieces.append(current)
    return pieces


def weighted_pieces(text: str, field: str = "prompt") -> list[tuple[str, float]]:
    """ComfyUI's token_weights of the escaped text, unescaped: [(piece, weight)] in order (not merged)."""
    escaped = text.replace("\\)", "\0\1").replace("\\(", "\0\2")
    out: list[tuple[str, float]] = []
    stack: list[tuple[str, float, int]] = [(escaped, 1.0, 0)]  # (text, weight, depth; -1: a finished piece), last first
    while stack:
        piece, weight, depth = stack.pop()
        if depth < 0:
            out.append((piece.replace("\0\1", ")").replace("\0\2", "("), weight))
            continue
        if depth > MAX_DEPTH:
            raise FieldError(field, f"nests brackets more than {MAX_DEPTH} deep")
        expanded = []
        for part in _top_level(piece):
            if len(part) < 2 or part[0] != "(" or part[-1] != ")":
                expanded.append((part, weight, -1))
                continue
            inner, inner_weight = part[1:-1], weight * 1.1
            colon = inner.rfind(":")
            number = _number(inner[colon + 1:], field) if colon > 0 else None
            if number is not None:
                inner, inner_weight = inner[:colon], number
            expanded.append((inner, inner_weight, depth + 1))
        stack.extend(reversed(expanded))
    return out


def _number(text: str, field: str) -> float | None:
    try:
        value = float(text)
    except ValueError:  # not a number: the ":" and what follows stay text, the group weighs 1.1
        return None
    if not abs(value) <= MAX_WEIGHT:  # NaN and inf too; 1e308 made an image of NaN with nothing said
        raise FieldError(field, f"gives the weight {text.strip()[:20]!r}: a weight must be a number from "
                                f"-{MAX_WEIGHT} to {MAX_WEIGHT}")
    return value


def tokenize(tokenizer, text: str, find: Finder | None = None, field: str = "prompt") -> list[list[tuple]]:
    """ComfyUI's tokenize_with_weights: batches of (token, weight), each [start] + 75 tokens or padding + [end]."""
    groups: list[list[tuple]] = []
    for piece, weight in weighted_pieces(text, field):
        if not abs(weight) <= MAX_WEIGHT:  # two hundred brackets deep: 1.1 ** 200
            raise FieldError(field, f"gives {piece.strip()[:40]!r} the weight {weight:.4g}: a weight must be a number "
                                    f"from -{MAX_WEIGHT} to {MAX_WEIGHT}")
        parts = _SPLIT.split(piece)
        for word in filter(None, [parts[0], *(IDENTIFIER + rest for rest in parts[1:])]):
            if word.startswith(IDENTIFIER):
                name, vectors, word = _embedding(word[len(IDENTIFIER):].strip("\n"), find, field)
                if vectors is not None:
                    groups.append([((name, row), weight) for row in range(len(vectors))])
                if not word:
                    continue
            groups.append([(token, weight) for token in tokenizer(word, truncation=False)["input_ids"][1:-1]])
    return _batches(groups, tokenizer, field)


def _embedding(text: str, find: Finder | None, field: str) -> tuple[str, torch.Tensor | None, str]:
    """SDTokenizer._try_get_embedding: (the name found, its vectors or None, the text left after the name)."""
    words = text.split()
    if not words:
        raise FieldError(field, f"has {IDENTIFIER!r} with no name after it (ComfyUI fails on it)")
    name, rest = words[0], " ".join(words[1:])
    cut = _NAME_END.search(name)
    if cut is not None:
        name, rest = name[:cut.start()], name[cut.start():] + (" " + rest if rest else "")
    vectors = find(name) if find is not None and name else None
    stripped = name.strip(",")
    if vectors is None and len(stripped) < len(name):
        found = find(stripped) if find is not None and stripped else None
        return stripped, found, f"{name[len(stripped):]} {rest}"  # ComfyUI's leftover, as it slices it
    return name, vectors, rest


def _batches(groups: list[list[tuple]], tokenizer, field: str) -> list[list[tuple]]:
    """The groups laid into batches of the tokenizer's length, as tokenize_with_weights lays them."""
    start, end, pad = tokenizer.bos_token_id, tokenizer.eos_token_id, pad_token(tokenizer)
    room = tokenizer.model_max_length - 1  # a batch's tokens before its end token, its start token included
    batches = [[(start, 1.0)]]
    for group in groups:
        long = len(group) >= LONG_PIECE
        while group:
            batch = batches[-1]
            if len(batch) + len(group) <= room:
                batch.extend(group)
                break
            free = room - len(batch)
            if long:
                batch.extend(group[:free])
                group = group[free:]
                batch.append((end, 1.0))
            else:
                batch.extend([(end, 1.0)] + [(pad, 1.0)] * free)
            batches.append([(start, 1.0)])
            if len(batches) > MAX_CHUNKS:
                raise FieldError(field, f"must be at most {MAX_CHUNKS} batches of {room - 1} tokens with prompt "
                                        "syntax comfyui")
    batches[-1].append((end, 1.0))
    batches[-1].extend([(pad, 1.0)] * (room + 1 - len(batches[-1])))
    return batches


def openclip(tokenizer) -> bool:
    """SD 2.x's OpenCLIP text encoder: its tokenizer pads with a token of its own (diffusers' "!", ComfyUI's 0)."""
    return tokenizer.pad_token_id is not None and tokenizer.pad_token_id != tokenizer.eos_token_id


def pad_token(tokenizer) -> int:
    """ComfyUI's padding: the end token for SD 1.x, 0 for SD 2.x (SD2ClipHTokenizer's pad_with_end=False)."""
    return 0 if openclip(tokenizer) else tokenizer.eos_token_id


def hidden_state(tokenizer, text_encoder, clip_skip: int) -> int | None:
    """The index in the encoder's hidden_states that CLIPSetLastLayer(-clip_skip) reads (None: its last layer, as
    last_hidden_state has it); see the module's docstring for SD 2.x."""
    layers = text_encoder.config.num_hidden_layers
    dropped = int(openclip(tokenizer))  # OpenCLIP's last layer, which diffusers' SD 2.x encoder leaves out
    index = -clip_skip if clip_skip > 1 else -1 - dropped  # ComfyUI's layer_idx (SD 2.x's default: -2)
    if abs(index) > layers + dropped:  # ComfyUI reads its "last" layer then
        index = -1
    state = layers + dropped + index + 1  # ComfyUI's intermediate output of layer i is hidden_states[i + 1]
    if state > layers:
        raise FieldError("clip_skip", f"ComfyUI reads OpenCLIP's last layer here (CLIPSetLastLayer -{clip_skip}), "
                                      "which diffusers' SD 2.x text encoder leaves out")
    return None if state == layers else state


def encode(tokenizer, text_encoder, text: str, *, clip_skip: int = 1, device: torch.device | None = None,
           find: Finder | None = None, field: str = "prompt") -> torch.Tensor:
    """ComfyUI's conditioning of one prompt: (1, batches x tokenizer length, hidden), float32."""
    try:
        batches = tokenize(tokenizer, text, find, field)
    except (text_inversion.EmbeddingError, OSError) as error:
        raise FieldError(field, str(error)) from None
    device = device or text_encoder.device
    weights = torch.tensor([[weight for _, weight in batch] for batch in batches], dtype=torch.float32)
    weighted = bool((weights != 1.0).any())
    rows = [[token for token, _ in batch] for batch in batches]
    if weighted:  # gen_empty_tokens: start, end, then padding
        length = len(rows[0])
        rows.append([tokenizer.bos_token_id, tokenizer.eos_token_id] + [pad_token(tokenizer)] * (length - 2))
    ids = torch.tensor([[token if isinstance(token, int) else 0 for token in row] for row in rows], device=device)
    fixes = [(i, j, find(token[0])[token[1]]) for i, row in enumerate(rows) for j, token in enumerate(row)
             if not isinstance(token, int)]
    state = hidden_state(tokenizer, text_encoder, clip_skip)
    with _written(text_encoder, fixes) if fixes else nullcontext():
        output = text_encoder(input_ids=ids, output_hidden_states=state is not None)
    z = output.last_hidden_state if state is None else text_encoder.final_layer_norm(output.hidden_states[state])
    z = z.float()
    if weighted:
        z, empty = z[:-1], z[-1]
        w = weights.to(z.device)[..., None]
        z = torch.where(w != 1.0, (z - empty) * w + empty, z)
    return z.reshape(1, -1, z.shape[-1])


@contextmanager
def _written(text_encoder, fixes: list[tuple[int, int, torch.Tensor]]):
    """process_tokens' embedding vectors in place of their placeholder tokens (row, position), for this thread's
    call only."""
    owner = threading.get_ident()

    def hook(module, inputs, output):
        if threading.get_ident() != owner:
            return None
        output = output.clone()
        for row, position, vector in fixes:
            output[row, position] = vector.to(output.device, torch.float32).to(output.dtype)
        return output

    handle = token_embedding(text_encoder).register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


class EmbeddingFinder:
    """ComfyUI's load_embed over the models folder's embeddings: every name a file is found by (see the module's
    docstring), its vectors read once (text_inversion.load: the layouts, limits and width check SeedLab reads)."""

    def __init__(self, width: int, root: Path | None = None):
        self.width, self.files = width, embedding_names(root)
        self.loaded: dict[str, torch.Tensor] = {}

    def __call__(self, name: str) -> torch.Tensor | None:
        path = self.files.get(name)
        if path is None:
            return None
        if name not in self.loaded:
            try:
                self.loaded[name] = text_inversion.load(path, self.width)
            except (text_inversion.EmbeddingError, OSError) as error:
                raise text_inversion.EmbeddingError(f"uses the embedding {name!r}: {error}") from None
        return self.loaded[name]


def embedding_names(root: Path | None = None) -> dict[str, Path]:
    """name -> file, for each name load_embed accepts: the file's path under any folder of the embeddings (its last
    parts), with its extension or without it; of several files, the one with the name as given, then by
    extension (.safetensors, .pt, .bin), then the first listed. Empty files are left out."""
    folders = library.folders("embedding", root)
    ranked: dict[str, tuple[int, int, Path]] = {}
    paths = [path for listed in library.files("embedding", root).values() for path in listed]
    for order, path in enumerate(paths):
        folder = next((folder for folder in folders if path.is_relative_to(folder)), None)
        if folder is None or _size(path) == 0:
            continue
        parts = path.relative_to(folder).parts
        for first in range(len(parts)):
            tail = "/".join(parts[first:])
            names = [(tail, 0)]
            if path.suffix in EXTENSIONS:
                names.append((tail[:-len(path.suffix)], 1 + EXTENSIONS.index(path.suffix)))
            for name, rank in names:
                if name and (name not in ranked or (rank, order) < ranked[name][:2]):
                    ranked[name] = (rank, order, path)
    return {name: path for name, (_, _, path) in ranked.items()}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
