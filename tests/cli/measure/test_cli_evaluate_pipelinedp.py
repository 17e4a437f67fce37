"""``triehh evaluate --rivals pipelinedp``: the flag parses, the rival is in evaluation.json, the
console table and report.html, and without PipelineDP the command stops before any run with one
line naming the extra to install."""

import argparse
import json
import sys

import pytest

from tests.holders import write_holders

from triehh_beam.cli import main
from triehh_beam.cli.measure import evaluate as evaluate_cli

POPULATION = {"aa": 600, "ab": 400, "b": 300, "cc": 200, "d": 150, "e": 100, "rare": 2}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_holders(str(tmp_path_factory.mktemp("in") / "records.jsonl"), POPULATION)


def _evaluate(path, output, rivals="pipelinedp,exact"):
    return main(["evaluate", "--input", path, "--epsilon", "1", "--delta", "1e-8", "--max-length", "4",
                 "--runs", "2", "--top-k", "3,6", "--rivals", rivals, "--protocol", "sample-threshold",
                 "--engine", "simulate", "--no-progress", "--output", str(output)])


def test_the_flag_parses():
    parser = argparse.ArgumentParser()
    evaluate_cli.add_evaluate_arguments(parser)
    args = parser.parse_args(["--input", "x", "--output", "o", "--epsilon", "1", "--delta", "1e-8",
                              "--max-length", "4", "--rivals", "pipelinedp, exact"])
    assert args.rivals == ("pipelinedp", "exact")
    assert "pipelinedp" in parser.format_help()


def test_the_report_shows_the_rival(records, tmp_path, capsys):
    output = tmp_path / "eval"
    assert _evaluate(records, output) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if "PipelineDP partition selection ε=1" in line]
    assert len(rows) == 1 and "1.000" in rows[0]  # every top-6 item has >= 100 holders
    ours = [line for line in printed.splitlines() if "triehh-beam partition selection ε=1" in line]
    assert len(ours) == 1 and "1.000" in ours[0]  # the product's own, on the same rows and budget
    result = json.loads((output / "evaluation.json").read_text(encoding="utf-8"))
    assert result["parameters"]["rivals"] == ["exact", "pipelinedp"]
    [configuration] = result["rivals"]["pipelinedp"]["configurations"]
    assert (configuration["epsilon"], configuration["delta"]) == (1.0, 1e-8)
    assert all(set(run["heavy_hitters"]) == set(POPULATION) - {"rare"} for run in configuration["runs"])
    page = (output / "report.html").read_text(encoding="utf-8")
    assert "PipelineDP partition selection ε=1" in page and "truncated geometric" in page
    assert "triehh-beam partition selection ε=1" in page


def test_without_pipeline_dp_one_line_names_the_extra(records, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pipeline_dp", None)  # import fails as if not installed
    output = tmp_path / "eval"
    assert _evaluate(records, output) == 2
    err = capsys.readouterr().err
    assert err.startswith("triehh evaluate: error: ") and len(err.strip().splitlines()) == 1
    assert 'pip install "triehh-beam[rivals]"' in err and "Traceback" not in err
    assert not output.exists()  # nothing ran
    assert _evaluate(records, output, rivals="exact") == 0  # the product runs without it
