"""A reference re-creation of how AUTOMATIC1111 stable-diffusion-webui 1.10 turns a prompt into the UNet's
conditioning for Stable Diffusion 1.x (one CLIP text encoder).

SeedLab's own prompt encoding is tested tensor for tensor against this file, so it follows A1111's sources step by
step (same control flow, same float operations in the same order) rather than a description of them. The names in
brackets say which A1111 function each step re-creates:

- modules/prompt_parser.py: `re_attention`, `re_break`, `parse_prompt_attention` (the attention syntax `(a)`,
  `[a]`, `(a:1.3)`, escapes, BREAK); `re_AND` / `re_weight` / `get_multicond_prompt_list` (a prompt's text is
  what `re_weight` leaves of it: trailing whitespace and a trailing `:number` are cut off).
- modules/sd_hijack_clip.py: `TextConditionalModel.tokenize_line` (chunks of 75 tokens, the comma back-tracking
  of `opts.comma_padding_backtrack`, BREAK, padding with the end token), `empty_chunk`, `process_texts`,
  `forward` (each chunk encoded on its own, the chunks' outputs `torch.hstack`-ed), `process_tokens`;
  `FrozenCLIPEmbedderWithCustomWords.__init__` (comma token `,</w>`, `id_pad = id_end`), `tokenize` and
  `encode_with_transformers` (clip skip, `opts.CLIP_stop_at_last_layers`).
- modules/sd_emphasis.py: `EmphasisNone`, `EmphasisIgnore`, `EmphasisOriginal`, `EmphasisOriginalNoNorm`.

A1111 assumes 75 prompt tokens per chunk (77 positions with BOS and EOS). Here the chunk length is
`tokenizer.model_max_length - 2`, so a test model with a shorter context (the embedded model: 32, so 30) chunks the
same way; the comma back-track stays 20 tokens as in A1111.

Settings are A1111 1.10's defaults (`emphasis` "Original", `CLIP_stop_at_last_layers` 1, `comma_padding_backtrack`
20, `use_old_emphasis_implementation` off), except those the interface exposes.

Not re-created (a prompt using them is outside what `a1111_conditioning` stands for):
- prompt editing `[from:to:when]` and alternation `[a|b]` (modules/prompt_parser.py's lark grammar; lark is not
  installed here). `a1111_conditioning` encodes the text that reaches the cond-stage model at one sampling step,
  i.e. a prompt without that syntax. (`[word:0.5]` is prompt editing in A1111, not a weight.) When A1111 encodes
  several schedule texts of one prompt, they are one batch, and "Original" emphasis takes its means over the
  whole batch; with one text (the only case here) the batch is 1.
- `AND` (composable diffusion) and a trailing `:weight` on the whole prompt: these give several conds or a
  weight applied in the CFG denoiser, not one tensor; `a1111_conditioning` raises ValueError for them.
- textual inversion: A1111's embedding database is taken to be empty (`find_embedding_at_position` finds
  nothing), so every token is an ordinary token and no chunk has fixes.
- SD2's `id_pad != id_end` re-padding in `process_tokens` (SD1 pads with the end token, so it is a no-op).
"""

from __future__ import annotations

import re

import torch

A1111_VERSION = "1.10"

EMPHASIS_OPTIONS = ("None", "Ignore", "Original", "No norm")  # modules/sd_emphasis.py `options` (names)

# --- modules/prompt_parser.py --------------------------------------------------------------------------------

# re_attention: the alternatives in A1111's order (the first one that matches at a position wins).
_RE_ATTENTION = re.compile(
    r"""
\\\(|
\\\)|
\\\[|
\\]|
\\\\|
\\|
\(|
\[|
:\s*([+-]?[.\d]+)\s*\)|
\)|
]|
[^\\()\[\]:]+|
:
""",
    re.VERBOSE,
)

_RE_BREAK = re.compile(r"\s*\bBREAK\b\s*", re.DOTALL)

_RE_AND = re.compile(r"\bAND\b")
_RE_WEIGHT = re.compile(r"^((?:\s|.)*?)(?:\s*:\s*([-+]?(?:\d+\.?|\d*\.\d+)))?\s*$")

_ROUND_MULTIPLIER = 1.1
_SQUARE_MULTIPLIER = 1 / 1.1


