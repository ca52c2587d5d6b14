"""The package's layers: every import in cua_cli/ goes down the order below, or sideways inside
one package, and no chain of imports comes back to where it started.

Every import counts: top-level, inside functions, and under TYPE_CHECKING alike.
"""

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from cua_cli import errors, kinds

PACKAGE = Path(__file__).resolve().parent.parent / "cua_cli"

# Lowest first. A module may import from its own layer or any below it, never from above.
LAYERS = [
    ["cua_cli", "cua_cli.errors"],                          # the version; the error tree
    ["cua_cli._util"],                                      # plumbing with no domain knowledge
    ["cua_cli.kinds"],                                      # names of every pluggable kind (a leaf)
    ["cua_cli.config"],                                     # what a config may say
    ["cua_cli.pyautogui_vocab", "cua_cli.actions", "cua_cli.osworld", "cua_cli.tasks"],  # what a task is
    ["cua_cli.runfolder"],                                  # the run folder: queue, records, readers
    ["cua_cli.fleet", "cua_cli.envserver"],                 # model servers; the built-in env server
    ["cua_cli.models"],
    ["cua_cli.envs"],
    ["cua_cli.agents"],
    ["cua_cli.dart"],                                       # DART-GUI's rounds, reloads, tables, folders
    ["cua_cli.stats"],                                      # numbers from result folders
    ["cua_cli.rollout"],
    ["cua_cli.view", "cua_cli.export", "cua_cli.logprobs_check", "cua_cli.top", "cua_cli.watch"],
    ["cua_cli.demo"],                                       # a person's demonstration: rollout's parts, watch's page
    ["cua_cli.cli", "cua_cli.__main__"],
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> set[str]:
    """The cua_cli modules `name` imports, resolved to modules (a `from pkg import sub` is pkg.sub)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for a in node.names:
                found.add(f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports(name) for name in MODULES}


def layer(name: str) -> int:
    """The index of the layer `name` belongs to: its longest prefix in LAYERS."""
    best = None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (i, p)
    assert best, f"{name} is in no layer: add it to LAYERS"
    return best[0]


def test_every_module_has_a_layer():
    for name in MODULES:
        layer(name)


def test_no_import_goes_up():
    upward = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
              for a, targets in GRAPH.items() for b in targets if layer(b) > layer(a)]
    assert upward == []


def test_no_import_circles():
    circles, state = [], {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_the_checks_find_what_they_look_for():
    """The walker sees function-level and TYPE_CHECKING imports (a circle there breaks `cua` as
    soon as someone makes it an ordinary import)."""
    assert "cua_cli.tasks" in GRAPH["cua_cli.envs"]               # under TYPE_CHECKING
    assert "cua_cli.envserver.server" in GRAPH["cua_cli.cli"]     # inside a function
    assert layer("cua_cli.rollout.backends.ray") == layer("cua_cli.rollout") > layer("cua_cli.dart")


def _error_classes(tree: ast.Module) -> list[ast.ClassDef]:
    names = {c.__name__ for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, errors.CuaError)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
            and any(isinstance(b, ast.Name) and b.id in names for b in n.bases)]


def test_every_cua_error_lives_in_errors_py():
    stray = [f"{name}: {c.name}" for name, path in MODULES.items() if name != "cua_cli.errors"
             for c in _error_classes(ast.parse(path.read_text()))]
    assert stray == []


def test_the_error_tree_in_errors_py_lists_every_error():
    drawn = re.findall(r"^ +(\w+)  ", errors.__doc__, re.M)
    defined = [c.__name__ for c in vars(errors).values()
               if inspect.isclass(c) and issubclass(c, errors.CuaError)]
    assert sorted(drawn) == sorted(defined)
    for c in defined:  # drawn under its parent: indented one level more
        cls = getattr(errors, c)
        if cls is not errors.CuaError:
            line = next(line for line in errors.__doc__.splitlines() if re.match(rf"^ +{c}  ", line))
            parent = next(line for line in errors.__doc__.splitlines()
                          if re.match(rf"^ +{cls.__bases__[0].__name__}  ", line))
            indent = len(line) - len(line.lstrip())
            assert indent == len(parent) - len(parent.lstrip()) + 2, c


@pytest.mark.parametrize("table", ["ENVS", "AGENTS", "PROVIDERS", "BACKENDS"])
def test_every_kind_names_a_class(table):
    for kind, entry in getattr(kinds, table).items():
        module, _, cls = entry.partition(":")
        assert inspect.isclass(getattr(importlib.import_module(module), cls)), (table, kind)


def test_config_imports_no_plug_in():
    assert not any(b.startswith(("cua_cli.envs", "cua_cli.agents", "cua_cli.models", "cua_cli.rollout"))
                   for b in GRAPH["cua_cli.config"])


def test_no_two_public_classes_share_a_name():
    """A name says which thing it is: two unrelated classes called Server (or HTTPError) make every
    import of one a guess. Private helpers (a leading underscore) are each module's own business."""
    where: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(name)
    assert {c: ms for c, ms in where.items() if len(ms) > 1} == {}
