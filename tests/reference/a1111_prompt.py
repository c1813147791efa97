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
- textual inversion is re-created only when an `EmbeddingDatabase` is passed (without one, the database is
  empty: `find_embedding_at_position` finds nothing and no chunk has fixes). Re-created from
  modules/textual_inversion/textual_inversion.py (`Embedding`, `EmbeddingDatabase.register_embedding_by_name`,
  `load_from_file`, `load_from_dir`, `find_embedding_at_position`, `create_embedding_from_data`), the fixes of
  `tokenize_line`, modules/sd_hijack.py (`EmbeddingsWithFixes`, swapped in for the text encoder's token
  embedding as `StableDiffusionModelHijack.hijack` does) and the "TI hashes" of `TextConditionalModel.forward`
  (modules/processing.py: the negative prompt is encoded first, `setup_conds`). Not re-created: embeddings in
  PNG/WEBP images, `devices.cond_cast_unet` under --upcast-sampling. (The SDXL (clip_l/clip_g) pair on SDXL:
  tests/reference/a1111_sdxl.py, which uses this file's chunks, emphasis, EmbeddingsWithFixes and database.)
  `.pt` / `.bin` files are read with `torch.load(weights_only=True)` allowing ParameterDict (A1111's
  `modules/safe.py` restricts its unpickler to about that; the test files hold only dicts, strings, numbers,
  tensors and one ParameterDict).
- SD2's `id_pad != id_end` re-padding in `process_tokens` (SD1 pads with the end token, so it is a no-op).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import namedtuple

import safetensors.torch
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
    """One chunk: L + 2 token ids (BOS, L prompt/padding tokens, EOS), one multiplier per id, and the fixes
    (textual inversion: an embedding's vectors go at `offset`, counted before BOS is put in front)."""

    def __init__(self):
        self.tokens: list[int] = []
        self.multipliers: list[float] = []
        self.fixes: list[PromptChunkFix] = []


PromptChunkFix = namedtuple("PromptChunkFix", ["offset", "embedding"])


def _chunk_length(tokenizer) -> int:
    return int(tokenizer.model_max_length) - 2


def _special_ids(tokenizer) -> tuple[int | None, int, int]:
    """(comma token, start id, end id) as FrozenCLIPEmbedderWithCustomWords.__init__ takes them."""
    return tokenizer.get_vocab().get(",</w>", None), tokenizer.bos_token_id, tokenizer.eos_token_id


def _tokenize(tokenizer, texts: list[str]) -> list[list[int]]:
    """FrozenCLIPEmbedderWithCustomWords.tokenize."""
    return tokenizer(texts, truncation=False, add_special_tokens=False)["input_ids"]


def a1111_chunks(
    tokenizer, prompt: str, *, emphasis: str = "Original", comma_padding_backtrack: int = 20, embedding_db=None
) -> tuple[list[PromptChunk], int]:
    """TextConditionalModel.tokenize_line: the prompt's chunks and A1111's token count."""
    embedding_db = embedding_db or EmbeddingDatabase(tokenizer)  # an empty database: never finds anything
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

            embedding, embedding_length_in_tokens = embedding_db.find_embedding_at_position(tokens, position)
            if embedding is None:
                chunk.tokens.append(token)
                chunk.multipliers.append(weight)
                position += 1
                continue

            # an embedding that does not fit in what is left of the chunk starts the next one
            emb_len = int(embedding.vectors)
            if len(chunk.tokens) + emb_len > chunk_length:
                close_chunk()

            chunk.fixes.append(PromptChunkFix(len(chunk.tokens), embedding))

            chunk.tokens += [0] * emb_len  # placeholders (token 0), replaced by the vectors in EmbeddingsWithFixes
            chunk.multipliers += [weight] * emb_len
            position += embedding_length_in_tokens

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
    embedding_db: EmbeddingDatabase | None = None,
    extra_generation_params: dict | None = None,
    is_negative_prompt: bool = False,
) -> torch.Tensor:
    """(1, chunks * (L + 2), hidden) as A1111 1.10 conditions SD 1.x, L = the tokenizer's model_max_length - 2.

    `embedding_db`: the textual inversion embeddings A1111 has loaded (none by default); "TI hashes" goes into
    `extra_generation_params` as TextConditionalModel.forward writes it into the hijack's. `is_negative_prompt`:
    the text as `get_learned_conditioning` gets it (no AND split, no trailing weight cut off).
    """
    _check_emphasis(emphasis)
    if clip_skip < 1:
        raise ValueError(f"clip_skip must be at least 1, not {clip_skip}")

    text = prompt
    if not is_negative_prompt:
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
        a1111_chunks(tokenizer, text, emphasis=emphasis, comma_padding_backtrack=comma_padding_backtrack,
                     embedding_db=embedding_db)[0]
    ]
    chunk_count = max(len(chunks) for chunks in batch_chunks)

    hijack = _Hijack()
    used_embeddings = {}
    zs = []
    with torch.no_grad(), _embeddings_with_fixes(text_encoder, hijack):
        for index in range(chunk_count):
            batch_chunk = [chunks[index] for chunks in batch_chunks]  # a batch of one: never an empty_chunk
            hijack.fixes = [c.fixes for c in batch_chunk]
            for fixes in hijack.fixes:
                for _position, embedding in fixes:
                    used_embeddings[embedding.name] = embedding
            zs.append(
                _process_tokens(
                    text_encoder,
                    [c.tokens for c in batch_chunk],
                    [c.multipliers for c in batch_chunk],
                    clip_skip=clip_skip,
                    emphasis=emphasis,
                )
            )
        conditioning = torch.hstack(zs)

    # opts.textual_inversion_add_hashes_to_infotext (True by default)
    if extra_generation_params is not None and used_embeddings:
        hashes = []
        for name, embedding in used_embeddings.items():
            shorthash = embedding.shorthash
            if not shorthash:
                continue
            name = name.replace(":", "").replace(",", "")
            hashes.append(f"{name}: {shorthash}")
        if hashes:
            if extra_generation_params.get("TI hashes"):
                hashes.append(extra_generation_params.get("TI hashes"))
            extra_generation_params["TI hashes"] = ", ".join(hashes)
    return conditioning


