"""TrieHH++ at the command line: `triehh plan --protocol triehh++` shows the planner's choice (exact
accounting unless --accounting bound, the other's plan beside it; its JSON's recompute command
recomputes round_delta) and its discovery table (and the default plan a one-line comparison),
`--accounting` is refused where it has no meaning, `triehh evaluate --engine
simulate --protocol triehh++` runs it beside TrieHH, and `evaluate --engine pipeline` runs it
through the real pipeline and grows the keyed simulation's tries (`discover --protocol triehh++`
itself: tests/e2e/test_discover_sample_threshold.py)."""

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
from triehh_beam.protocol.accounting.composition import compose_rounds
from triehh_beam.protocol.accounting.exact_accountant import release_delta
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = ["plan", "--population", "100000", "--epsilon", "4", "--delta", "1e-8", "--max-length", "4"]


def test_plan_text_shows_the_exact_plan_and_the_bounds_beside_it(capsys):
    code, out, err = run_cli(capsys, PLAN + ["--unit-size", "3", "--protocol", "triehh++"])
    assert code == 0 and err == ""
    expected = plan_sample_threshold(4, 1e-8, 4)
    assert expected.accounting == "exact"  # the default
    assert "TrieHH++ plan" in out and "FEASIBLE" in out and "INFEASIBLE" not in out
    assert f"threshold tau             {expected.tau} votes" in out
    assert f"{100 * expected.sampling_probability:.6g}% of users per round" in out
    assert "eps_r = epsilon/L = 1," in out
    # The per-round delta is the exact accountant's at the (eps_r, p_s, tau) shown, and the
    # achieved delta its 4 rounds composed (the smaller of basic and PLD), within the target.
    round_delta = release_delta(1.0, expected.sampling_probability, expected.tau).delta
    assert f"per-round (eps, delta)    (1, {round_delta:.6g})" in out
    composed = compose_rounds(1.0, round_delta, 4)
    assert composed.delta <= 1e-8 and composed.delta <= 4 * round_delta
    assert f"achieved delta            {composed.delta:.6g} (target 1e-08)" in out
    # No alpha or C_alpha: they are the bound's.
    assert "alpha " not in out and "C_alpha" not in out
    flat = " ".join(out.split())  # the accounting rows are wrapped
    assert "accounting exact: one count's hockey-stick divergence, worst case over the other holders" in flat
    bound = plan_sample_threshold(4, 1e-8, 4, accounting="bound")
    assert (f"under bound tau = {bound.tau}, p_s = {100 * bound.sampling_probability:.4g}%, delta = "
            f"{bound.delta:.4g}: {st.min_holders(0.9, bound.sampling_probability, bound.tau, 4):,} holders "
            f"for 90% discovery") in flat
    for q in (0.5, 0.9, 0.99):
        count = st.min_holders(q, expected.sampling_probability, expected.tau, 4)
        assert f"{count:>18,}" in out
    assert "triehh discover --protocol triehh++ runs it" in out


def test_plan_text_under_the_bound_shows_alpha_and_c_alpha(capsys):
    code, out, err = run_cli(capsys, PLAN + ["--unit-size", "3", "--protocol", "triehh++", "--accounting", "bound"])
    assert code == 0 and err == ""
    expected = plan_sample_threshold(4, 1e-8, 4, accounting="bound")
    alpha, tau = expected.alpha, expected.tau
    # The bound's closed form, computed here: p_s = alpha (1 - e^-1), each round exp(-C_alpha tau).
    c_alpha = math.log(1 / alpha) - 1 / (1 + alpha)
    assert expected.sampling_probability == pytest.approx(alpha * (1 - math.exp(-1)), rel=1e-12)
    flat = " ".join(out.split())
    assert (f"alpha {alpha:.6g} (p_s = alpha (1 - e^-eps_r); C_alpha = ln(1/alpha) - 1/(1+alpha) = "
            f"{c_alpha:.4g}, round delta exp(-C_alpha tau))") in flat
    assert f"threshold tau             {tau} votes" in out
    assert f"{100 * expected.sampling_probability:.6g}% of users per round" in out
    assert f"per-round (eps, delta)    (1, {math.exp(-c_alpha * tau):.6g})" in out
    assert 4 * math.exp(-c_alpha * tau) <= 1e-8
    assert f"achieved delta            {4 * math.exp(-c_alpha * tau):.6g} (target 1e-08)" in out
    assert "accounting bound: the paper's delta = exp(-C_alpha tau), eps_r <= 1" in flat
    exact_plan = plan_sample_threshold(4, 1e-8, 4)
    assert f"under exact tau = {exact_plan.tau}, p_s = {100 * exact_plan.sampling_probability:.4g}%" in flat
    for q in (0.5, 0.9, 0.99):
        assert f"{st.min_holders(q, expected.sampling_probability, tau, 4):>18,}" in out


