"""The packages are layers: each imports only the layers below it, with no import cycle, no
private name used outside its module, no module over 500 lines and module docstrings of one
paragraph (design text lives once, in docs/) (CONTRIBUTING.md, "Layout"). Inside a layer, the
rooms (subpackages by concern) are layers too, and no folder holds more than 12 modules.

Imports are read from the source (``ast``), those inside functions included: a deferred import
is still a dependency.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import triehh_beam

PACKAGE = pathlib.Path(triehh_beam.__file__).parent
# Lowest first. ``reference`` holds pure oracles (plain Python over ``protocol``); ``present``
# turns published outputs into text and drawings.
ORDER = ("proto", "protocol", "reference", "io", "beam", "job", "present", "evaluation", "cli")
# Outside ORDER: the layers a package may import, and the layers that may import it.
BESIDE = {"device": ("proto", "protocol")}
BESIDE_USERS = {"device": ("evaluation", "cli")}
MAX_LINES = 500
# Inside a layer, its rooms lowest first: a module imports only its own room, the rooms before
# it, and the layer's own top-level modules (its base, lowest of all: a base module imports no
# room, except a dispatcher that assembles them). ``job`` has no base.
ROOMS = {
    "protocol": ("items", "randomness", "rounds", "estimates", "accounting", "planning", "central",
                 "federated", "secagg"),
    "job": ("state", "settings", "release", "batch", "windows", "federated"),
    "beam": ("samples", "rounds", "releases", "windows", "pubsub"),
    "io": ("records", "pubsub"),
    "cli": ("plan", "measure", "inspect"),
    "evaluation": ("fleet", "audits"),
}
DISPATCHERS = {"triehh_beam.cli.dispatch", "triehh_beam.cli.__main__"}
MAX_MODULES = 12


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()
GENERATED = {m for m in MODULES if m.startswith("triehh_beam.proto.") and m.endswith("_pb2")}


def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def _imports(module: str):
    """(imported module or name, the name it is bound to) for every import in ``module``."""
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, alias.asname
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{module}: relative import of {node.module}")
            yield node.module, None
            for alias in node.names:  # "from triehh_beam.job import cas" imports a module
                yield f"{node.module}.{alias.name}", alias.asname or alias.name


def _dependencies(module: str) -> set[str]:
    """The package's modules that ``module`` imports (a name imported from a module counts as
    that module)."""
    found = set()
    for imported, _ in _imports(module):
        while imported and imported not in MODULES:
            imported = imported.rpartition(".")[0]
        if imported and imported != module:
            found.add(imported)
    return found


def _layer(module: str):
    parts = module.split(".")
    if parts[0] != "triehh_beam" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in ORDER or parts[1] in BESIDE else None


def test_every_module_belongs_to_a_layer():
    loose = [m for m in MODULES if m != "triehh_beam" and _layer(m) is None]
    assert loose == []


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for module in MODULES:
        own = _layer(module)
        for imported, _ in _imports(module):
            if imported.split(".")[0] == "pipelines":
                wrong.append(f"{module} imports {imported}")
            target = _layer(imported)
            if not (own and target) or own == target:
                continue
            if own in BESIDE:
                allowed = target in BESIDE[own]
            elif target in BESIDE:
                allowed = own in BESIDE_USERS[target]
            else:
                allowed = ORDER.index(target) <= ORDER.index(own)
            if not allowed:
                wrong.append(f"{module} ({own}) imports {imported} ({target})")
    assert wrong == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_counting_function_local_imports():
    # A package's __init__ that re-exports its modules is not part of their cycles.
    graph = {m: {d for d in _dependencies(m) if not d.startswith(m + ".") and not m.startswith(d + ".")}
             for m in MODULES}
    assert sum(map(len, graph.values())) > 300  # the scan saw the package's imports
    assert _cycles(graph) == []


def _private_uses(module: str):
    bound = {}
    for imported, name in _imports(module):
        leaf = imported.rpartition(".")[2]
        owner = imported.rpartition(".")[0]
        if imported in MODULES:
            if name:
                bound[name] = imported
        elif owner in MODULES and owner != module and leaf.startswith("_") and not leaf.startswith("__"):
            yield f"{module} imports {imported}"
    for node in ast.walk(_tree(module)):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in bound and bound[node.value.id] != module
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            yield f"{module} uses {bound[node.value.id]}.{node.attr}"


def test_no_private_name_is_used_outside_its_module():
    used = sorted(u for m in MODULES if m not in GENERATED for u in _private_uses(m))
    assert used == []


@pytest.mark.parametrize("module", sorted(set(MODULES) - GENERATED))
def test_no_module_is_over_500_lines(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module}: {lines} lines; split it by concern"


def test_module_docstrings_are_one_paragraph():
    long = [m for m in sorted(set(MODULES) - GENERATED)
            if "\n\n" in (ast.get_docstring(_tree(m), clean=True) or "").strip()]
    assert long == []


def _room(module: str):
    """(layer, room) of ``module``; room "" is the layer's base (its top-level modules)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in ROOMS:
        return None
    return parts[1], parts[2] if parts[2] in ROOMS[parts[1]] else ""


def test_every_folder_of_a_layer_is_a_room_in_order():
    for layer, rooms in ROOMS.items():
        folders = {p.parent.name for p in (PACKAGE / layer).glob("*/__init__.py")}
        assert folders == set(rooms), layer
    assert [m for m in MODULES if _room(m) == ("job", "")] == []  # every module of job/ in a room


def test_each_room_imports_only_its_base_and_the_rooms_before_it():
    wrong = []
    for module in MODULES:
        own = _room(module)
        if own is None or module in DISPATCHERS:
            continue
        is_room_init = own[1] and module == f"triehh_beam.{own[0]}.{own[1]}"
        order = ("",) + ROOMS[own[0]]
        for target in _dependencies(module):
            theirs = _room(target)
            if theirs is None or theirs[0] != own[0] or theirs == own:
                continue
            if target == f"triehh_beam.{own[0]}" or (is_room_init and target.startswith(module + ".")):
                continue  # the layer's own __init__, or a room's __init__ re-exporting its modules
            if order.index(theirs[1]) > order.index(own[1]) or (own[1] == "" and theirs[1]):
                wrong.append(f"{module} ({own[1] or 'base'}) imports {target} ({theirs[1] or 'base'})")
    assert wrong == []


def test_no_folder_holds_more_than_12_modules():
    crowded = {}
    for folder in {p.parent for p in PACKAGE.rglob("*.py")}:
        if folder.name == "proto":
            continue  # generated from protos/, one module per .proto file
        count = len([p for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")])
        if count > MAX_MODULES:
            crowded[str(folder.relative_to(PACKAGE.parent))] = count
    assert crowded == {}


def test_every_room_says_what_it_owns_and_what_it_may_import():
    for layer, rooms in ROOMS.items():
        for room in rooms:
            doc = ast.get_docstring(_tree(f"triehh_beam.{layer}.{room}"), clean=True) or ""
            assert len(doc.split()) >= 15, f"{layer}.{room}: no docstring worth the name"
            assert "import" in doc.lower(), f"{layer}.{room}: say what it may import"
