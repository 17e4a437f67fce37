"""`triehh plan --protocol sample-threshold`: the whole-item plan (tau, p_s for one release; exact
accounting unless --accounting bound, the other's plan beside it) as text and JSON, its release
table exact (P(Binomial(holders, p_s) >= tau) crosses each probability at the row's holders), a
target above epsilon 1 a plan under exact accounting and shown infeasible with the reason under
the bound, and trie-only flags refused."""

import json
import math
import os
import shlex
import subprocess
import sys

import pytest

from tests.cli_runs import run_cli
from triehh_beam import cli
from triehh_beam.evaluation import plans as evaluation_plans
from triehh_beam.io.write import write_records
from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.accounting.exact_accountant import release_delta
from triehh_beam.protocol.central.whole_items import plan_whole_items, release_probability

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = ["plan", "--population", "200000", "--epsilon", "1", "--delta", "1e-8", "--max-length", "10",
        "--protocol", "sample-threshold"]


def test_plan_text_and_json_are_the_whole_item_planners(capsys):
    expected = plan_whole_items(1, 1e-8)
    assert expected.accounting == "exact"  # the default
    code, out, err = run_cli(capsys, PLAN)
    assert code == 0 and err == ""
    assert "whole items, one release" in out and "FEASIBLE" in out
    assert f"threshold tau             {expected.tau} reports" in out
    assert f"{100 * expected.sampling_probability:.6g}% of users" in out
    # The delta shown is the exact accountant's at the (epsilon, p_s, tau) shown, recomputed here.
    delta = release_delta(1.0, expected.sampling_probability, expected.tau).delta
    assert delta <= 1e-8 and f"achieved delta            {delta:.6g} (target 1e-08)" in out
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.strip()]
    assert "alpha" not in rows and "C_alpha" not in out  # the bound's, not shown under exact
    flat = " ".join(out.split())
    assert "accounting exact: one count's hockey-stick divergence" in flat
    bound = plan_whole_items(1, 1e-8, accounting="bound")
    assert (f"under bound tau = {bound.tau}, p_s = {100 * bound.sampling_probability:.4g}%, delta = "
            f"{bound.delta:.4g}: {st.min_holders(0.9, bound.sampling_probability, bound.tau, 1):,} holders for "
            f"90% release") in flat
    code, out, _ = run_cli(capsys, PLAN + ["--json"])
    report = json.loads(out)
    assert report["protocol"] == "sample-threshold" and report["releases"] == 1
    for key in ("alpha", "tau", "sampling_probability", "epsilon", "delta", "holders", "accounting"):
        assert report[key] == getattr(expected, key), key
    assert report["delta"] == report["round_delta"] == delta
    p, tau = report["sampling_probability"], report["tau"]
    for row in report["release"]:
        assert release_probability(row["count"], p, tau) >= row["probability"]
        assert release_probability(row["count"] - 1, p, tau) < row["probability"]
        assert row["count"] == st.min_holders(row["probability"], p, tau, 1)
    assert report["release"][1]["count"] == expected.holders
    other = report["other_accounting"]
    assert other["accounting"] == "bound" and (other["tau"], other["sampling_probability"], other["holders"]) == (
        bound.tau, bound.sampling_probability, bound.holders)


def test_plan_under_the_bound_shows_alpha_and_its_closed_form(capsys):
    expected = plan_whole_items(1, 1e-8, accounting="bound")
    code, out, err = run_cli(capsys, PLAN + ["--accounting", "bound"])
    assert code == 0 and err == ""
    alpha, tau = expected.alpha, expected.tau
    c_alpha = math.log(1 / alpha) - 1 / (1 + alpha)  # the bound's closed form, computed here
    assert expected.sampling_probability == pytest.approx(alpha * (1 - math.exp(-1)), rel=1e-12)
    flat = " ".join(out.split())
    assert f"alpha {alpha:.6g} (p_s = alpha (1 - e^-epsilon); C_alpha = ln(1/alpha) - 1/(1+alpha) = {c_alpha:.4g})" in flat
    assert f"threshold tau             {tau} reports" in out
    assert math.exp(-c_alpha * tau) <= 1e-8
    assert f"achieved delta            {math.exp(-c_alpha * tau):.6g} = exp(-C_alpha tau) (target 1e-08)" in out
    assert "target epsilon            1 (the bound needs epsilon <= 1)" in out
    exact_plan = plan_whole_items(1, 1e-8)
    assert f"under exact tau = {exact_plan.tau}, p_s = {100 * exact_plan.sampling_probability:.4g}%" in flat
    report = json.loads(run_cli(capsys, PLAN + ["--accounting", "bound", "--json"])[1])
    assert report["accounting"] == "bound" and "recompute_round_delta" not in report
    for key in ("alpha", "c_alpha", "tau", "sampling_probability", "epsilon", "delta", "holders"):
        assert report[key] == getattr(expected, key), key