def a1111_ti_hashes(tokenizer, text_encoder, prompt: str, negative_prompt: str, embedding_db: EmbeddingDatabase,
                    *, emphasis: str = "Original") -> str:
    """The "TI hashes" of one image: processing.py's setup_conds encodes the negative prompt (uc) first, then the
    prompt (c), into one hijack's extra_generation_params (cleared by clear_comments before). `prompt` is the text
    after the extra-network tags are taken out."""
    extra: dict = {}
    a1111_conditioning(tokenizer, text_encoder, negative_prompt, emphasis=emphasis, embedding_db=embedding_db,
                       extra_generation_params=extra, is_negative_prompt=True)
    a1111_conditioning(tokenizer, text_encoder, prompt, emphasis=emphasis, embedding_db=embedding_db,
                       extra_generation_params=extra)
    return extra.get("TI hashes", "")


# --- modules/sd_hijack.py -------------------------------------------------------------------------------------


class _Hijack:
    """The part of StableDiffusionModelHijack that carries a chunk's fixes to EmbeddingsWithFixes."""

    fixes = None


class EmbeddingsWithFixes(torch.nn.Module):
    """sd_hijack.EmbeddingsWithFixes: the token embeddings, with each fix's vectors written over its placeholders
    (devices.cond_cast_unet is the identity without --upcast-sampling)."""

    def __init__(self, wrapped, embeddings, textual_inversion_key="clip_l"):
        super().__init__()
        self.wrapped = wrapped
        self.embeddings = embeddings
        self.textual_inversion_key = textual_inversion_key

    def forward(self, input_ids):
        batch_fixes = self.embeddings.fixes
        self.embeddings.fixes = None

        inputs_embeds = self.wrapped(input_ids)

        if batch_fixes is None or len(batch_fixes) == 0 or max([len(x) for x in batch_fixes]) == 0:
            return inputs_embeds

        vecs = []
        for fixes, tensor in zip(batch_fixes, inputs_embeds):
            for offset, embedding in fixes:
                vec = embedding.vec[self.textual_inversion_key] if isinstance(embedding.vec, dict) else embedding.vec
                emb = vec
                emb_len = min(tensor.shape[0] - offset - 1, emb.shape[0])
                tensor = torch.cat([tensor[0:offset + 1], emb[0:emb_len], tensor[offset + 1 + emb_len:]]).to(
                    dtype=inputs_embeds.dtype)
            vecs.append(tensor)

        return torch.stack(vecs)


