"""``triehh evaluate`` keeps an earlier evaluation unless told: refused before anything runs,
overwritten with ``--force``."""

import json

from triehh_beam.cli import main
from triehh_beam.io.write import write_records


def _evaluate(path, output, *extra):
    return main(["evaluate", "--input", path, "--epsilon", "8", "--delta", "1e-3", "--max-length", "4",
                 "--runs", "1", "--top-k", "2", "--rivals", "exact", "--engine", "simulate",
                 "--no-progress", "--output", str(output), *extra])


def test_an_earlier_evaluation_is_kept_unless_forced(tmp_path, capsys):
    path = str(tmp_path / "records.jsonl")
    rows, user = [], 0
    for item, holders in {"aa": 400, "ab": 300, "b": 200}.items():
        rows += [(user + i, item) for i in range(holders)]
        user += holders
    write_records(path, rows)
    output = tmp_path / "eval"
    assert _evaluate(path, output) == 0
    first = (output / "evaluation.json").read_bytes()
    capsys.readouterr()

    # Refused, in one line, before any run: the earlier files are untouched.
    assert _evaluate(path, output, "--runs", "2") == 2
    captured = capsys.readouterr()
    assert captured.err == (f"triehh evaluate: error: {output} already holds an evaluation "
                            "(evaluation.json, report.html): give --force to overwrite it, or another --output\n")
    assert captured.out == ""
    assert (output / "evaluation.json").read_bytes() == first

    assert _evaluate(path, output, "--runs", "2", "--force") == 0
    assert json.loads((output / "evaluation.json").read_text(encoding="utf-8"))["parameters"]["runs"] == 2