def parse_prompt_attention(text: str) -> list[list]:
    r"""A1111's parser: [[text, weight], ...] (its docstring's examples must hold).

    >>> parse_prompt_attention('normal text')
    [['normal text', 1.0]]
    >>> parse_prompt_attention('an (important) word')
    [['an ', 1.0], ['important', 1.1], [' word', 1.0]]
    >>> parse_prompt_attention('(unbalanced')
    [['unbalanced', 1.1]]
    >>> parse_prompt_attention('\\(literal\\]')
    [['(literal]', 1.0]]
    >>> parse_prompt_attention('(unnecessary)(parens)')
    [['unnecessaryparens', 1.1]]
    >>> parse_prompt_attention('a (((house:1.3)) [on] a (hill:0.5), sun, (((sky))).')  # doctest: +NORMALIZE_WHITESPACE
    [['a ', 1.0], ['house', 1.5730000000000004], [' ', 1.1], ['on', 1.0], [' a ', 1.1], ['hill', 0.55],
     [', sun, ', 1.1], ['sky', 1.4641000000000006], ['.', 1.1]]

    A BREAK (a whole word, with the whitespace around it) becomes the entry ["BREAK", -1]; like every entry it
    is multiplied by the brackets around it, so inside brackets it is no longer a BREAK (as in A1111).
    """
    result: list[list] = []
    open_round: list[int] = []  # index in `result` where each still-open "(" started
    open_square: list[int] = []

    def scale_from(start: int, factor: float) -> None:
        for index in range(start, len(result)):
            result[index][1] *= factor

    for match in _RE_ATTENTION.finditer(text):
        piece = match.group(0)
        explicit_weight = match.group(1)

        if piece.startswith("\\"):
            result.append([piece[1:], 1.0])
        elif piece == "(":
            open_round.append(len(result))
        elif piece == "[":
            open_square.append(len(result))
        elif explicit_weight is not None and open_round:
            scale_from(open_round.pop(), float(explicit_weight))
        elif piece == ")" and open_round:
            scale_from(open_round.pop(), _ROUND_MULTIPLIER)
        elif piece == "]" and open_square:
            scale_from(open_square.pop(), _SQUARE_MULTIPLIER)
        else:
            for position, part in enumerate(_RE_BREAK.split(piece)):
                if position > 0:
                    result.append(["BREAK", -1])
                result.append([part, 1.0])

    # brackets never closed apply to the end of the prompt, round ones first (in opening order), then square ones
    for start in open_round:
        scale_from(start, _ROUND_MULTIPLIER)
    for start in open_square:
        scale_from(start, _SQUARE_MULTIPLIER)

    if not result:
        result = [["", 1.0]]

    # neighbouring entries with equal weights become one
    index = 0
    while index + 1 < len(result):
        if result[index][1] == result[index + 1][1]:
            result[index][0] += result[index + 1][0]
            del result[index + 1]
        else:
            index += 1

    return result


def a1111_subprompts(prompt: str) -> list[tuple[str, float]]:
    """(text, weight) for each `AND`-separated part of a prompt, as get_multicond_prompt_list splits it."""
    parts = []
    for subprompt in _RE_AND.split(prompt):
        match = _RE_WEIGHT.search(subprompt)
        text, weight = match.groups() if match is not None else (subprompt, 1.0)
        parts.append((text, float(weight) if weight is not None else 1.0))
    return parts


# --- modules/sd_hijack_clip.py ---------------------------------------------------------------------------------


class PromptChunk:
    """One chunk: L + 2 token ids (BOS, L prompt/padding tokens, EOS) and one multiplier per id."""

    def __init__(self):
        self.tokens: list[int] = []
        self.multipliers: list[float] = []


def _chunk_length(tokenizer) -> int:
    return int(tokenizer.model_max_length) - 2


def _special_ids(tokenizer) -> tuple[int | None, int, int]:
    """(comma token, start id, end id) as FrozenCLIPEmbedderWithCustomWords.__init__ takes them."""
    return tokenizer.get_vocab().get(",</w>", None), tokenizer.bos_token_id, tokenizer.eos_token_id


def _tokenize(tokenizer, texts: list[str]) -> list[list[int]]:
    """FrozenCLIPEmbedderWithCustomWords.tokenize."""
    return tokenizer(texts, truncation=False, add_special_tokens=False)["input_ids"]


def a1111_chunks(
    tokenizer, prompt: str, *, emphasis: str = "Original", comma_padding_backtrack: int = 20
) -> tuple[list[PromptChunk], int]:
    """TextConditionalModel.tokenize_line: the prompt's chunks and A1111's token count."""
    _check_emphasis(emphasis)
    chunk_length = _chunk_length(tokenizer)
    comma_token, id_start, id_end = _special_ids(tokenizer)

    if emphasis != "None":
        parsed = parse_prompt_attention(prompt)
    else:
        parsed = [[prompt, 1.0]]

    tokenized = _tokenize(tokenizer, [text for text, _ in parsed])

    chunks: list[PromptChunk] = []
    chunk = PromptChunk()
    token_count = 0
    last_comma = -1

    def close_chunk(is_last: bool = False) -> None:
        # pad with the end token to L, frame with BOS ... EOS, start an empty chunk
        nonlocal chunk, token_count, last_comma
        token_count += len(chunk.tokens) if is_last else chunk_length
        missing = chunk_length - len(chunk.tokens)
        if missing > 0:
            chunk.tokens += [id_end] * missing
            chunk.multipliers += [1.0] * missing
        chunk.tokens = [id_start] + chunk.tokens + [id_end]
        chunk.multipliers = [1.0] + chunk.multipliers + [1.0]
        last_comma = -1
        chunks.append(chunk)
        chunk = PromptChunk()

    for tokens, (text, weight) in zip(tokenized, parsed):
        if text == "BREAK" and weight == -1:
            close_chunk()
            continue

        position = 0
        while position < len(tokens):
            token = tokens[position]

            if token == comma_token:
                last_comma = len(chunk.tokens)
            elif (
                comma_padding_backtrack != 0
                and len(chunk.tokens) == chunk_length
                and last_comma != -1
                and len(chunk.tokens) - last_comma <= comma_padding_backtrack
            ):
                # the chunk is full and a comma is near its end: what follows the comma moves to the next chunk
                cut = last_comma + 1
                moved_tokens = chunk.tokens[cut:]
                moved_multipliers = chunk.multipliers[cut:]
                chunk.tokens = chunk.tokens[:cut]
                chunk.multipliers = chunk.multipliers[:cut]
                close_chunk()
                chunk.tokens = moved_tokens
                chunk.multipliers = moved_multipliers

            if len(chunk.tokens) == chunk_length:
                close_chunk()

            # textual inversion: the embedding database is empty, so the token is always an ordinary one
            chunk.tokens.append(token)
            chunk.multipliers.append(weight)
            position += 1

    if chunk.tokens or not chunks:
        close_chunk(is_last=True)

    return chunks, token_count