class _embeddings_with_fixes:
    """StableDiffusionModelHijack.hijack / undo_hijack for the token embedding of a transformers CLIPTextModel
    (A1111: `transformer.text_model.embeddings`; transformers 5.x has `embeddings` at the top)."""

    def __init__(self, text_encoder, hijack, textual_inversion_key="clip_l"):
        self.embeddings = getattr(text_encoder, "text_model", text_encoder).embeddings
        self.hijack = hijack
        self.textual_inversion_key = textual_inversion_key  # SDXL's OpenCLIP-G: 'clip_g'

    def __enter__(self):
        self.original = self.embeddings.token_embedding
        self.embeddings.token_embedding = EmbeddingsWithFixes(self.original, self.hijack, self.textual_inversion_key)

    def __exit__(self, *exc):
        self.embeddings.token_embedding = self.original


# --- modules/textual_inversion/textual_inversion.py ---------------------------------------------------------------


class Embedding:
    """textual_inversion.Embedding (the parts that conditioning reads)."""

    def __init__(self, vec, name, step=None):
        self.vec = vec
        self.name = name
        self.step = step
        self.shape = None
        self.vectors = 0
        self.sd_checkpoint = None
        self.sd_checkpoint_name = None
        self.filename = None
        self.hash = None
        self.shorthash = None

    def set_hash(self, v):
        self.hash = v
        self.shorthash = self.hash[0:12]


def calculate_sha256(filename) -> str:
    """modules/hashes.py calculate_sha256 (what hashes.sha256 computes when its cache has nothing)."""
    digest = hashlib.sha256()
    with open(filename, "rb") as file:
        for chunk in iter(lambda: file.read(1024 * 1024), b""):
            digest.update(chunk)
    return digest.hexdigest()


def create_embedding_from_data(data, name, filename="unknown embedding file", filepath=None):
    """textual_inversion.create_embedding_from_data (vectors kept on the CPU, as float32)."""
    if "string_to_param" in data:  # textual inversion embeddings
        param_dict = data["string_to_param"]
        param_dict = getattr(param_dict, "_parameters", param_dict)
        assert len(param_dict) == 1, "embedding file has multiple terms in it"
        emb = next(iter(param_dict.items()))[1]
        vec = emb.detach().to("cpu", dtype=torch.float32)
        shape = vec.shape[-1]
        vectors = vec.shape[0]
    elif type(data) == dict and "clip_g" in data and "clip_l" in data:  # SDXL embedding  # noqa: E721 - A1111's code as written
        vec = {k: v.detach().to("cpu", dtype=torch.float32) for k, v in data.items()}
        shape = data["clip_g"].shape[-1] + data["clip_l"].shape[-1]
        vectors = data["clip_g"].shape[0]
    elif type(data) == dict and type(next(iter(data.values()))) == torch.Tensor:  # diffuser concepts  # noqa: E721 - A1111's code as written
        assert len(data.keys()) == 1, "embedding file has multiple terms in it"
        emb = next(iter(data.values()))
        if len(emb.shape) == 1:
            emb = emb.unsqueeze(0)
        vec = emb.detach().to("cpu", dtype=torch.float32)
        shape = vec.shape[-1]
        vectors = vec.shape[0]
    else:
        raise ValueError(f"Couldn't identify {filename} as neither textual inversion embedding nor diffuser concept.")

    embedding = Embedding(vec, name)
    embedding.step = data.get("step", None)
    embedding.sd_checkpoint = data.get("sd_checkpoint", None)
    embedding.sd_checkpoint_name = data.get("sd_checkpoint_name", None)
    embedding.vectors = vectors
    embedding.shape = shape

    if filepath:
        embedding.filename = filepath
        embedding.set_hash(calculate_sha256(filepath) or "")

    return embedding


