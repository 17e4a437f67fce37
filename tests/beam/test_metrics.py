"""Every counter and distribution of the product is in the one namespace ``beam.metrics`` declares:
no module declares the name again, and every ``Metrics`` call passes the imported name."""

import ast
import pathlib

import triehh_beam
from triehh_beam.beam.metrics import METRICS_NAMESPACE

PACKAGE = pathlib.Path(triehh_beam.__file__).parent


def _namespace_misuses(package: pathlib.Path):
    """(module, line, what) for each module-level ``= "triehh"`` outside beam/metrics.py and each
    ``Metrics.counter/distribution/gauge`` call whose namespace is not a name imported from
    ``triehh_beam.beam.metrics``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "triehh_beam.beam.metrics" for alias in node.names}
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and node.value.value == METRICS_NAMESPACE and relative != "beam/metrics.py"):
                found.append((relative, node.lineno, "declares the namespace again"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "Metrics"
                    and node.func.attr in ("counter", "distribution", "gauge")):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Name) and first.id in imported):
                    found.append((relative, node.lineno, "a Metrics call outside the namespace's name"))
    return found


def test_the_namespace_is_declared_once_and_every_metric_uses_it():
    assert _namespace_misuses(PACKAGE) == []


def test_the_check_finds_a_module_that_declares_its_own(tmp_path):
    (tmp_path / "own.py").write_text('from apache_beam.metrics import Metrics\n_NAMESPACE = "triehh"\n'
                                     'c = Metrics.counter(_NAMESPACE, "x")\n')
    assert [what for _, _, what in _namespace_misuses(tmp_path)] == [
        "declares the namespace again", "a Metrics call outside the namespace's name"]
