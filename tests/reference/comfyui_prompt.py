"""ComfyUI's reading of an SD 1.x / 2.x prompt (CLIPTextEncode), re-created step by step for SeedLab's tests.

Read from ComfyUI's sources (written here independently, and independently of seedlab/engine/prompts/comfyui.py):
- Comfy-Org/ComfyUI 4bd7a4004ab8bf0e516222036dc97733ddf3aa74, comfy/sd1_clip.py: parse_parentheses, token_weights,
  escape_important / unescape_important, load_embed, SDTokenizer._try_get_embedding and tokenize_with_weights,
  SDClipModel.set_clip_options / reset_clip_options / process_tokens / forward, gen_empty_tokens and
  ClipTokenWeightEncoder.encode_token_weights;
- Comfy-Org/ComfyUI 033046cc4fac82d954c6daedccf1c8128433c4f1, comfy/sd.py: CLIP.clip_layer, tokenize,
  encode_from_tokens(_scheduled) (reset the clip options, then set {"layer": layer_idx} when CLIPSetLastLayer set it);
- comfy/text_encoders/sd2_clip.py (SD2ClipHModel: layer "penultimate" means "hidden" at -2, special tokens
  start 49406, end 49407, pad 0; SD2ClipHTokenizer: pad_with_end=False), comfy/clip_model.py (CLIPEncoder keeps the
  output of layer len(layers) + idx; CLIPTextModel_ puts the intermediate through final_layer_norm when asked),
  nodes.py (CLIPTextEncode: clip.tokenize then encode_from_tokens_scheduled; CLIPSetLastLayer: clip.clip_layer(n)).

ComfyUI's own CLIP transformer is replaced by the transformers CLIPTextModel under test: process_tokens' token
embeddings (integer tokens embedded, embedding vectors inserted at their places) are handed to it through a hook
on its token embedding, and ComfyUI's intermediate output of layer i is its hidden_states[i + 1].
"""

from __future__ import annotations

import os
import re

import torch
from safetensors.torch import load_file

IDENTIFIER = "embedding:"


def parse_parentheses(string: str) -> list[str]:
    """Top-level pieces: plain text and whole "(...)" groups; a ")" with nothing open sends the level below 0."""
    pieces, current, level = [], "", 0
    for char in string:
        if char == "(":
            if level == 0:
                if current:
                    pieces.append(current)
                current = "("
            else:
                current += char
            level += 1
        elif char == ")":
            level -= 1
            if level == 0:
                pieces.append(current + ")")
                current = ""
            else:
                current += char
        else:
            current += char
    if current:
        pieces.append(current)
    return pieces


def token_weights(string: str, current: float) -> list[tuple[str, float]]:
    """(text, weight) pieces: a group multiplies by 1.1, or takes the number after its last ":" as its weight."""
    out = []
    for piece in parse_parentheses(string):
        if len(piece) >= 2 and piece[0] == "(" and piece[-1] == ")":
            inner = piece[1:-1]
            colon = inner.rfind(":")
            weight = current * 1.1
            if colon > 0:
                try:
                    weight = float(inner[colon + 1:])
                    inner = inner[:colon]
                except ValueError:
                    pass
            out += token_weights(inner, weight)
        else:
            out.append((piece, current))
    return out


def escape_important(text: str) -> str:
    return text.replace("\\)", "\0\1").replace("\\(", "\0\2")


def unescape_important(text: str) -> str:
    return text.replace("\0\1", ")").replace("\0\2", "(")


def load_embed(name: str, directories: list[str], size: int, key: str | None):
    """load_embed: the file `name` (or name + .safetensors / .pt / .bin) in any folder under the embedding folders,
    not outside them; its vectors: string_to_param's, the model's key's, else the first value. None if none."""
    folders = set()
    for directory in directories:
        folders.add(directory)
        for root, _, _ in os.walk(directory, followlinks=True):
            folders.add(root)
    found = None
    for folder in sorted(folders):  # ComfyUI iterates a set; the tests never rely on its order
        path = os.path.abspath(os.path.join(folder, name))
        folder = os.path.abspath(folder)
        if os.path.commonpath((folder, path)) != folder:
            continue
        if os.path.isfile(path):
            found = path
        else:
            found = next((path + ext for ext in (".safetensors", ".pt", ".bin") if os.path.isfile(path + ext)), None)
        if found is not None:
            break
    if found is None:
        return None
    data = load_file(found, device="cpu") if found.lower().endswith(".safetensors") else \
        torch.load(found, weights_only=True, map_location="cpu")
    if "string_to_param" in data:
        return next(iter(data["string_to_param"].values()))
    if key is not None and key in data:
        return data[key]
    return next(iter(data.values()))


