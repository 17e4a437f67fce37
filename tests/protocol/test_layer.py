"""The protocol layer is plain Python: no module of it imports Beam or Arrow, even indirectly."""

import pathlib
import subprocess
import sys

import triehh_beam.protocol

PROTOCOL_DIR = pathlib.Path(triehh_beam.protocol.__file__).parent
# Every module of the layer, its rooms' included, dotted under triehh_beam.protocol.
MODULES = sorted(".".join(p.relative_to(PROTOCOL_DIR).with_suffix("").parts)
                 for p in PROTOCOL_DIR.rglob("*.py") if p.stem != "__init__")


def test_the_layer_has_the_modules_this_test_knows():
    # A renamed or added module is still checked (the list is read from the directory), and a
    # directory that lost its modules would make the check below vacuous.
    for name in ("accounting.privacy", "planning.parameters", "planning.alternatives", "planning.planner",
                 "rounds.trie", "rounds.wire", "planning.utility", "secagg.shamir"):
        assert name in MODULES


def test_protocol_modules_do_not_import_beam_or_arrow():
    code = (
        "import importlib, sys\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module('triehh_beam.protocol.' + name)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('apache_beam', 'pyarrow'))\n"
        "print(','.join(heavy))\n"
    )
    root = PROTOCOL_DIR.parents[1]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                            check=True, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert result.stdout.strip() == ""
    for name in MODULES:
        source = PROTOCOL_DIR.joinpath(*name.split(".")).with_suffix(".py").read_text(encoding="utf-8")
        assert "import apache_beam" not in source and "import pyarrow" not in source, name