def test_plan_under_the_bound_above_epsilon_one_is_infeasible_with_the_reason(capsys):
    code, out, _ = run_cli(capsys, ["plan", "--population", "1e5", "--epsilon", "4", "--delta", "1e-8",
                                 "--max-length", "10", "--protocol", "sample-threshold", "--accounting", "bound"])
    assert code == 0
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.strip()]
    assert not {"alpha", "threshold", "sample", "achieved"} & set(rows)  # no clipped plan
    flat = " ".join(out.split())
    assert "INFEASIBLE" in flat and "epsilon <= 1" in flat and "--epsilon 1" in flat
    exact_plan = plan_whole_items(4, 1e-8)
    assert f"under exact tau = {exact_plan.tau}, p_s = {100 * exact_plan.sampling_probability:.4g}%" in flat


def test_plan_above_epsilon_one_is_a_plan_under_exact_accounting(capsys):
    code, out, err = run_cli(capsys, ["plan", "--population", "1e5", "--epsilon", "4", "--delta", "1e-8",
                                   "--max-length", "10", "--protocol", "sample-threshold", "--json"])
    assert code == 0 and err == ""
    report = json.loads(out)
    assert report["feasible"] and report["accounting"] == "exact" and report["epsilon"] == 4.0
    p, tau = report["sampling_probability"], report["tau"]
    # One release: its delta is the exact accountant's at (4, p_s, tau), recomputed here.
    assert report["delta"] == release_delta(4.0, p, tau).delta <= 1e-8
    assert report["release"][1]["count"] == st.min_holders(0.9, p, tau, 1)
    # A larger epsilon buys a larger sample than epsilon 1 at the same delta.
    assert report["holders"] < plan_whole_items(1, 1e-8).holders
    other = report["other_accounting"]
    assert other["accounting"] == "bound" and not other["feasible"] and "epsilon <= 1" in other["reason"]


def test_plan_json_recomputes_its_delta_with_the_command_it_prints(capsys, tmp_path):
    report = json.loads(run_cli(capsys, PLAN + ["--json"])[1])
    expected = plan_whole_items(1, 1e-8)
    for key in ("sampling_probability", "tau", "epsilon", "delta", "accounting"):
        assert report[key] == getattr(expected, key), key
    assert report["rounds"] == 1 and report["round_delta"] == report["delta"]
    argv = shlex.split(report["recompute_round_delta"])
    assert argv[:2] == ["python", "-c"]
    ran = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert ran.returncode == 0, ran.stderr
    assert float(ran.stdout) == report["delta"]


@pytest.mark.parametrize("extra", [["--rule", "corollary1"], ["--compare-units"], ["--item-length", "3"],
                                   ["--estimate-frequencies", "1"]])