def test_plan_json_is_the_planners_plan(capsys):
    code, out, _ = run_cli(capsys, PLAN + ["--protocol", "triehh++", "--json", "--item-length", "3"])
    assert code == 0
    report = json.loads(out)
    expected = plan_sample_threshold(4, 1e-8, 4, length=3)
    assert report["protocol"] == "triehh++"
    for key in ("alpha", "tau", "sampling_probability", "epsilon", "delta", "round_delta", "holders"):
        assert report[key] == getattr(expected, key), key
    assert [row["probability"] for row in report["discovery"]] == [0.5, 0.9, 0.99]
    assert report["discovery"][1]["count"] == expected.holders  # the objective is 90% at length 3
    assert report["discovery"][1]["fraction"] == expected.holders / 100_000


def test_plan_under_the_bound_refuses_eps_r_above_one_with_the_reason_not_a_clipped_plan(capsys):
    code, out, _ = run_cli(capsys, ["plan", "--population", "1e5", "--epsilon", "4", "--delta", "1e-8",
                                 "--max-length", "2", "--protocol", "triehh++", "--accounting", "bound"])
    assert code == 0  # a plan, as TrieHH's infeasible ones are
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.strip()]
    assert not {"alpha", "threshold", "sample", "per-round", "achieved"} & set(rows)  # no clipped plan
    out = " ".join(out.split())  # the reason is wrapped
    assert "INFEASIBLE" in out and "eps_r = 2" in out and "at most epsilon = 2" in out
    # The exact plan of the same target is shown beside the refusal.
    exact_plan = plan_sample_threshold(4, 1e-8, 2)
    assert exact_plan.feasible
    assert (f"under exact tau = {exact_plan.tau}, p_s = {100 * exact_plan.sampling_probability:.4g}%, delta = "
            f"{exact_plan.delta:.4g}: {exact_plan.holders:,} holders for 90% discovery") in out


def test_plan_eps_r_above_one_is_a_plan_under_exact_accounting(capsys):
    # eps_r = 2 is outside the bound's theorem (above), not outside the exact accountant.
    code, out, err = run_cli(capsys, ["plan", "--population", "1e5", "--epsilon", "4", "--delta", "1e-8",
                                   "--max-length", "2", "--protocol", "triehh++", "--json"])
    assert code == 0 and err == ""
    report = json.loads(out)
    assert report["feasible"] and report["accounting"] == "exact" and report["epsilon_round"] == 2.0
    p, tau = report["sampling_probability"], report["tau"]
    assert 0 < p < 1 and tau >= 1
    # Recomputed from the (eps_r, p_s, tau) the plan states, not taken from it.
    round_delta = release_delta(2.0, p, tau).delta
    assert report["round_delta"] == round_delta <= 5e-9
    composed = compose_rounds(2.0, round_delta, 2)
    assert report["basic_delta"] == pytest.approx(2 * round_delta, rel=1e-12)
    assert report["delta"] == composed.delta == min(report["basic_delta"], report["pld_delta"]) <= 1e-8
    assert report["epsilon"] == 4.0
    assert report["discovery"][1]["count"] == st.min_holders(0.9, p, tau, 2)
    other = report["other_accounting"]
    assert other["accounting"] == "bound" and not other["feasible"] and "eps_r = 2 > 1" in other["reason"]
    code, text, _ = run_cli(capsys, ["plan", "--population", "1e5", "--epsilon", "4", "--delta", "1e-8",
                                  "--max-length", "2", "--protocol", "triehh++"])
    flat = " ".join(text.split())
    assert "FEASIBLE" in flat and "INFEASIBLE" not in flat.split("under bound")[0]
    assert "under bound infeasible: the sample-and-threshold theorem covers eps_r = epsilon/L <= 1" in flat


