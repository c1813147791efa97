"""Links: a whole recipe, its pixel fingerprint and a compact environment in a URL's query string.

A link is stateless, so it survives server restarts and works on any instance that has the model:

    http://127.0.0.1:7860/?v=1&prompt=a+red+circle&seed=2&sampler=EulerDiscreteScheduler
        &fp=<64 hex digits>&env=0.1.0~0.42.1~2.13.0%2Bcpu~cpu:+x86_64~float32~2~000001

Keys are short and readable; a value equal to its v1 default (V1_DEFAULTS) is left out. `fp` is
the full sha256 of the RGB pixels (64 hex digits, never shortened). `env` is
seedlab~diffusers~torch~device~dtype~threads~switches, where switches are six 0/1 digits in the
order of `determinism.Switches` fields (CUBLAS_WORKSPACE_CONFIG is left out: it is set at start-up). Links are untrusted input: every key is checked (unknown,
missing and repeated keys are errors naming the key) and the recipe validates itself. The model
name is returned as written: the caller checks it against the models it allows (ModelStore.check).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any
from urllib.parse import quote_plus, unquote_plus

from .determinism import Environment, Switches
from .recipe import DTYPES, Recipe

VERSIONS = (1,)  # link formats this server reads
MAX_QUERY_CHARS = 40_000  # two 2000-character prompts of 4-byte characters, percent-encoded, fit

# Link key -> recipe field, in the order a link is written (fp and env follow).
KEYS = {
    "prompt": "prompt",
    "neg": "negative_prompt",
    "seed": "seed",
    "steps": "num_inference_steps",
    "cfg": "guidance_scale",
    "sampler": "scheduler",
    "w": "width",
    "h": "height",
    "model": "model",
    "rng": "rng",
    "det": "deterministic",
    "dtype": "dtype",
}
# Frozen with format version 1 (not read from Recipe, whose defaults may change): omitted keys mean these.
V1_DEFAULTS: dict[str, Any] = {
    "negative_prompt": "",
    "seed": 0,
    "num_inference_steps": 20,
    "guidance_scale": 7.5,
    "scheduler": "default",
    "width": 64,
    "height": 64,
    "model": "embedded",
    "rng": "cpu",
    "deterministic": False,
    "dtype": "float32",
}
REQUIRED = ("v", "prompt", "fp")
ENV_PARTS = ("seedlab", "diffusers", "torch", "device", "dtype", "threads", "switches")
SWITCHES = tuple(field.name for field in dataclasses.fields(Switches))
_SAFE = ":,~/"  # left readable in values: all are allowed in a query string
_INT = re.compile(r"^[0-9]{1,20}$")
_FLOAT = re.compile(r"^-?[0-9]{1,20}(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?$")
_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")
_VERSION = re.compile(r"^[A-Za-z0-9.+_-]{1,40}$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # a scheme at the start: http://, https://


def encode_link(recipe: Recipe, fingerprint: str, environment: Environment | None, base_url: str) -> str:
    """The link to an image: `base_url` followed by the recipe, fingerprint and environment as a query."""
    check_fingerprint("fp", fingerprint)
    values = recipe.to_dict()
    pairs = [("v", "1"), ("prompt", recipe.prompt)]
    for key, field in KEYS.items():
        if field != "prompt" and values[field] != V1_DEFAULTS[field]:
            pairs.append((key, _format(values[field])))
    pairs.append(("fp", fingerprint))
    if environment is not None:
        pairs.append(("env", encode_environment(environment)))
    return base_url.split("?")[0].split("#")[0] + "?" + encode_query(pairs)


def encode_query(pairs: list[tuple[str, str]]) -> str:
    """A query string that keeps `:`, `,`, `~` and `/` readable (all are allowed in a query)."""
    try:
        return "&".join(f"{quote_plus(key, safe=_SAFE)}={quote_plus(value, safe=_SAFE)}" for key, value in pairs)
    except UnicodeEncodeError as error:  # a lone surrogate: valid in a Python str, not in UTF-8
        raise ValueError(f"the recipe's text cannot be written in a link: {error.reason}") from None


def decode_link(url_or_query: str) -> tuple[Recipe, str, dict[str, Any] | None]:
    """Read a link (a URL, "?v=1&..." or "v=1&..."): (recipe, fingerprint, compact environment or None).

    The environment is a flat dict with the keys of `Environment.differences` that a link carries.
    Raises ValueError naming the key for anything wrong.
    """
    params = parse_query(url_or_query)
    readable = ", ".join(str(v) for v in VERSIONS)
    if "v" not in params:
        raise ValueError(f"link: v is missing (the link format version; this server reads v={readable})")
    if params["v"] not in {str(v) for v in VERSIONS}:
        raise ValueError(f"link: v={params['v'][:20]} is a link format this server does not read; "
                         f"it reads v={readable}")
    unknown = sorted(set(params) - set(KEYS) - {"v", "fp", "env"})
    if unknown:
        raise ValueError(f"link: unknown key {unknown[0][:40]!r}; known keys: v, {', '.join(KEYS)}, fp, env")
    for key in REQUIRED:
        if key not in params:
            raise ValueError(f"link: {key} is missing; a link needs {', '.join(REQUIRED)}")

    fields = dict(V1_DEFAULTS)
    for key, field in KEYS.items():
        if key in params:
            fields[field] = _parse(key, field, params[key])
    try:
        recipe = Recipe(**fields)
    except ValueError as error:  # "num_inference_steps must be ..." -> "link: steps (num_inference_steps) must be ..."
        raise ValueError(f"link: {_name_key(str(error))}") from None
    fingerprint = check_fingerprint("link: fp", params["fp"].lower())
    environment = decode_environment(params["env"]) if "env" in params else None
    return recipe, fingerprint, environment


def parse_query(url_or_query: str) -> dict[str, str]:
    """The decoded key/value pairs of a link's query string; a repeated or malformed key is an error."""
    if not isinstance(url_or_query, str):
        raise ValueError(f"link must be text, got {type(url_or_query).__name__}")
    text = url_or_query.strip().split("#", 1)[0]  # a raw # starts the fragment; one in a value is %23
    if "?" in text:  # a URL with a query (a link's own values never hold a raw ?: it is written %3F)
        text = text.split("?", 1)[1]
    elif _URL.match(text) or "=" not in text:  # a URL without a query; "://" inside a value is no URL
        text = ""
    if not text:
        raise ValueError("link: there is no query string (the part after ?) to read a recipe from")
    if len(text) > MAX_QUERY_CHARS:
        raise ValueError(f"link: the query string must be at most {MAX_QUERY_CHARS} characters, got {len(text)}")
    params: dict[str, str] = {}
    for part in text.split("&"):
        if not part:
            continue
        if "=" not in part:
            raise ValueError(f"link: {unquote_plus(part)[:40]!r} has no value (write key=value)")
        raw_key, raw_value = part.split("=", 1)
        key = unquote_plus(raw_key)
        try:
            value = unquote_plus(raw_value, errors="strict")
        except UnicodeDecodeError:
            raise ValueError(f"link: {key[:40]} is not valid UTF-8 once decoded") from None
        if key in params:
            raise ValueError(f"link: {key[:40]} appears more than once")
        params[key] = value
    return params


