"""Which VAE file of the models folder a recipe names, read without torch: by its name or A1111's "VAE hash".

A1111 1.10 writes the VAE it decoded with as "VAE: NAME.safetensors" (the file's name, sd_vae.get_loaded_vae_name)
and "VAE hash: HASH" (the first 10 hex digits of the whole file's SHA-256, get_loaded_vae_hash); ComfyUI's
VAELoader names it by its path inside `models/vae` ("sub/NAME.safetensors"). Either finds the file in the
models folder's `VAE/` or `vae/` (library.py) by its stem: the name is only compared with the listed files, never
joined to a path. A `.pt` or `.ckpt` VAE is found so that it is refused by name: loading it would unpickle it.

A link or API call (SeedLab's own) must name a VAE that is here and is its hash's file (`errors`); another tool's
image whose VAE is not here is made with the checkpoint's own VAE, with a note (`adapt`). vae.py loads the file.
"""

from __future__ import annotations

from ..spec import A1111_HASH, FieldError, RecipeError, _show
from . import library

KIND = "vae"
SAFE = ".safetensors"


def stem(name: str) -> str:
    """A VAE's name as the models folder lists it: "sub\\NAME.vae.pt" -> "NAME.vae" (the file's stem)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    for suffix in library.SUFFIXES[KIND]:
        if base.lower().endswith(suffix):
            return base[:-len(suffix)]
    return base


def check(name: str, hash_: str) -> None:
    """A recipe's VAE fields well formed: the name a file name (or a path inside the VAE folder, as ComfyUI names it),
    the hash A1111's; RecipeError naming vae and vae_hash. Whether the file is here is `errors`' question."""
    errors, parts = [], name.replace("\\", "/").split("/")
    if name and (":" in name or any(part.strip() in ("", ".", "..") for part in parts)):
        errors.append(FieldError("vae", "must be the file name of a VAE in the models folder (NAME.safetensors, or a "
                                        f"path inside its VAE folder), got {_show(name)}"))
    if hash_ and not A1111_HASH.fullmatch(hash_):
        errors.append(FieldError("vae_hash", "must be empty or an A1111 VAE hash, 8 to 64 hex digits (A1111's: 10), "
                                             f"got {_show(hash_)}"))
    if errors:
        raise RecipeError(errors)


def same_hash(mine: str, wanted: str) -> bool:
    """A1111's short hash (10 digits) and a longer or shorter spelling of it name the same file."""
    wanted = wanted.strip().lower()
    return mine.startswith(wanted) or wanted.startswith(mine)


def _found(name: str, paths: list) -> library.Found:
    """Of the files of one stem, the safetensors one (a .pt or .ckpt beside it is never the one used)."""
    path = next((path for path in paths if path.suffix.lower() == SAFE), paths[0])
    return library.Found(name, path, library.short_hash(KIND, path))


def by_name(name: str) -> library.Found | None:
    """The VAE file `name` names (its stem, its file name, a path in the VAE folder), the exact stem first."""
    wanted, listed = stem(name), library.files(KIND)
    if wanted in listed:
        return _found(wanted, listed[wanted])
    same = [(key, paths) for key, paths in listed.items() if key.lower() == wanted.lower()]
    return _found(*same[0]) if wanted and same else None


def by_hash(hash_: str) -> library.Found | None:
    """The VAE file whose A1111 hash is `hash_`, whatever its name (a safetensors file first)."""
    matching = [library.Found(key, path, library.short_hash(KIND, path))
                for key, paths in library.files(KIND).items() for path in paths]
    matching = [found for found in matching if same_hash(found.hash, hash_)]
    return next((found for found in matching if found.path.suffix.lower() == SAFE), matching[0] if matching else None)


def _pickle(found: library.Found) -> str:
    return (f"VAE {found.path.name} is not a .safetensors file: a {found.path.suffix} is a pickle, which SeedLab never "
            "loads (it can run code); convert it to .safetensors")


def find(name: str, hash_: str = "") -> library.Found:
    """The VAE a recipe uses: the file `name` names (which must be `hash_`'s file when a hash is given), or with no
    name the file of `hash_`. Raises library.NotFound, or ValueError for a pickle or another file's hash."""
    found = by_name(name) if name else by_hash(hash_)
    if found is None:
        raise library.not_found(KIND, name, hash_)
    if found.path.suffix.lower() != SAFE:
        raise ValueError(_pickle(found))
    if name and hash_ and not same_hash(found.hash, hash_):
        raise ValueError(f"vae_hash {hash_} is not the hash of VAE {found.path.name} here ({found.hash}): another "
                         "file; empty vae_hash to use this one")
    return found


def errors(recipe) -> list[FieldError]:
    """A link's or an API call's VAE that this models folder cannot give, as a FieldError (vae or vae_hash)."""
    if not (recipe.vae or recipe.vae_hash):
        return []
    try:
        find(recipe.vae, recipe.vae_hash)
    except library.NotFound as error:
        return [FieldError("vae" if recipe.vae else "vae_hash", str(error))]
    except ValueError as error:
        message = str(error)
        if message.startswith("vae_hash "):
            return [FieldError("vae_hash", message.removeprefix("vae_hash "))]
        return [FieldError("vae", message)]
    return []


def adapt(recipe) -> tuple[object, list[str]]:
    """Another tool's recipe with its VAE as this folder has it: found by its hash (whatever its name here), else by
    its name (a note when the file's hash differs); a VAE that is not here (or only as a pickle) is left out, the
    image decoded by the checkpoint's own VAE, with a note."""
    if not (recipe.vae or recipe.vae_hash):
        return recipe, []
    found = by_hash(recipe.vae_hash) if recipe.vae_hash else None
    if found is not None and found.path.suffix.lower() == SAFE:
        if recipe.vae and stem(recipe.vae) == found.name:
            return recipe, []
        return recipe.replace(vae=found.path.name), [f"VAE {recipe.vae or ''} (hash {recipe.vae_hash}) is found by "
                                                     f"its hash as {found.path.name}".replace("VAE  (", "VAE (")]
    found = by_name(recipe.vae) if recipe.vae else found
    if found is None or found.path.suffix.lower() != SAFE:
        why = str(library.not_found(KIND, recipe.vae, recipe.vae_hash)) if found is None else _pickle(found)
        return recipe.replace(vae="", vae_hash=""), [f"{why}: the checkpoint's own VAE decodes the image, so its "
                                                     "colours differ"]
    if recipe.vae_hash:
        return recipe.replace(vae_hash=found.hash), [
            f"VAE {found.path.name} here has hash {found.hash}, the image was made with {recipe.vae_hash}: another "
            "file, so the colours may differ"]
    return recipe, []
