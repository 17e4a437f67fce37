"""`triehh plan --protocol sample-threshold`: the whole-item plan (alpha, tau, p_s for one release)
as text and JSON, its release table exact (P(Binomial(holders, p_s) >= tau) crosses each
probability at the row's holders), a target above epsilon 1 shown infeasible with the reason, and
trie-only flags refused."""

import json

import pytest

from triehh_beam import cli
from triehh_beam.io.write import write_records
from triehh_beam.protocol import sample_threshold as st
from triehh_beam.protocol.whole_items import plan_whole_items, release_probability

PLAN = ["plan", "--population", "200000", "--epsilon", "1", "--delta", "1e-8", "--max-length", "10",
        "--protocol", "sample-threshold"]


def _run(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_text_and_json_are_the_whole_item_planners(capsys):
    expected = plan_whole_items(1, 1e-8)
    code, out, err = _run(capsys, PLAN)
    assert code == 0 and err == ""
    assert "whole items, one release" in out and "FEASIBLE" in out
    assert f"threshold tau             {expected.tau} reports" in out
    assert f"alpha                     {expected.alpha:.6g}" in out
    assert f"{100 * expected.sampling_probability:.4g}% of users" in out
    code, out, _ = _run(capsys, PLAN + ["--json"])
    report = json.loads(out)
    assert report["protocol"] == "sample-threshold" and report["releases"] == 1
    for key in ("alpha", "tau", "sampling_probability", "epsilon", "delta", "holders"):
        assert report[key] == getattr(expected, key), key
    p, tau = report["sampling_probability"], report["tau"]
    for row in report["release"]:
        assert release_probability(row["count"], p, tau) >= row["probability"]
        assert release_probability(row["count"] - 1, p, tau) < row["probability"]
        assert row["count"] == st.min_holders(row["probability"], p, tau, 1)
    assert report["release"][1]["count"] == expected.holders


def test_plan_above_epsilon_one_is_infeasible_with_the_reason(capsys):
    code, out, _ = _run(capsys, ["plan", "--population", "1e5", "--epsilon", "4", "--delta", "1e-8",
                                 "--max-length", "10", "--protocol", "sample-threshold"])
    assert code == 0
    flat = " ".join(out.split())
    assert "INFEASIBLE" in flat and "epsilon <= 1" in flat and "--epsilon 1" in flat and "tau " not in flat


@pytest.mark.parametrize("extra", [["--rule", "corollary1"], ["--compare-units"], ["--item-length", "3"],
                                   ["--estimate-frequencies", "1"]])
def test_trie_only_flags_are_refused(capsys, extra):
    code, out, err = _run(capsys, PLAN + extra)
    assert code == 2 and "no meaning with --protocol sample-threshold" in err and out == ""


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    path = tmp_path_factory.mktemp("st") / "records.jsonl"
    rows, user = [], 0
    for item, holders in {"aa": 900, "ab": 600, "b": 400, "cc": 250, "d": 120, "e": 30}.items():
        rows += [(user + i, item) for i in range(holders)]
        user += holders
    write_records(str(path), rows)
    return str(path)


def test_evaluate_pipeline_and_simulate_release_the_same_and_an_epsilon_above_one_is_skipped(words, tmp_path,
                                                                                             capsys):
    # Two real pipeline releases (in-process runner, 2,300 users, ~3 s each) through the command
    # line, and the simulate engine with the same run seeds and work directory (each run keyed
    # by its job identity): the same items and counts, run by run; epsilon 2 is outside the theorem.
    work_dir = str(tmp_path / "runs")
    argv = ["evaluate", "--input", words, "--epsilon", "1,2", "--delta", "1e-6", "--max-length", "4",
            "--runs", "2", "--top-k", "3", "--rivals", "exact", "--no-progress", "--work-dir", work_dir,
            "--protocol", "sample-threshold"]
    results = {}
    for engine in ("pipeline", "simulate"):
        code = cli.main(argv + ["--engine", engine, "--output", str(tmp_path / engine)])
        out, err = capsys.readouterr()
        assert code == 0, err
        plan = plan_whole_items(1, 1e-6)
        assert f"sample-and-threshold, whole items ε=1 (tau={plan.tau})" in out
        assert "skipped sample-threshold epsilon=2 unit size 1: infeasible" in out
        results[engine] = json.loads((tmp_path / engine / "evaluation.json").read_text(encoding="utf-8"))
    piped, simulated = results["pipeline"], results["simulate"]
    [a], [b] = piped["sample_threshold"], simulated["sample_threshold"]
    assert a["runs"] == [dict(r, seconds=ra["seconds"]) for r, ra in zip(b["runs"], a["runs"], strict=True)]
    assert a["metrics"] == b["metrics"] and a["items"] == b["items"] and a["estimates"] == b["estimates"]
    p = a["privacy"]
    assert (p["alpha"], p["tau"], p["sampling_probability"]) == (plan.alpha, plan.tau, plan.sampling_probability)
    rows = {row["item"]: row for row in a["items"]}
    assert rows["d"]["bound"] == release_probability(120, plan.sampling_probability, plan.tau)
    assert all(set(run["released"]) >= {"aa", "ab", "b"} for run in a["runs"])
    assert all(count >= plan.tau for run in a["runs"] for count in run["released"].values())
    assert [e["item"] for e in a["estimates"][:3]] == ["aa", "ab", "b"]
    assert piped["triehh"] == [] and piped["infeasible"][0]["protocol"] == "sample-threshold"


def test_a_target_just_above_one_is_refused_showing_the_value_given(capsys, tmp_path):
    """1.0000001 was shown as "epsilon = 1 is outside it", beside a bound of 1: the refusal
    (plan and discover alike) shows every digit it takes, and the bound."""
    code, out, _ = _run(capsys, ["plan", "--population", "1e5", "--epsilon", "1.0000001", "--delta", "1e-8",
                                 "--max-length", "10", "--protocol", "sample-threshold"])
    flat = " ".join(out.split())
    assert code == 0 and "INFEASIBLE" in flat
    assert "target epsilon 1.0000001 (the theorem needs epsilon <= 1)" in flat
    assert "epsilon = 1.0000001 > 1 is outside it" in flat and "epsilon = 1 is" not in flat
    records = tmp_path / "records.jsonl"
    write_records(str(records), [(f"u{i}", "to", 1) for i in range(100)])
    code, out, err = _run(capsys, ["discover", "--input", str(records), "--output", str(tmp_path / "out"),
                                   "--epsilon", "1.0000001", "--delta", "1e-8", "--max-length", "4",
                                   "--protocol", "sample-threshold"])
    assert code == 2 and "epsilon = 1.0000001 > 1 is outside it" in err, err
