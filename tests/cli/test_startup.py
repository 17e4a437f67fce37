"""``triehh --help`` and argument errors answer without importing Beam (or SciPy): the parser of
every subcommand is built from modules that defer those imports to the command's run; and a plain
discovery imports nothing of the plots, the PLD accountant, the PipelineDP rival, the docs or
``scipy.stats``.
Checked in a fresh interpreter through ``sys.modules`` (what was imported), not by timing."""

import json
import pathlib
import subprocess
import sys

import pytest

import triehh_beam

ROOT = pathlib.Path(triehh_beam.__file__).parents[1]
# Beam costs about 1.1 s to import here and SciPy's stats 0.4 s (python -X importtime): a parser
# that imported them answered `triehh --help` in 2.2 s.
HEAVY = ("apache_beam", "scipy", "matplotlib", "dp_accounting", "pipeline_dp", "mkdocs", "tqdm")
# What a plain central discovery (TrieHH, the authors' rule, in-process runner; TrieHH++'s exact
# accounting needs dp_accounting) never needs: Beam
# it does, and scipy.special (the rank prefilter, its plan's unit advice: protocol.planning.distributions),
# never scipy.stats (0.5-0.9 s to import); tqdm comes with Beam's BigQuery client.
NOT_IN_A_DISCOVERY = ("matplotlib", "dp_accounting", "pipeline_dp", "mkdocs", "scipy.stats")


def _imported_after(argv, watched=HEAVY) -> dict:
    code = (
        "import contextlib, io, json, sys\n"
        "from triehh_beam.cli import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        f"    code = main({argv!r})\n"
        f"heavy = sorted(w for w in {watched!r} if any(m == w or m.startswith(w + '.') for m in sys.modules))\n"
        "print(json.dumps({'code': code, 'heavy': heavy, 'out': out.getvalue(), 'err': err.getvalue()}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return json.loads(result.stdout)


def test_the_check_sees_a_heavy_import():
    # `triehh plan` imports SciPy when it plans: the checks below would see it.
    report = _imported_after(["plan", "--population", "1000", "--epsilon", "4", "--delta", "1e-6",
                              "--max-length", "4", "--json"])
    assert report["code"] == 0
    assert "scipy" in report["heavy"]


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["discover", "--help"],
    ["demo", "--help"],
    ["evaluate", "--help"],
    ["audit", "--help"],
    ["show", "--help"],
    ["scheduled", "--help"],
    ["plan", "--help"],
])
def test_help_imports_neither_beam_nor_scipy(argv):
    report = _imported_after(argv)
    assert report["code"] == 0
    assert "usage: triehh" in report["out"]
    assert report["heavy"] == []


@pytest.mark.parametrize("argv, message", [
    (["discover", "--epsilon", "x"], "argument --epsilon: not a number: 'x'"),
    (["discover", "--input", "a.jsonl", "--output", "o", "--epsilon", "1", "--delta", "1e-6"],
     "the following arguments are required: --max-length"),
    (["plan", "--population", "0", "--epsilon", "1", "--delta", "1e-6", "--max-length", "4"],
     "argument --population/-n: must be >= 1, got 0"),
    (["plan", "-n", "1000", "--epsilon", "4", "--delta", "1e-6", "--max-length", "4",
      "--unit-size", "auto", "--find-frequency", "2"], "argument --find-frequency: must be in (0, 1]"),
    (["no-such-command"], "argument COMMAND: invalid choice: 'no-such-command'"),
    (["show"], "the following arguments are required: OUTPUT"),
    (["audit", "--input", "a.jsonl", "--epsilon", "1", "--delta", "1e-6", "--max-length", "4", "--runs", "0"],
     "argument --runs: must be >= 1, got 0"),
])
def test_argument_errors_import_neither_beam_nor_scipy(argv, message):
    report = _imported_after(argv)
    assert report["code"] == 2
    assert message in report["err"]
    assert report["heavy"] == []


@pytest.mark.slow
def test_a_plain_discovery_imports_no_plots_accountant_rival_or_docs(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = tmp_path / "records.parquet"
    pq.write_table(pa.table({"user_id": [f"u{i}" for i in range(100)],
                             "item": ["the"] * 60 + ["to"] * 25 + [f"w{i}" for i in range(15)]}), records)
    report = _imported_after(["discover", "--input", str(records), "--output", str(tmp_path / "out"),
                              "--epsilon", "6", "--delta", "1e-3", "--max-length", "4", "--protocol", "triehh"],
                             watched=NOT_IN_A_DISCOVERY + ("apache_beam",))
    assert report["code"] == 0, report["err"]
    assert "\ndiscovered " in report["out"]  # (a fresh seed: how many varies)
    assert report["heavy"] == ["apache_beam"]  # (the check sees what the run imports)