class EmbeddingDatabase:
    """textual_inversion.EmbeddingDatabase: embeddings by name, and by the token ids of their names.

    `expected_shape` is the text encoder's width (get_expected_shape: the width of the token embedding of ",").
    """

    def __init__(self, tokenizer, expected_shape: int = -1):
        self.tokenizer = tokenizer
        self.ids_lookup = {}
        self.word_embeddings = {}
        self.skipped_embeddings = {}
        self.errors = {}  # A1111 reports a file it cannot load (errors.report) and goes on
        self.expected_shape = expected_shape

    def register_embedding(self, embedding):
        return self.register_embedding_by_name(embedding, embedding.name)

    def register_embedding_by_name(self, embedding, name):
        ids = _tokenize(self.tokenizer, [name])[0]  # model.cond_stage_model.tokenize([name])[0]
        first_id = ids[0]
        if first_id not in self.ids_lookup:
            self.ids_lookup[first_id] = []
        if name in self.word_embeddings:
            lookup = [x for x in self.ids_lookup[first_id] if x[1].name != name]
        else:
            lookup = self.ids_lookup[first_id]
        if embedding is not None:
            lookup += [(ids, embedding)]
        self.ids_lookup[first_id] = sorted(lookup, key=lambda x: len(x[0]), reverse=True)
        if embedding is None:
            if name in self.word_embeddings:
                del self.word_embeddings[name]
            if len(self.ids_lookup[first_id]) == 0:
                del self.ids_lookup[first_id]
            return None
        self.word_embeddings[name] = embedding
        return embedding

    def load_from_file(self, path, filename):
        name, ext = os.path.splitext(filename)
        ext = ext.upper()
        if ext in [".BIN", ".PT"]:
            # modules/safe.py's RestrictedUnpickler: tensors, plain containers, and torch's ParameterDict
            with torch.serialization.safe_globals([torch.nn.modules.container.ParameterDict]):
                data = torch.load(path, map_location="cpu", weights_only=True)
        elif ext in [".SAFETENSORS"]:
            data = safetensors.torch.load_file(path, device="cpu")
        else:
            return  # (PNG / WEBP / JXL / AVIF embeddings: not re-created)

        if data is not None:
            embedding = create_embedding_from_data(data, name, filename=filename, filepath=path)
            if self.expected_shape == -1 or self.expected_shape == embedding.shape:
                self.register_embedding(embedding)
            else:
                self.skipped_embeddings[name] = embedding

    def load_from_dir(self, path):
        """load_from_dir: every file under `path` (os.walk order, links followed), empty files left out."""
        if not os.path.isdir(path):
            return
        for root, _, fns in os.walk(path, followlinks=True):
            for fn in fns:
                try:
                    fullfn = os.path.join(root, fn)
                    if os.stat(fullfn).st_size == 0:
                        continue
                    self.load_from_file(fullfn, fn)
                except Exception as error:  # noqa: BLE001  A1111 reports any error and goes on
                    self.errors[fn] = error
                    continue

    def find_embedding_at_position(self, tokens, offset):
        token = tokens[offset]
        possible_matches = self.ids_lookup.get(token, None)

        if possible_matches is None:
            return None, None

        for ids, embedding in possible_matches:
            if tokens[offset:offset + len(ids)] == ids:
                return embedding, len(ids)

        return None, None