class SDTokenizer:
    """SDTokenizer over a transformers CLIPTokenizer: max_length 77 in ComfyUI (the tokenizer's own length here)."""

    def __init__(self, tokenizer, pad_with_end: bool = True, embedding_directory: str | None = None,
                 embedding_size: int = 768, embedding_key: str = "clip_l"):
        self.tokenizer = tokenizer
        self.max_length = tokenizer.model_max_length
        empty = tokenizer("")["input_ids"]
        self.start_token, self.end_token = empty[0], empty[1]
        self.pad_token = self.end_token if pad_with_end else 0
        self.embedding_directory = embedding_directory
        self.embedding_size, self.embedding_key = embedding_size, embedding_key
        self.max_word_length = 8

    def _try_get_embedding(self, embedding_name: str):
        words = embedding_name.split()
        name, leftover = words[0], " ".join(words[1:])
        cut = re.search(r"[<\[]", name)
        if cut is not None:
            leftover = name[cut.start():] + (" " + leftover if leftover else "")
            name = name[:cut.start()]
        embed = load_embed(name, [self.embedding_directory], self.embedding_size, self.embedding_key)
        if embed is None:
            stripped = name.strip(",")
            if len(stripped) < len(name):
                embed = load_embed(stripped, [self.embedding_directory], self.embedding_size, self.embedding_key)
                return embed, name, f"{name[len(stripped):]} {leftover}"
        return embed, name, leftover

    def tokenize_with_weights(self, text: str) -> list[list[tuple]]:
        groups = []
        for segment, weight in token_weights(escape_important(text), 1.0):
            segment = unescape_important(segment)
            split = re.split(rf"(?<=\s){re.escape(IDENTIFIER)}", segment)
            words = [split[0]] + [IDENTIFIER + rest for rest in split[1:]]
            for word in [word for word in words if word != ""]:
                if word.startswith(IDENTIFIER) and self.embedding_directory is not None:
                    embed, _, leftover = self._try_get_embedding(word[len(IDENTIFIER):].strip("\n"))
                    if embed is not None:
                        rows = [embed] if embed.dim() == 1 else [embed[i] for i in range(embed.shape[0])]
                        groups.append([(row, weight) for row in rows])
                    if leftover == "":
                        continue
                    word = leftover
                groups.append([(token, weight) for token in self.tokenizer(word)["input_ids"][1:-1]])

        batches, batch = [], [(self.start_token, 1.0)]
        batches.append(batch)
        for group in groups:
            large = len(group) >= self.max_word_length
            while group:
                if len(group) + len(batch) > self.max_length - 1:
                    room = self.max_length - len(batch) - 1
                    if large:  # a long piece is cut where the batch ends
                        batch.extend(group[:room])
                        batch.append((self.end_token, 1.0))
                        group = group[room:]
                    else:  # a short one moves whole to the next batch
                        batch.append((self.end_token, 1.0))
                        batch.extend([(self.pad_token, 1.0)] * room)
                    batch = [(self.start_token, 1.0)]
                    batches.append(batch)
                else:
                    batch.extend(group)
                    group = []
        batch.append((self.end_token, 1.0))
        if len(batch) < self.max_length:
            batch.extend([(self.pad_token, 1.0)] * (self.max_length - len(batch)))
        return batches


