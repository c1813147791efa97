"""LoRA tags as A1111 writes them, read without torch: `<lora:NAME:W>`, `<lora:NAME:TE:UNET>`, "Lora hashes".

A1111's `<kind:args>` tags (modules/extra_networks.py, re_extra_net) are taken out of the prompt before
it is read, all kinds alike; the `lora` (and, in 1.10, `lyco`) ones name a LoRA with the text encoder's
weight and the UNet's (extensions-builtin/Lora/extra_networks_lora.py: positional or `te=` / `unet=`,
the UNet's defaulting to the text encoder's). Only the positive prompt is read so (processing.py,
parse_extra_network_prompts); a tag in the negative prompt stays text. lora.py merges them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..spec import FieldError
from . import library

TAG = re.compile(r"<(\w+):([^>]+)>")  # A1111's re_extra_net
KINDS = ("lora", "lyco")  # A1111 1.10 reads <lyco:...> as <lora:...>
MAX_LORAS = 8
MAX_WEIGHT = 10.0


@dataclass(frozen=True)
class LoraUse:
    """One LoRA as a prompt names it: its name and the text encoder's and the UNet's weights."""

    name: str
    te: float = 1.0
    unet: float = 1.0

    def tag(self) -> str:
        weights = f"{_number(self.te)}" if self.te == self.unet else f"{_number(self.te)}:{_number(self.unet)}"
        return f"<lora:{self.name}:{weights}>"


def _number(value: float) -> str:
    return f"{value:g}" if value == round(value, 6) else repr(value)


def extract(prompt: str, field: str = "prompt") -> tuple[str, list[LoraUse]]:
    """A1111's parse_prompt: every <kind:args> tag removed from the text; the LoRA ones returned in order.

    Tags of other kinds (hypernetworks) are removed too, as A1111 removes them, and not applied.
    Raises ValueError naming `field` for a weight that is not a number or out of range.
    """
    by_kind: dict[str, list[LoraUse]] = {}  # A1111 groups the tags by kind, kinds in order of first appearance

    def found(match: re.Match) -> str:
        kind, arguments = match.group(1), match.group(2)
        if kind in KINDS:
            by_kind.setdefault(kind, []).append(_use(arguments.split(":"), field))
        return ""

    text = TAG.sub(found, prompt)
    uses = [use for group in by_kind.values() for use in group]
    if len(uses) > MAX_LORAS:
        raise ValueError(f"{field}: must name at most {MAX_LORAS} LoRAs at once, got {len(uses)}")
    return text, uses


def _use(items: list[str], field: str) -> LoraUse:
    """A1111's ExtraNetworkParams + extra_networks_lora.activate: name, te, unet (unet defaults to te)."""
    positional, named = [], {}
    for item in items:
        parts = item.split("=", 2)
        if len(parts) == 2:
            named[parts[0]] = parts[1]
        else:
            positional.append(item)
    name = positional[0] if positional else ""
    if not name.strip():
        raise ValueError(f"{field}: a <lora:NAME:WEIGHT> tag has no name")
    te = _weight(named.get("te", positional[1] if len(positional) > 1 else "1"), name, field)
    unet = _weight(named.get("unet", positional[2] if len(positional) > 2 else str(te)), name, field)
    return LoraUse(name, te, unet)


