"""Links: a whole recipe, its pixel fingerprint and a compact environment in a URL's query string.

A link is stateless, so it survives server restarts and works on any instance that has the model:

    http://127.0.0.1:7860/?v=1&prompt=a+red+circle&seed=2&sampler=EulerDiscreteScheduler
        &fp=<64 hex digits>&env=0.1.0~0.42.1~2.13.0%2Bcpu~cpu:+x86_64~float32~2~000001

Keys are short and readable, one per recipe field (its Spec's `link`); a value equal to the field's
default is left out. `fp` is the full sha256 of the RGB pixels (64 hex digits, never shortened).
`env` is seedlab~diffusers~torch~device~dtype~threads~switches[~cpu_isa~cpu_vendor], where switches
are six 0/1 digits in the order of `environment.Switches` fields (CUBLAS_WORKSPACE_CONFIG is left out:
it is set at start-up) and the CPU parts (`avx2~AMD`, see cpu.py) are there when the image was made on a
CPU by a SeedLab that records them; older links have seven parts and still open. Links are untrusted input: every
key is checked (unknown, missing and repeated keys are errors naming the key) and the recipe validates itself. The
model name is returned as written: the caller checks it against the models it allows (ModelStore.check).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any
from urllib.parse import quote_plus, unquote_plus

from ..engine import cpu
from ..engine.environment import SWITCH_NAMES, Environment, Switches
from ..engine.recipe import DTYPES, SPECS, FieldError, Recipe, RecipeError
from ..engine.samplers.names import A1111_SAMPLERS, is_ksampler, nearest

VERSIONS = (1,)  # link formats this server reads
MAX_QUERY_CHARS = 40_000  # two 2000-character prompts of 4-byte characters, percent-encoded, fit

# Link key -> recipe field, in the order a link is written (fp and env follow): from the field definitions.
KEYS = {spec.link: name for name, spec in SPECS.items()}
# An omitted key means the field's default (a Spec's default never changes: tests/test_links.py guards the v1 ones).
DEFAULTS: dict[str, Any] = {field.name: field.default for field in dataclasses.fields(Recipe)
                            if field.default is not dataclasses.MISSING}
REQUIRED = ("v", "prompt", "fp")
ENV_PARTS = ("seedlab", "diffusers", "torch", "device", "dtype", "threads", "switches")
CPU_PARTS = ("cpu_isa", "cpu_vendor")  # optional, after the others
SWITCHES = SWITCH_NAMES
_SAFE = ":,~/"  # left readable in values: all are allowed in a query string
_INT = re.compile(r"^[0-9]{1,20}$")
_FLOAT = re.compile(r"^-?[0-9]{1,20}(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?$")
_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")
_VERSION = re.compile(r"^[A-Za-z0-9.+_-]{1,40}$")
DEFAULT_BASE_URL = "http://127.0.0.1:7860/"  # where links point when nothing says (the app's own address)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # a scheme at the start: http://, https://


def result_record(recipe: Recipe, fingerprint: str, environment: Environment | None, base_url: str) -> dict[str, Any]:
    """One image as every JSON output lists it (the API, the CLI, plots): the seed as text, exact in any reader."""
    return {
        "seed": str(recipe.seed),
        "prompt": recipe.prompt,
        "fingerprint": fingerprint,
        "link": encode_link(recipe, fingerprint, environment, base_url),
        "recipe": recipe.to_json(),
        "environment": None if environment is None else environment.to_dict(),
    }


def encode_link(recipe: Recipe, fingerprint: str, environment: Environment | None, base_url: str) -> str:
    """The link to an image: `base_url` followed by the recipe, fingerprint and environment as a query."""
    check_fingerprint("fp", fingerprint)
    values = recipe.to_dict()
    pairs = [("v", "1"), ("prompt", recipe.prompt)]
    for key, field in KEYS.items():
        if field != "prompt" and values[field] != DEFAULTS[field]:
            pairs.append((key, SPECS[field].to_text(values[field])))
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


def decode_link(url_or_query: str) -> tuple[Recipe, str, Environment | None]:
    """Read a link (a URL, "?v=1&..." or "v=1&..."): (recipe, fingerprint, environment or None).

    Raises ValueError naming every bad key at once: unknown and missing keys, values that do not read and
    values out of range, so one pass over the link fixes it (not a missing key, then the types, then the ranges).
    Only a link that cannot be read as key=value pairs at all, or one of a format this server does not
    read, is refused on that alone.
    """
    return _decode(parse_query(url_or_query), REQUIRED)


def is_recipe_link(url_or_query: str) -> bool:
    """A link written by hand (`?prompt=a+blue+square&seed=7`): a recipe with no pixel fingerprint to compare with.
    False for a link with `fp`, and for text that is no query at all (decode_link names what is wrong)."""
    try:
        return "fp" not in parse_query(url_or_query)
    except ValueError:
        return False


def decode_recipe_link(url_or_query: str) -> Recipe:
    """A link's recipe without a fingerprint (`v` optional): keys as decode_link reads them, every bad key at once."""
    return _decode(parse_query(url_or_query), ("prompt",))[0]


