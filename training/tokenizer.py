"""Write a CLIP tokenizer (vocab.json + merges.txt) without downloading one.

The vocabulary is the 256 byte-level characters, each also with the end-of-word marker `</w>`,
the two special tokens, and, optionally, whole words: for each word we add the BPE merges that
build it left to right, so a known word becomes a single token and anything else still
tokenizes, character by character.
"""

import json
from pathlib import Path

from transformers import CLIPTokenizer


def _byte_characters() -> list[str]:
    """The 256 printable stand-ins GPT-2/CLIP byte-level BPE uses for the bytes 0..255."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    codes, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return [chr(c) for c in codes]


def write_clip_tokenizer(folder: str | Path, words: list[str] = (), max_length: int = 77) -> CLIPTokenizer:
    """Write vocab.json, merges.txt and the tokenizer config into `folder`; return the loaded tokenizer."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    chars = _byte_characters()
    vocab: dict[str, int] = {}
    for token in chars + [c + "</w>" for c in chars]:
        vocab.setdefault(token, len(vocab))
    merges: list[str] = []
    for word in sorted(set(words)):
        # Merge left to right: ((("r" "e") "d</w>")) gives the token "red</w>".
        pieces = list(word[:-1]) + [word[-1] + "</w>"]
        current = pieces[0]
        for piece in pieces[1:]:
            merge = f"{current} {piece}"
            if merge not in merges:
                merges.append(merge)
            current += piece
            vocab.setdefault(current, len(vocab))
    for special in ("<|startoftext|>", "<|endoftext|>"):
        vocab.setdefault(special, len(vocab))
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=max_length)
    tokenizer.save_pretrained(folder)
    return CLIPTokenizer.from_pretrained(folder)