def _weight(text: str, name: str, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{field}: LoRA {name[:60]!r}'s weight must be a number, got {text[:40]!r}") from None
    if not math.isfinite(value) or abs(value) > MAX_WEIGHT:
        raise ValueError(f"{field}: LoRA {name[:60]!r}'s weight must be from -{MAX_WEIGHT:g} to {MAX_WEIGHT:g}, "
                         f"got {text[:40]}")
    return value


def salvage(text: str, field: str = "prompt") -> tuple[str, list[str]]:
    """`text` with every LoRA tag that cannot be read taken out, and a note for each: one extension's syntax (loractl's
    scheduled weights) or a tag naming no LoRA costs that tag, not the file's prompt. A tag naming "None" (a
    widget's "no LoRA") goes without a note."""
    notes: list[str] = []

    def readable(match: re.Match) -> str:
        if match.group(1) not in KINDS:
            return match.group(0)
        arguments = match.group(2).split(":")
        if arguments[0].strip().lower() in ("", "none") and len(match.group(0)) < 80 and _no_weights(arguments):
            return ""  # nothing chosen
        try:
            _use(arguments, field)
        except ValueError as error:
            notes.append(_unread(match.group(0), arguments, str(error)))
            return ""
        return match.group(0)

    return TAG.sub(readable, text), notes


def _no_weights(arguments: list[str]) -> bool:
    """A tag with no name and plain numbers (or nothing) after it: a loader's "None" written as a tag."""
    return all(re.fullmatch(r"\s*(\w+=)?-?[\d.]*\s*", item) for item in arguments[1:])


def _unread(tag: str, arguments: list[str], problem: str) -> str:
    """The note for a LoRA tag taken out of a file's prompt: loractl's schedules by name, any other by its problem."""
    shown = tag if len(tag) <= 80 else tag[:79] + "…"
    if any(re.search(r"\d\s*[@~]\s*[\d.]", item) for item in arguments[1:]):
        return (f"{shown}: its weights are scheduled over the steps (weight@step), the syntax of A1111's loractl "
                "extension, which SeedLab does not run: the tag is taken out of the prompt and the LoRA is not "
                "applied, so the image differs")
    return (f"{shown} cannot be read ({problem.split(': ', 1)[-1][:120]}): the tag is taken out of the prompt and the "
            "LoRA is not applied, so the image differs")


def parse_field(text: str) -> list[LoraUse]:
    """The `loras` field: only <lora:...> tags, separated by spaces or commas."""
    rest, uses = extract(text, "loras")
    if rest.replace(",", " ").strip():
        raise ValueError(f"loras must be <lora:NAME:WEIGHT> tags (<lora:NAME:TE:UNET> for two weights), got "
                         f"{rest.strip()[:60]!r} besides them")
    return uses


def parse_hashes(text: str, field: str = "lora_hashes") -> dict[str, str]:
    """A1111's "Lora hashes" (or "TI hashes") value, "name: 0123456789ab, other: ...", as {name: hash}."""
    hashes = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, _, value = item.rpartition(":")
        value = value.strip().lower()
        if not name.strip() or not re.fullmatch(r"[0-9a-f]{8,64}", value):
            raise ValueError(f"{field} must be \"NAME: HASH, ...\" with hex hashes (A1111's), "
                             f"got {item.strip()[:60]!r}")
        hashes[name.strip()] = value
    return hashes


def format_hashes(hashes: dict[str, str]) -> str:
    """{name: hash} as A1111 writes "Lora hashes" (":" and "," taken out of the names)."""
    return ", ".join(f"{name.replace(':', '').replace(',', '')}: {value}" for name, value in hashes.items())


def uses_of(recipe) -> list[LoraUse]:
    """The LoRAs a recipe applies: its `loras` field, then the tags of an A1111-syntax prompt."""
    uses = parse_field(recipe.loras) if recipe.loras else []
    if recipe.prompt_syntax == "a1111" and "<" in recipe.prompt:
        uses += extract(recipe.prompt)[1]
    if len(uses) > MAX_LORAS:
        raise ValueError(f"prompt and loras: at most {MAX_LORAS} LoRAs at once, got {len(uses)}")
    return uses


def _named(recipe) -> tuple[list[LoraUse], dict[str, str]]:
    """The recipe's LoRAs and hashes; none when they are malformed (the recipe's own check names the field)."""
    try:
        return uses_of(recipe), parse_hashes(recipe.lora_hashes) if recipe.lora_hashes else {}
    except ValueError:
        return [], {}


def adapt(recipe) -> tuple[object, list[str]]:
    """A recipe from another tool with the LoRAs this machine lacks left out, and a note for each; a LoRA
    found by name whose hash differs from the recipe's is noted (it is used)."""
    uses, hashes = _named(recipe)
    notes, missing = [], set()
    for use in uses:
        wanted = hashes.get(use.name, "")
        try:
            found = library.find("lora", use.name, wanted)
        except library.NotFound as error:
            missing.add(use.name)
            notes.append(f"{error}: it is left out, so the image differs")
            continue
        if wanted and not (found.hash.startswith(wanted) or wanted.startswith(found.hash)):
            notes.append(f"LoRA {use.name}'s file here has hash {found.hash}, the image was made with {wanted}: "
                         "another version of it, so the image may differ")
    if not missing:
        return recipe, notes

    def keep(match: re.Match) -> str:
        arguments = match.group(2).split(":")
        return "" if match.group(1) in KINDS and arguments[0] in missing else match.group(0)

    changes = {"loras": TAG.sub(keep, recipe.loras).strip(" ,")}
    if recipe.prompt_syntax == "a1111":
        changes["prompt"] = TAG.sub(keep, recipe.prompt)
    kept = {name: value for name, value in hashes.items() if name not in missing}
    changes["lora_hashes"] = format_hashes(kept)
    return recipe.replace(**changes), notes


def missing(recipe) -> list:
    """A FieldError for each LoRA of the recipe that the models folder lacks (a link, an API call: refused)."""
    errors = []
    uses, hashes = _named(recipe)
    for use in uses:
        try:
            library.find("lora", use.name, hashes.get(use.name, ""))
        except library.NotFound as error:
            in_field = recipe.loras and use in parse_field(recipe.loras)
            errors.append(FieldError("loras" if in_field else "prompt", str(error)))
    return errors