def _decode(params: dict[str, str], required: tuple[str, ...]) -> tuple[Recipe, str, Environment | None]:
    """A link's pairs as (recipe, fingerprint or "", environment or None); ValueError naming every bad key."""
    readable = ", ".join(str(v) for v in VERSIONS)
    if "v" in params and params["v"] not in {str(v) for v in VERSIONS}:
        raise ValueError(f"link: v={params['v'][:20]} is a link format this server does not read; "
                         f"it reads v={readable}")
    problems = [] if "v" in params or "v" not in required else [
        f"v is missing (the link format version; this server reads v={readable})"]
    unknown = sorted(set(params) - set(KEYS) - {"v", "fp", "env"})
    if unknown:
        named = ", ".join(repr(key[:40]) for key in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5
                                                                    else "")
        problems.append(f"unknown key{'s' if len(unknown) > 1 else ''} {named}; known keys: v, {', '.join(KEYS)}, "
                        "fp, env")
    missing = [key for key in required if key not in params and key != "v"]
    if missing:
        problems.append(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing; a link needs "
                        f"{', '.join(required)}")
    recipe, errors = _recipe(params)
    if errors:
        problems.append(RecipeError(errors).named(key_name))
    fingerprint, environment = "", None
    try:
        fingerprint = check_fingerprint("fp", params["fp"].lower()) if "fp" in params else ""
    except ValueError as error:
        problems.append(str(error))
    try:
        environment = decode_environment(params["env"]) if "env" in params else None
    except ValueError as error:
        problems.append(str(error).removeprefix("link: "))
    if problems:
        raise ValueError("link: " + "; ".join(problems))
    return recipe, fingerprint, environment


def _recipe(params: dict[str, str]) -> tuple[Recipe | None, list[FieldError]]:
    """The recipe a link's keys give (omitted keys at their defaults), and every value that does not read or is out
    of range (one that did not read is checked at its default, never said twice)."""
    fields, errors = dict(DEFAULTS), []
    for key, field in KEYS.items():
        if key in params:
            try:
                fields[field] = _parse(field, params[key])
                if field == "scheduler":
                    _check_sampler_name(fields[field])
            except FieldError as error:
                errors.append(error)
    try:
        return Recipe(**{"prompt": "", **fields}), errors
    except RecipeError as error:
        return None, errors + [found for found in error.errors if found.field not in {e.field for e in errors}]


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
    if environment.cpu_isa is not None:
        parts += [environment.cpu_isa, (environment.cpu_vendor or "").replace("~", "-")]
    return "~".join(parts)


def decode_environment(text: str) -> Environment:
    """The inverse of encode_environment; cublas_workspace_config is not in a link (None)."""
    parts = text.split("~")
    if len(parts) not in (len(ENV_PARTS), len(ENV_PARTS) + len(CPU_PARTS)):
        raise ValueError(f"link: env must have {len(ENV_PARTS)} or {len(ENV_PARTS) + len(CPU_PARTS)} parts separated "
                         f"by ~ ({'~'.join(ENV_PARTS)}[~{'~'.join(CPU_PARTS)}]), got {len(parts)}")
    values = dict(zip(ENV_PARTS, parts))
    isa, vendor = parts[len(ENV_PARTS):] or (None, None)
    if isa is not None:
        cpu.check_record(isa, "link: env cpu_isa")
        if len(vendor) > 40 or not vendor.isprintable():
            raise ValueError(f"link: env cpu_vendor must be printable text of at most 40 characters, "
                             f"got {vendor[:40]!r}")
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
    flags = Switches(**{name: digit == "1" for name, digit in zip(SWITCHES, switches)})
    return Environment(**{**values, "threads": int(values["threads"])}, cublas_workspace_config=None, switches=flags,
                       cpu_isa=isa, cpu_vendor=vendor or None)


def key_name(field: str) -> str:
    """How a link message names a field: "steps (num_inference_steps)", or "prompt" where key and field agree."""
    key = SPECS[field].link if field in SPECS else field
    return field if key == field else f"{key} ({field})"


def _parse(field: str, text: str) -> Any:
    """A link value as the recipe field's type; the range is checked by the Recipe."""
    spec = SPECS[field]
    if spec.kind == "bool":
        if text not in ("0", "1"):
            raise FieldError(field, f"must be 0 or 1, got {text[:40]!r}")
        return text == "1"
    if spec.kind in ("int", "seed"):
        if not _INT.match(text):
            raise FieldError(field, f"must be {spec.allowed()}, got {text[:40]!r}")
        return int(text)
    if spec.kind == "float":
        if not _FLOAT.match(text):
            raise FieldError(field, f"must be {spec.allowed()}, got {text[:40]!r}")
        return float(text)
    if spec.kind == "size":
        value = spec.coerce(text)
        if value is not None and not isinstance(value, tuple):
            raise FieldError(field, f"must be {spec.allowed()}, got {text[:40]!r}")
        return value
    return text


def _check_sampler_name(name: str) -> None:
    """A link's sampler is a name some tool lists: A1111's or ComfyUI's, a diffusers class, or default (which of them
    this server runs is the server's to say); anything else is named with the link's other bad keys."""
    if name == "default" or is_ksampler(name) or re.fullmatch(r"[A-Z][A-Za-z0-9]{0,60}Scheduler", name):
        return
    hint = nearest(name, A1111_SAMPLERS)
    raise FieldError("scheduler", "must be a sampler a tool lists (A1111's such as Euler a, ComfyUI's such as "
                                  "dpmpp_2m, a diffusers class such as EulerDiscreteScheduler), "
                                  f"got {name[:60]!r}{hint}")