class SDClipModel:
    """SDClipModel + ClipTokenWeightEncoder around the transformers text encoder (SD 1.x: layer "last";
    SD 2.x: "hidden" at -2). `num_layers` is ComfyUI's count of the encoder's layers."""

    def __init__(self, text_encoder, special_tokens: dict, layer: str = "last", layer_idx: int | None = None,
                 layer_norm_hidden_state: bool = True):
        self.encoder = text_encoder
        self.num_layers = text_encoder.config.num_hidden_layers
        self.special_tokens = special_tokens
        self.layer, self.layer_idx = layer, None
        self.layer_norm_hidden_state = layer_norm_hidden_state
        if layer == "hidden":
            self.set_clip_options({"layer": layer_idx})
        self.options_default = (self.layer, self.layer_idx)

    def set_clip_options(self, options: dict) -> None:
        layer_idx = options.get("layer", self.layer_idx)
        if layer_idx is None or abs(layer_idx) > self.num_layers:
            self.layer = "last"
        else:
            self.layer, self.layer_idx = "hidden", layer_idx

    def reset_clip_options(self) -> None:
        self.layer, self.layer_idx = self.options_default

    def process_tokens(self, tokens: list[list]) -> torch.Tensor:
        embedding = _token_embedding(self.encoder)
        rows = []
        for row in tokens:
            integers = [token for token in row if isinstance(token, int)]
            others = [(index, token) for index, token in enumerate(row) if not isinstance(token, int)]
            embedded = embedding(torch.tensor([integers])).to(torch.float32)
            shift = 0
            for index, vector in others:
                place = shift + index
                vector = vector.view(1, -1, vector.shape[-1]).to(torch.float32)
                embedded = torch.cat([embedded[:, :place], vector, embedded[:, place:]], dim=1)
                shift += vector.shape[1] - 1
            rows.append(embedded)
        return torch.cat(rows)

    def forward(self, tokens: list[list]) -> torch.Tensor:
        embeds = self.process_tokens(tokens)
        ids = torch.tensor([[token if isinstance(token, int) else 0 for token in row] for row in tokens])
        handle = _token_embedding(self.encoder).register_forward_hook(lambda module, args, out: embeds.to(out.dtype))
        try:
            output = self.encoder(input_ids=ids, output_hidden_states=self.layer == "hidden")
        finally:
            handle.remove()
        if self.layer == "last":
            return output.last_hidden_state.float()
        index = self.layer_idx if self.layer_idx >= 0 else self.num_layers + self.layer_idx
        hidden = output.hidden_states[index + 1]
        if self.layer_norm_hidden_state:
            hidden = self.encoder.final_layer_norm(hidden)
        return hidden.float()

    def encode_token_weights(self, pairs: list[list[tuple]]) -> torch.Tensor:
        to_encode = [[token for token, _ in row] for row in pairs]
        longest = max(len(row) for row in to_encode)
        has_weights = any(weight != 1.0 for row in pairs for _, weight in row)
        sections = len(to_encode)
        if has_weights:
            start, end, pad = self.special_tokens["start"], self.special_tokens["end"], self.special_tokens["pad"]
            to_encode.append([start, end] + [pad] * (longest - 2))
        out = self.forward(to_encode)
        output = []
        for k in range(sections):
            z = out[k:k + 1]
            if has_weights:
                z_empty = out[-1]
                for i in range(len(z)):
                    for j in range(len(z[i])):
                        weight = pairs[k][j][1]
                        if weight != 1.0:
                            z[i][j] = (z[i][j] - z_empty[j]) * weight + z_empty[j]
            output.append(z)
        return torch.cat(output, dim=-2)


def _token_embedding(text_encoder):
    return getattr(text_encoder, "text_model", text_encoder).embeddings.token_embedding


def comfyui_conditioning(tokenizer, text_encoder, text: str, *, stop_at_clip_layer: int | None = None,
                         sd2: bool = False, embedding_directory: str | None = None) -> torch.Tensor:
    """CLIPTextEncode's conditioning of `text`, with CLIPSetLastLayer(stop_at_clip_layer) on the clip when given.

    sd2: ComfyUI's SD 2.x text encoder (pad 0, penultimate layer by default); `text_encoder` is then its whole
    OpenCLIP transformer (every layer, as ComfyUI loads it).
    """
    width = text_encoder.config.hidden_size
    if sd2:
        tokens = SDTokenizer(tokenizer, pad_with_end=False, embedding_directory=embedding_directory,
                             embedding_size=width, embedding_key="clip_h")
        special = {"start": tokens.start_token, "end": tokens.end_token, "pad": 0}
        model = SDClipModel(text_encoder, special, layer="hidden", layer_idx=-2)
    else:
        tokens = SDTokenizer(tokenizer, embedding_directory=embedding_directory, embedding_size=width)
        special = {"start": tokens.start_token, "end": tokens.end_token, "pad": tokens.end_token}
        model = SDClipModel(text_encoder, special)
    pairs = tokens.tokenize_with_weights(text)
    model.reset_clip_options()  # CLIP.encode_from_tokens
    if stop_at_clip_layer is not None:
        model.set_clip_options({"layer": stop_at_clip_layer})
    with torch.no_grad():
        return model.encode_token_weights(pairs)