def _encode_with_transformers(text_encoder, tokens: torch.Tensor, clip_skip: int) -> torch.Tensor:
    """FrozenCLIPEmbedderWithCustomWords.encode_with_transformers (no attention mask, as A1111)."""
    outputs = text_encoder(input_ids=tokens, output_hidden_states=True)
    if clip_skip > 1:
        z = outputs.hidden_states[-clip_skip]
        z = text_encoder.final_layer_norm(z)
    else:
        z = outputs.last_hidden_state
    return z


def _after_transformers(emphasis: str, z: torch.Tensor, multipliers: torch.Tensor) -> torch.Tensor:
    """modules/sd_emphasis.py: the chosen option's after_transformers."""
    if emphasis == "Original":
        original_mean = z.mean()
        z = z * multipliers.reshape(multipliers.shape + (1,)).expand(z.shape)
        new_mean = z.mean()
        z = z * (original_mean / new_mean)
    elif emphasis == "No norm":
        z = z * multipliers.reshape(multipliers.shape + (1,)).expand(z.shape)
    # "None" and "Ignore": the base class's after_transformers does nothing
    return z


def _process_tokens(
    text_encoder, batch_tokens: list[list[int]], batch_multipliers: list[list[float]], *, clip_skip: int, emphasis: str
) -> torch.Tensor:
    """TextConditionalModel.process_tokens for SD1 (id_pad == id_end, so no re-padding)."""
    device = text_encoder.device
    tokens = torch.asarray(batch_tokens).to(device)
    z = _encode_with_transformers(text_encoder, tokens, clip_skip)
    multipliers = torch.asarray(batch_multipliers).to(device)  # float32 (torch's default dtype), as in A1111
    return _after_transformers(emphasis, z, multipliers)


def _check_emphasis(emphasis: str) -> None:
    # A1111 falls back to "Original" for an unknown name; a reference that is called with a typo should fail
    if emphasis not in EMPHASIS_OPTIONS:
        raise ValueError(f"unknown emphasis {emphasis!r}; A1111 1.10 has {', '.join(EMPHASIS_OPTIONS)}")


def a1111_conditioning(
    tokenizer,
    text_encoder,
    prompt: str,
    *,
    clip_skip: int = 1,
    emphasis: str = "Original",
    comma_padding_backtrack: int = 20,
) -> torch.Tensor:
    """(1, chunks * (L + 2), hidden) as A1111 1.10 conditions SD 1.x, L = the tokenizer's model_max_length - 2."""
    _check_emphasis(emphasis)
    if clip_skip < 1:
        raise ValueError(f"clip_skip must be at least 1, not {clip_skip}")

    # get_multicond_prompt_list: the text A1111 encodes is what re_weight leaves of the prompt
    subprompts = a1111_subprompts(prompt)
    if len(subprompts) != 1 or subprompts[0][1] != 1.0:
        raise ValueError(
            f"{prompt!r} gives A1111 {len(subprompts)} cond(s) with weights "
            f"{[weight for _, weight in subprompts]}: not one conditioning tensor"
        )
    text = subprompts[0][0]

    # TextConditionalModel.forward with texts = [text] (process_texts: one line, so one list of chunks)
    batch_chunks = [
        a1111_chunks(tokenizer, text, emphasis=emphasis, comma_padding_backtrack=comma_padding_backtrack)[0]
    ]
    chunk_count = max(len(chunks) for chunks in batch_chunks)

    zs = []
    with torch.no_grad():
        for index in range(chunk_count):
            batch_chunk = [chunks[index] for chunks in batch_chunks]  # a batch of one: never an empty_chunk
            zs.append(
                _process_tokens(
                    text_encoder,
                    [c.tokens for c in batch_chunk],
                    [c.multipliers for c in batch_chunk],
                    clip_skip=clip_skip,
                    emphasis=emphasis,
                )
            )
        return torch.hstack(zs)
