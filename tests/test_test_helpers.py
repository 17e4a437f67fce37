"""Test modules share helpers through named, non-test modules (``tests/pipeline_checks.py``,
``tests/windowed_jobs.py``, ``tests/e2e/federated_jobs.py``, ...), never by importing another
module's private names: a test module's ``_helper`` is its own, free to change with its tests."""

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def _private_imports(source: str, name: str):
    """``name:line: helper from module`` for each private name ``source`` imports from ``tests``."""
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tests":
            for alias in node.names:
                if alias.name.startswith("_"):
                    yield f"{name}:{node.lineno}: {alias.name} from {node.module}"


def test_no_test_module_imports_another_modules_private_helper():
    found = [line for path in sorted(TESTS.rglob("*.py"))
             for line in _private_imports(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))]
    assert found == [], "\n".join(found)


def test_the_check_sees_a_private_import():
    # The check can fail: a module that imports a private helper is reported, a public one not.
    source = "import os\nfrom tests.e2e.federated_jobs import (SEED,\n    _hidden)\nfrom triehh_beam.x import _y\n"
    assert list(_private_imports(source, "probe.py")) == ["probe.py:2: _hidden from tests.e2e.federated_jobs"]