def test_plan_several_items_per_user_thins_the_votes(capsys):
    code, out, _ = run_cli(capsys, PLAN + ["--protocol", "triehh++", "--json", "--items-per-user", "2"])
    report = json.loads(out)
    p = report["sampling_probability"]
    count = report["discovery"][1]["count"]
    assert st.discovery_probability(count, p * 0.5, report["tau"], 4) >= 0.9
    assert st.discovery_probability(count - 1, p * 0.5, report["tau"], 4) < 0.9


def test_triehh_plan_mentions_triehh_plus_plus_in_one_line(capsys):
    code, out, _ = run_cli(capsys, PLAN + ["--protocol", "triehh"])
    assert code == 0
    out = " ".join(out.split())  # the line is wrapped
    expected = plan_sample_threshold(4, 1e-8, 4)
    assert f"TrieHH++ (sample-and-threshold) at the same target needs {expected.holders:,} holders" in out
    code, out, _ = run_cli(capsys, PLAN + ["--protocol", "triehh", "--json"])
    assert '"protocol": "triehh++"' not in out  # the JSON is TrieHH's plan only


def test_plan_json_states_the_plan_and_a_command_that_recomputes_its_round_delta(capsys, tmp_path):
    code, out, _ = run_cli(capsys, PLAN + ["--protocol", "triehh++", "--json"])
    assert code == 0
    report = json.loads(out)
    expected = plan_sample_threshold(4, 1e-8, 4)
    for key in ("sampling_probability", "tau", "epsilon", "delta", "accounting"):
        assert report[key] == getattr(expected, key), key
    assert report["accounting"] == "exact" and report["rounds"] == 4
    # The command, run as printed (from elsewhere, this checkout on PYTHONPATH), prints round_delta.
    argv = shlex.split(report["recompute_round_delta"])
    assert argv[:2] == ["python", "-c"]
    ran = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert ran.returncode == 0, ran.stderr
    assert float(ran.stdout) == report["round_delta"] == expected.round_delta
    assert report["round_delta"] == release_delta(report["epsilon_round"], report["sampling_probability"],
                                                  report["tau"]).delta
    # Under the bound there is no exact delta to recompute: the closed form is the plan.
    bound = json.loads(run_cli(capsys, PLAN + ["--protocol", "triehh++", "--json", "--accounting", "bound"])[1])
    assert bound["accounting"] == "bound" and "recompute_round_delta" not in bound
    assert bound["other_accounting"]["accounting"] == "exact" and bound["other_accounting"]["tau"] == expected.tau


@pytest.mark.parametrize("extra, message", [
    (["--accounting", "bound", "--protocol", "triehh"], "--accounting chooses how sample-and-threshold is "
                                                        "certified; TrieHH's plan is certified by Theorem 1"),
    (["--accounting", "exact", "--protocol", "triehh"], "TrieHH's plan is certified by Theorem 1"),
    (["--accounting", "bound", "--protocol", "triehh++", "--compare-units"],
     "--accounting is for one plan: --compare-units plans TrieHH++ with exact accounting"),
])
def test_plan_refuses_accounting_where_it_would_be_ignored(capsys, extra, message):
    code, out, err = run_cli(capsys, PLAN + extra)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("extra, message", [
    (["--plot", "p"], "--plot draws TrieHH's plots only"),
    (["--rule", "corollary1"], "--rule chooses TrieHH's theta"),
])
def test_plan_refuses_triehh_only_flags(capsys, extra, message):
    code, _, err = run_cli(capsys, PLAN + ["--protocol", "triehh++"] + extra)
    assert code == 2 and message in err


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    path = tmp_path_factory.mktemp("pp") / "records.jsonl"
    rows, user = [], 0
    for item, holders in {"aa": 900, "ab": 600, "b": 400, "cc": 250, "d": 120}.items():
        rows += [(user + i, item) for i in range(holders)]
        user += holders
    write_records(str(path), rows)
    return str(path)