def test_trie_only_flags_are_refused(capsys, extra):
    code, out, err = run_cli(capsys, PLAN + extra)
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


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_evaluate_pipeline_and_simulate_release_the_same_and_an_epsilon_above_one_is_planned_exactly(
        words, tmp_path, capsys):
    # Four real pipeline releases (in-process runner, 2,300 users, ~3 s each) through the command
    # line, and the simulate engine with the same run seeds and work directory (each run keyed
    # by its job identity): the same items and counts, run by run. evaluate has no --accounting:
    # it plans as discover does by default, exactly, so epsilon 2 (outside the bound's theorem)
    # runs beside epsilon 1, on both engines alike.
    work_dir = str(tmp_path / "runs")
    argv = ["evaluate", "--input", words, "--epsilon", "1,2", "--delta", "1e-6", "--max-length", "4",
            "--runs", "2", "--top-k", "3", "--rivals", "exact", "--no-progress", "--work-dir", work_dir,
            "--protocol", "sample-threshold"]
    plans = {epsilon: plan_whole_items(epsilon, 1e-6) for epsilon in (1, 2)}
    results = {}
    for engine in ("pipeline", "simulate"):
        code = cli.main(argv + ["--engine", engine, "--output", str(tmp_path / engine)])
        out, err = capsys.readouterr()
        assert code == 0, err
        for epsilon, plan in plans.items():
            assert f"sample-and-threshold, whole items ε={epsilon} (tau={plan.tau})" in out
        assert "skipped" not in out
        results[engine] = json.loads((tmp_path / engine / "evaluation.json").read_text(encoding="utf-8"))
    piped, simulated = results["pipeline"], results["simulate"]
    assert piped["triehh"] == [] and piped["infeasible"] == []
    assert len(piped["sample_threshold"]) == len(simulated["sample_threshold"]) == 2
    for a, b, (epsilon, plan) in zip(piped["sample_threshold"], simulated["sample_threshold"], plans.items(),
                                     strict=True):
        assert a["runs"] == [dict(r, seconds=ra["seconds"]) for r, ra in zip(b["runs"], a["runs"], strict=True)]
        assert a["metrics"] == b["metrics"] and a["items"] == b["items"] and a["estimates"] == b["estimates"]
        p = a["privacy"]
        assert p == b["privacy"] and p["accounting"] == "exact"
        assert (p["tau"], p["sampling_probability"]) == (plan.tau, plan.sampling_probability)
        # The release's delta, recomputed from the (epsilon, p_s, tau) it states.
        assert p["delta"] == release_delta(epsilon, plan.sampling_probability, plan.tau).delta <= 1e-6
        assert "C_alpha" not in p["guarantee"]
        rows = {row["item"]: row for row in a["items"]}
        assert rows["d"]["bound"] == release_probability(120, plan.sampling_probability, plan.tau)
        assert all(set(run["released"]) >= {"aa", "ab", "b"} for run in a["runs"])
        assert all(count >= plan.tau for run in a["runs"] for count in run["released"].values())
        assert [e["item"] for e in a["estimates"][:3]] == ["aa", "ab", "b"]
    # The larger epsilon samples more users at the same delta.
    assert plans[2].sampling_probability > plans[1].sampling_probability


def test_evaluate_lists_an_infeasible_whole_item_target(words, tmp_path, capsys, monkeypatch):
    # As for TrieHH++ (test_cli_sample_threshold.py): no target evaluate accepts is infeasible
    # under exact accounting in practice and evaluate has no --accounting, so its planner is
    # replaced by the bound's, where epsilon 2 > 1 is refused: skipped and said, epsilon 1 runs.
    monkeypatch.setattr(evaluation_plans, "plan_whole_items",
                        lambda epsilon, delta: plan_whole_items(epsilon, delta, accounting="bound"))
    code = cli.main(["evaluate", "--input", words, "--epsilon", "1,2", "--delta", "1e-6", "--max-length", "4",
                     "--runs", "1", "--top-k", "3", "--rivals", "exact", "--no-progress", "--engine", "simulate",
                     "--protocol", "sample-threshold", "--output", str(tmp_path / "e")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "skipped sample-threshold epsilon=2 unit size 1: infeasible" in out and "epsilon <= 1" in out
    result = json.loads((tmp_path / "e" / "evaluation.json").read_text(encoding="utf-8"))
    [config] = result["sample_threshold"]
    assert config["privacy"]["accounting"] == "bound"
    assert [(entry["protocol"], entry["epsilon"]) for entry in result["infeasible"]] == [("sample-threshold", 2.0)]


def test_a_target_just_above_one_is_refused_under_the_bound_showing_the_value_given(capsys, tmp_path):
    """1.0000001 was shown as "epsilon = 1 is outside it", beside a bound of 1: the refusal
    (plan and discover alike, under --accounting bound) shows every digit it takes, and the bound."""
    code, out, _ = run_cli(capsys, ["plan", "--population", "1e5", "--epsilon", "1.0000001", "--delta", "1e-8",
                                 "--max-length", "10", "--protocol", "sample-threshold", "--accounting", "bound"])
    flat = " ".join(out.split())
    assert code == 0 and "INFEASIBLE" in flat
    assert "target epsilon 1.0000001 (the bound needs epsilon <= 1)" in flat
    assert "epsilon = 1.0000001 > 1 is outside it" in flat and "epsilon = 1 is" not in flat
    records = tmp_path / "records.jsonl"
    write_records(str(records), [(f"u{i}", "to", 1) for i in range(100)])
    code, out, err = run_cli(capsys, ["discover", "--input", str(records), "--output", str(tmp_path / "out"),
                                   "--epsilon", "1.0000001", "--delta", "1e-8", "--max-length", "4",
                                   "--protocol", "sample-threshold", "--accounting", "bound"])
    assert code == 2 and "epsilon = 1.0000001 > 1 is outside it" in err, err
