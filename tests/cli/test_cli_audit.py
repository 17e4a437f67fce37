"""``triehh audit``: the JSON object and the text report of a real audit on a records file, and
the refusals (a canary that cannot be encoded, an infeasible target, too few runs, a missing
input), each one line on stderr with exit code 2."""

import json

import pytest

from triehh_beam.cli import main
from triehh_beam.io.write import write_records

TARGET = ["--epsilon", "0.9", "--delta", "1e-6", "--max-length", "3"]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    # 2,000 users: "ab" 1,500, "ba" 300, "c" 200 (the plan: theta = 10, m = 51).
    path = str(tmp_path_factory.mktemp("audit") / "records.jsonl")
    items = ["ab"] * 1500 + ["ba"] * 300 + ["c"] * 200
    write_records(path, [(f"user-{i}", item) for i, item in enumerate(items)])
    return path


def _audit(path, *extra):
    return main(["audit", "--input", path, *TARGET, "--runs", "40", "--no-progress", *extra])


def test_json_is_one_object_with_the_claim_the_bound_and_the_counts(records, capsys):
    assert _audit(records, "--json", "--theta", "1") == 0
    result = json.loads(capsys.readouterr().out)
    assert isinstance(result["epsilon_claimed"], float) and result["epsilon_claimed"] <= 0.9
    assert isinstance(result["epsilon_lower_bound"], float) and result["epsilon_lower_bound"] >= 0
    assert result["violated"] == (result["epsilon_lower_bound"] > result["epsilon_claimed"])
    assert result["runs"] == 40 and (result["selection_runs"], result["evaluation_runs"]) == (20, 20)
    assert result["plan"] == {"theta": 10, "batch_size": 51, "population": 2000, "sampling_rate": 51 / 2000}
    assert result["audited"]["theta"] == 1 and result["audited"]["overridden"] == ["theta"]
    assert [c["kind"] for c in result["canaries"]] == ["random", "worst-case"]
    assert result["canaries"][1]["item"] == "a"
    for event in result["events"]:
        assert set(event) == {"canary", "prefix", "units", "runs_d0", "runs_d1"}
        assert 0 <= event["runs_d0"] <= 40 and 0 <= event["runs_d1"] <= 40
    assert set(result["best_event"]) == {"canary", "prefix", "in_trie", "direction", "selection", "evaluation"}
    assert result["input"] == {"files": [records], "records": 2000}
    assert result["confidence"] == 0.95 and "Clopper-Pearson" in result["method"]


def test_text_report_names_the_canaries_the_bound_and_the_claim(records, capsys):
    assert _audit(records, "--canary", "zz") == 0
    out = capsys.readouterr().out
    assert "canary given      'zz' (3 units): given (--canary)" in out
    assert "canary worst-case 'a' (2 units)" in out
    assert "epsilon lower bound   0\n" in out
    assert "epsilon claimed       0.8" in out
    assert out.rstrip().splitlines()[-1].startswith("consistent:")


def test_progress_goes_to_stderr(records, capsys):
    assert main(["audit", "--input", records, *TARGET, "--runs", "10", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == "audit: 30/30 runs"
    json.loads(captured.out)


@pytest.mark.parametrize("canary", ["", "abc"])
def test_a_bad_canary_is_refused_in_one_line(records, capsys, canary):
    assert _audit(records, "--canary", canary) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"triehh audit: error: canary {canary!r} cannot be encoded")
    assert "at most 2 characters for --max-length 3" in captured.err
    assert len(captured.err.splitlines()) == 1


@pytest.mark.parametrize("extra, message", [
    (["--epsilon", "0.5"], "no plan to audit"),
    (["--runs", "1"], "runs must be an integer >= 2"),
])
def test_an_infeasible_target_or_too_few_runs_is_refused(records, capsys, extra, message):
    assert _audit(records, *extra) == 2
    assert message in capsys.readouterr().err


def test_a_missing_input_is_refused(tmp_path, capsys):
    assert _audit(str(tmp_path / "none.jsonl")) == 2
    assert capsys.readouterr().err.startswith("triehh audit: error:")