def _evaluate(path, output, *extra):
    return cli.main(["evaluate", "--input", path, "--epsilon", "2,4", "--delta", "1e-6", "--max-length", "4",
                     "--runs", "3", "--top-k", "3", "--rivals", "exact", "--no-progress",
                     "--output", str(output), *extra])


def test_evaluate_simulate_runs_both_protocols_on_the_same_seeds(words, tmp_path, capsys):
    code = _evaluate(words, tmp_path / "e", "--engine", "simulate", "--protocol", "triehh,triehh++")
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "TrieHH++ ε=4, unit size 1 (L=4)" in out and "TrieHH ε=4, unit size 1 (L=4)" in out
    result = json.loads((tmp_path / "e" / "evaluation.json").read_text(encoding="utf-8"))
    assert result["parameters"]["protocols"] == ["triehh", "triehh++"]
    assert len(result["triehh"]) == len(result["triehh_pp"]) == 2
    for config in result["triehh_pp"]:
        plan = plan_sample_threshold(config["epsilon"], 1e-6, 4)
        p = config["privacy"]
        assert (p["alpha"], p["tau"], p["sampling_probability"]) == (plan.alpha, plan.tau, plan.sampling_probability)
        assert p["epsilon"] <= config["epsilon"] and p["delta"] <= 1e-6
        assert p["all_runs_composed"]["epsilon"] == pytest.approx(3 * p["epsilon"])
        rows = {row["item"]: row for row in config["items"]}
        # "b" (1 unit + terminator, no shared prefix) is bounded by the binomial closed form.
        assert rows["b"]["bound"] == st.discovery_probability(400, plan.sampling_probability, plan.tau, 2)
        seeds = [run["seed"] for run in config["runs"]]
        twin = next(c for c in result["triehh"] if c["epsilon"] == config["epsilon"])
        assert seeds == [run["seed"] for run in twin["runs"]]  # paired runs
    assert "aa" in result["triehh_pp"][1]["runs"][0]["heavy_hitters"]


@pytest.mark.slow  # four real pipeline runs: ~20 s on 2 shared cores
def test_evaluate_pipeline_runs_triehh_plus_plus_as_the_keyed_simulation_does(words, tmp_path, capsys):
    # Two real pipeline runs per protocol (in-process runner, 2,270 users) through the command
    # line; the simulate engine with the same run seeds and work directory (a run's samples are
    # keyed by its job identity, which holds its output path and protocol) must grow the very
    # same tries, TrieHH++'s as TrieHH's.
    work_dir = str(tmp_path / "runs")
    argv = ["evaluate", "--input", words, "--epsilon", "4", "--delta", "1e-6", "--max-length", "4",
            "--runs", "2", "--top-k", "3", "--rivals", "exact", "--no-progress", "--work-dir", work_dir,
            "--protocol", "triehh,triehh++"]
    results = {}
    for engine in ("pipeline", "simulate"):
        code = cli.main(argv + ["--engine", engine, "--output", str(tmp_path / engine)])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "TrieHH++ ε=4, unit size 1 (L=4)" in out and "TrieHH ε=4, unit size 1 (L=4)" in out
        results[engine] = json.loads((tmp_path / engine / "evaluation.json").read_text(encoding="utf-8"))
    piped, simulated = results["pipeline"], results["simulate"]
    assert piped["parameters"]["engine"] == "pipeline" and piped["parameters"]["protocols"] == ["triehh", "triehh++"]
    assert not piped["warnings"]
    for protocol in ("triehh", "triehh_pp"):
        assert len(piped[protocol]) == len(simulated[protocol]) == 1
        a, b = piped[protocol][0], simulated[protocol][0]
        for run_a, run_b in zip(a["runs"], b["runs"], strict=True):
            for key in ("seed", "heavy_hitters", "frequent_prefixes", "rounds", "level_sizes"):
                assert run_a[key] == run_b[key], (protocol, key)
        assert a["metrics"] == b["metrics"] and a["privacy"] == b["privacy"] and a["items"] == b["items"]
    pp = piped["triehh_pp"][0]
    assert pp["protocol"] == "triehh++" and "tau" in pp["privacy"]
    assert all("aa" in run["heavy_hitters"] for run in pp["runs"])
    # Paired runs, and the two protocols drew differently (TrieHH++'s identity names its protocol).
    assert [r["seed"] for r in pp["runs"]] == [r["seed"] for r in piped["triehh"][0]["runs"]]
    report = (tmp_path / "pipeline" / "report.html").read_text(encoding="utf-8")
    assert "TrieHH++ ε=4, unit size 1 (L=4)" in report and "TrieHH ε=4, unit size 1 (L=4)" in report