def check_fingerprint(key: str, value: Any) -> str:
    """A pixel fingerprint: 64 lowercase hex digits (sha256 of the RGB pixels)."""
    if not isinstance(value, str) or not _FINGERPRINT.match(value):
        raise ValueError(f"{key} must be 64 hex digits (a sha256 of the RGB pixels), got {str(value)[:80]!r}")
    return value


def encode_environment(environment: Environment) -> str:
    """seedlab~diffusers~torch~device~dtype~threads~switches (device text with ~ replaced, it is the separator)."""
    switches = "".join("1" if getattr(environment.switches, name) else "0" for name in SWITCHES)
    parts = [environment.seedlab, environment.diffusers, environment.torch, environment.device.replace("~", "-"),
             environment.dtype, str(environment.threads), switches]
    return "~".join(parts)


def decode_environment(text: str) -> dict[str, Any]:
    """The inverse of encode_environment, as a flat dict keyed like `Environment.differences`."""
    parts = text.split("~")
    if len(parts) != len(ENV_PARTS):
        raise ValueError(f"link: env must have {len(ENV_PARTS)} parts separated by ~ ({'~'.join(ENV_PARTS)}), "
                         f"got {len(parts)}")
    values = dict(zip(ENV_PARTS, parts))
    for name in ("seedlab", "diffusers", "torch"):
        if not _VERSION.match(values[name]):
            raise ValueError(f"link: env {name} must be a version such as 2.13.0, got {values[name][:60]!r}")
    if not values["device"] or len(values["device"]) > 100 or not values["device"].isprintable():
        raise ValueError(f"link: env device must be a name of 1 to 100 printable characters, "
                         f"got {values['device'][:60]!r}")
    if values["dtype"] not in DTYPES:
        raise ValueError(f"link: env dtype must be one of {', '.join(DTYPES)}, got {values['dtype'][:40]!r}")
    if not _INT.match(values["threads"]) or not 1 <= int(values["threads"]) <= 4096:
        raise ValueError(f"link: env threads must be an integer from 1 to 4096, got {values['threads'][:40]!r}")
    switches = values.pop("switches")
    if not re.fullmatch(f"[01]{{{len(SWITCHES)}}}", switches):
        raise ValueError(f"link: env switches must be {len(SWITCHES)} digits 0 or 1 ({', '.join(SWITCHES)}), "
                         f"got {switches[:40]!r}")
    values["threads"] = int(values["threads"])
    values.update({name: digit == "1" for name, digit in zip(SWITCHES, switches)})
    return values


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value).removesuffix(".0")  # the shortest text that reads back as the same float
    return str(value)


def _parse(key: str, field: str, text: str) -> Any:
    """A link value as the recipe field's type; the range is checked by the Recipe."""
    default = V1_DEFAULTS.get(field, "")
    if isinstance(default, bool):
        if text not in ("0", "1"):
            raise ValueError(f"link: {key} ({field}) must be 0 or 1, got {text[:40]!r}")
        return text == "1"
    if isinstance(default, int):
        if not _INT.match(text):
            raise ValueError(f"link: {key} ({field}) must be a whole number, got {text[:40]!r}")
        return int(text)
    if isinstance(default, float):
        if not _FLOAT.match(text):
            raise ValueError(f"link: {key} ({field}) must be a number such as 7.5, got {text[:40]!r}")
        return float(text)
    return text


def _name_key(message: str) -> str:
    """Put the link key in front of a recipe message that starts with the field name."""
    for key, field in KEYS.items():
        if message.startswith(field + " "):
            return f"{key} ({field})" + message[len(field):] if key != field else message
    return message
