"""The package's layout holds: each layer imports only those below it, no import circles, short modules.

The layering is written once, here, as data; each subpackage's docstring says the same in words.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "seedlab"
# Which layers each layer may import (besides itself). The top (seedlab/__init__.py, cli.py) may import all.
LAYERS = {
    "engine": set(),
    "files": {"engine"},
    "scale": {"engine", "files"},
    "serving": {"engine", "files", "scale"},
    "explore": {"engine", "files", "serving", "scale"},
}
TOP = set(LAYERS)
NEVER = ("gradio", "webui", "app", "spaces")  # the backend is plain Python: the page sits above it
# Inside the engine: its rooms, and which other rooms each may import. "core" is the engine's own top level (the
# recipe, the noise, determinism); PIPELINE's modules assemble the rooms into a generation and may import them all.
ENGINE_ROOMS = {
    "core": set(),
    "weights": {"core"},
    "samplers": {"core", "weights"},
    "prompts": {"core", "weights"},
}
PIPELINE = {"seedlab.engine.generation", "seedlab.engine.models"}
# Torch-free names that any room may read (the recipe validates LoRA tags, VAE names and sampler names with them).
SHARED_NAMES = {"seedlab.engine.samplers.names", "seedlab.engine.weights.library", "seedlab.engine.weights.lora_names",
                "seedlab.engine.weights.vae_names"}
MAX_FUNCTION_LINES = 60  # longer only with a comment "# Long: why" right above the def
SHELL = [ROOT / "app.py", *sorted((ROOT / "webui").glob("*.py"))]


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, *, runtime_only: bool = False) -> set[str]:
    """The absolute names a module imports (in functions too); `runtime_only` leaves out TYPE_CHECKING blocks."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skipped: set[int] = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped |= {id(child) for child in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}  # `from . import cpu` imports a module
    return found


def layer(name: str) -> str | None:
    """"seedlab.files.links" -> "files"; the top's modules -> None."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


def test_every_subpackage_is_a_known_layer_with_a_docstring():
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert packages == set(LAYERS)
    for name in LAYERS:
        docstring = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert docstring and "import" in docstring, f"seedlab/{name} must say what it owns and what it may import"


@pytest.mark.parametrize("name", sorted(modules()))
def test_a_module_imports_only_its_own_layer_and_those_below(name):
    known = modules()
    mine = layer(name)
    allowed = TOP if mine is None else LAYERS[mine] | {mine}
    for imported in imports(name, known[name]):
        assert imported.split(".")[0] not in NEVER, f"{name} imports {imported}: the backend never imports the UI"
        if imported in known and imported != "seedlab":
            theirs = layer(imported)
            assert theirs is not None or mine is None, f"{name} imports {imported}, the top of the package"
            assert theirs is None or theirs in allowed, (
                f"{name} ({mine}) imports {imported} ({theirs}); {mine} may import {sorted(allowed)}")


def engine_room(name: str) -> str | None:
    """"seedlab.engine.samplers.a1111" -> "samplers"; "seedlab.engine.recipe" -> "core"; outside the engine -> None."""
    parts = name.split(".")
    if parts[:2] != ["seedlab", "engine"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in ENGINE_ROOMS else "core"


def test_every_engine_room_is_known_with_a_docstring():
    rooms = {path.parent.name for path in (PACKAGE / "engine").glob("*/__init__.py")}
    assert rooms == set(ENGINE_ROOMS) - {"core"}
    for room in rooms:
        docstring = ast.get_docstring(ast.parse((PACKAGE / "engine" / room / "__init__.py").read_text()))
        assert docstring and "import" in docstring.lower(), (
            f"seedlab/engine/{room} must say what it owns and what it may import")


@pytest.mark.parametrize("name", sorted(name for name in modules() if engine_room(name)))
def test_an_engine_module_imports_only_the_rooms_its_room_may(name):
    known = modules()
    mine = engine_room(name)
    for imported in imports(name, known[name], runtime_only=True):
        theirs = engine_room(imported)
        if imported not in known or theirs in (None, mine) or name in PIPELINE or imported in SHARED_NAMES:
            continue
        if imported == f"seedlab.engine.{theirs}":  # `from . import x` names the room's package first
            continue
        assert theirs in ENGINE_ROOMS[mine] and imported not in PIPELINE, (
            f"{name} ({mine}) imports {imported} ({theirs}); {mine} may import {sorted(ENGINE_ROOMS[mine])}")


@pytest.mark.parametrize("folder", ["engine", "files", *sorted(p.parent.relative_to(PACKAGE).as_posix()
                                                                for p in PACKAGE.glob("*/*/__init__.py"))])
def test_no_three_siblings_share_a_name_prefix(folder):
    """A prefix shared by three modules (`prompts_*`, `comfyui_*`) is a room waiting to be made."""
    names = sorted(path.stem for path in (PACKAGE / folder).glob("*.py") if path.stem != "__init__")
    prefixes: dict[str, list[str]] = {}
    for stem in names:
        prefixes.setdefault(stem.split("_")[0], []).append(stem)
    crowded = {prefix: stems for prefix, stems in prefixes.items() if len(stems) >= 3}
    assert not crowded, f"seedlab/{folder}: make a room for {crowded}"


def shell_modules() -> dict[str, Path]:
    """The page's modules by dotted name: app and webui.*."""
    return {"app": ROOT / "app.py", **{f"webui.{path.stem}": path for path in SHELL[1:] if path.stem != "__init__"}}


def test_no_import_circles():
    known = {**modules(), **shell_modules()}
    # Every import counts here, TYPE_CHECKING ones too: a circle a type checker follows is still a circle to a reader.
    graph = {name: {i for i in imports(name, path) if i in known and i != name} for name, path in known.items()}
    # A package imports its __init__ first; only module-to-module edges can close a circle.
    graph = {name: {i for i in edges if not name.startswith(i + ".")} for name, edges in graph.items()}
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for nxt in graph[name]:
            assert state.get(nxt) != 1, "import circle: " + " -> ".join(trail[trail.index(nxt):] + [nxt])
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


@pytest.mark.parametrize("path", [*modules().values(), *SHELL], ids=lambda p: str(p.relative_to(ROOT)))
def test_functions_stay_short(path):
    """A function says one thing; a module holds one concept, however long (k-diffusion's sampling.py is one file):
    it is split along a concept, never at a line count."""
    text = path.read_text()
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            reason = lines[first - 2].strip() if first >= 2 else ""
            assert length <= MAX_FUNCTION_LINES or reason.startswith("# Long:"), (
                f"{path.name}: {node.name} has {length} lines and no '# Long: why' comment above it")


def test_a_module_imports_only_by_its_path_in_its_layer():
    """No import hook or table of old paths: `seedlab.recipe` is `seedlab.engine.recipe` and nothing else."""
    import importlib
    import sys

    import seedlab

    assert not any(type(finder).__module__.startswith("seedlab") for finder in sys.meta_path)
    assert not {"MOVED", "RENAMED"} & set(vars(seedlab))
    for old in ("seedlab.recipe", "seedlab.links", "seedlab.engine.ksampling", "seedlab.files.comfyui_graph"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)
    with pytest.raises(AttributeError):
        seedlab.recipe  # noqa: B018  (an attribute the package no longer aliases)