def test_evaluate_plans_eps_r_above_one_exactly(words, tmp_path, capsys):
    # evaluate has no --accounting: it plans TrieHH++ as discover does by default, exactly, where
    # epsilon 8 over L = 4 (eps_r = 2, outside the bound's theorem) is a plan.
    code = cli.main(["evaluate", "--input", words, "--epsilon", "8", "--delta", "1e-6", "--max-length", "4",
                     "--runs", "1", "--top-k", "3", "--rivals", "exact", "--no-progress", "--engine", "simulate",
                     "--protocol", "triehh,triehh++", "--output", str(tmp_path / "e")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "skipped" not in out and "TrieHH++ ε=8, unit size 1 (L=4)" in out
    result = json.loads((tmp_path / "e" / "evaluation.json").read_text(encoding="utf-8"))
    assert result["infeasible"] == [] and len(result["triehh"]) == 1
    [config] = result["triehh_pp"]
    p = config["privacy"]
    assert p["accounting"] == "exact" and p["epsilon_round"] == 2.0
    assert p["delta_round"] == release_delta(2.0, p["sampling_probability"], p["tau"]).delta
    assert p["delta"] == compose_rounds(2.0, p["delta_round"], 4).delta <= 1e-6 and p["epsilon"] <= 8
    assert "exp(-C_alpha tau)" not in p["guarantee"]


def test_evaluate_lists_an_infeasible_triehh_plus_plus_target(words, tmp_path, capsys, monkeypatch):
    # No target evaluate accepts is infeasible under exact accounting in practice (the planner
    # finds a p_s for any eps_r; a target it cannot meet searches 10,000 thresholds first), and
    # evaluate has no --accounting: its TrieHH++ planner is replaced by the bound's, where epsilon
    # 8 over L = 4 (eps_r = 2 > 1) is refused, to show an infeasible plan is skipped and said,
    # TrieHH still running.
    monkeypatch.setattr(evaluation_plans, "plan_triehh_pp",
                        lambda epsilon, delta, max_length: plan_sample_threshold(epsilon, delta, max_length,
                                                                                 accounting="bound"))
    code = cli.main(["evaluate", "--input", words, "--epsilon", "8", "--delta", "1e-6", "--max-length", "4",
                     "--runs", "1", "--top-k", "3", "--rivals", "exact", "--no-progress", "--engine", "simulate",
                     "--protocol", "triehh,triehh++", "--output", str(tmp_path / "e")])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "skipped triehh++ epsilon=8 unit size 1: infeasible" in out and "eps_r" in out
    result = json.loads((tmp_path / "e" / "evaluation.json").read_text(encoding="utf-8"))
    assert result["triehh_pp"] == [] and len(result["triehh"]) == 1
    assert result["infeasible"][0]["protocol"] == "triehh++"


def test_evaluate_rejects_an_unknown_protocol(words, tmp_path, capsys):
    code = _evaluate(words, tmp_path / "e", "--engine", "simulate", "--protocol", "triehh,pem")
    assert code == 2 and "unknown protocol 'pem'" in capsys.readouterr().err
