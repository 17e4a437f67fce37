"""The packages are layers: each imports only the layers below it, and modules import no cycle.

The order, lowest first: ``protocol`` (plain Python), ``io`` (Arrow), ``beam`` (PTransforms),
``job`` (operating a discovery), ``evaluation``, ``cli``. ``proto`` (generated messages) sits
under all of them, and nothing in ``triehh_beam`` imports ``pipelines``. ``device`` (the
federated device library) is beside ``protocol``: it imports only ``protocol`` and ``proto``,
and only ``evaluation`` (the simulated fleet runs devices) and ``cli`` import it. Imports are
read from
the source (``ast``), those inside functions included: a deferred import is still a dependency.
"""

from __future__ import annotations

import ast
import pathlib

import triehh_beam

PACKAGE = pathlib.Path(triehh_beam.__file__).parent
ORDER = ("proto", "protocol", "io", "beam", "job", "evaluation", "cli")
# Outside ORDER: the layers a package may import, and none may import it.
BESIDE = {"device": ("proto", "protocol")}
# The layers that may import a package beside the order.
BESIDE_USERS = {"device": ("evaluation", "cli")}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def _imports(path: pathlib.Path, module: str, top_level_only: bool):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{module}: relative import of {node.module}")
            yield node.module
            for alias in node.names:  # "from triehh_beam.job import cas" imports a module
                yield f"{node.module}.{alias.name}"


def _layer(module: str):
    parts = module.split(".")
    if parts[0] != "triehh_beam" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in ORDER or parts[1] in BESIDE else None


def test_every_module_belongs_to_a_layer():
    loose = [m for m, _ in _modules() if m != "triehh_beam" and _layer(m) is None
             and not m.startswith("triehh_beam.data")]
    assert loose == []


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    count = 0
    for module, path in _modules():
        own = _layer(module)
        for imported in _imports(path, module, top_level_only=False):
            count += 1
            if imported.split(".")[0] == "pipelines":
                wrong.append(f"{module} imports {imported}")
            target = _layer(imported)
            if not (own and target) or own == target:
                continue
            if own in BESIDE:
                allowed = target in BESIDE[own]
            else:
                allowed = own in BESIDE_USERS[target] if target in BESIDE else ORDER.index(target) <= ORDER.index(own)
            if not allowed:
                wrong.append(f"{module} ({own}) imports {imported} ({target})")
    assert count > 200  # the scan saw the package's imports
    assert wrong == []


def test_module_level_imports_have_no_cycle():
    names = {m for m, _ in _modules()}
    graph = {}
    for module, path in _modules():
        graph[module] = sorted({i for i in _imports(path, module, top_level_only=True)
                                if i in names and i != module})
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    # A package's __init__ re-exporting its modules is not a cycle of theirs.
    real = [c for c in cycles if not any(c[i + 1].startswith(c[i] + ".") for i in range(len(c) - 1))]
    assert real == []
