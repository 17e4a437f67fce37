"""Every script in examples/ is run by a test (the issue's "every examples/ script runs in a
test"): some test module under tests/ names it. The scripts themselves are tested in
tests/examples/ (and beside the code they show)."""

from __future__ import annotations

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (REPO / "examples").iterdir()
                 if p.is_file() and p.suffix in {".py", ".sh"})


def test_there_are_examples():
    assert any(p.name == "schedule.py" for p in SCRIPTS), SCRIPTS


def test_every_example_is_named_by_a_test():
    tests = {p: p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("test_*.py")
             if p.resolve() != pathlib.Path(__file__).resolve()}
    untested = [s.name for s in SCRIPTS if not any(s.name in text for text in tests.values())]
    assert not untested, f"examples without a test that runs them: {untested}"


def test_every_example_takes_a_work_directory_the_same_way():
    """Each script takes one optional positional WORKDIR (own_pipeline.py once took none): its
    docstring and examples/README.md show the same usage line, and the script reads it as its
    first argument (argparse's optional positional or sys.argv[1])."""
    listing = " ".join((REPO / "examples" / "README.md").read_text(encoding="utf-8").split())
    for script in SCRIPTS:
        usage = f"python examples/{script.name} [WORKDIR]"
        source = script.read_text(encoding="utf-8")
        docstring = " ".join((ast.get_docstring(ast.parse(source)) or "").split())
        assert usage in docstring, f"{script.name}'s docstring does not say {usage!r}"
        assert usage in listing, f"examples/README.md does not say {usage!r}"
        assert '"workdir", nargs="?"' in source or "sys.argv[1]" in source, script.name
