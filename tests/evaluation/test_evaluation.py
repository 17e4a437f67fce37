"""Tests of the evaluation (triehh_beam/evaluation.py) and of ``triehh evaluate``
(triehh_beam/cli/measure/evaluate.py).

Statistical tests run at fixed seeds, so they are deterministic; each states its tolerance.
The pipeline engine is run once (two runs on a tiny population) and compared with the keyed
simulation run by run.
"""

import json
import math
import os

import numpy as np
import pytest
from scipy import stats

from triehh_beam.cli.measure import evaluate as evaluate_cli
from triehh_beam.evaluation import experiment as evaluation
from triehh_beam.io.write import write_records
from triehh_beam.protocol.planning import planner
from triehh_beam.reference import metrics
from triehh_beam.reference import stats as eval_stats

# --------------------------------------------------------------------------------------------
# A tiny population with a known truth (n = 2000, one item per user).
# "toolong" does not fit L = 4 (3 characters at most): it is in the truth, never discoverable.

SMALL = {"aa": 600, "ab": 400, "b": 300, "toolong": 250, "cc": 200, "d": 150, "e": 100}


def _rows(counts, start=0):
    rows, user = [], start
    for item, holders in counts.items():
        for _ in range(holders):
            rows.append((user, item))
            user += 1
    return rows


@pytest.fixture(scope="module")
def small_input(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("small") / "records.jsonl")
    write_records(path, _rows(SMALL))
    return path


def _config(path, **overrides):
    settings = dict(
        input_pattern=path, epsilons=(8.0,), delta=1e-3, max_length=4, runs=4, top_k=(2, 5),
        engine="simulate", rivals=("exact",),
    )
    settings.update(overrides)
    return evaluation.EvaluationConfig(**settings)


# --------------------------------------------------------------------------------------------
# Statistics helpers.


def test_mean_ci_is_the_t_interval():
    values = [0.5, 0.7, 0.9, 0.6]
    got = eval_stats.mean_ci(values, 0.95)
    mean, sd = np.mean(values), np.std(values, ddof=1)
    half = stats.t.ppf(0.975, 3) * sd / 2
    assert got["mean"] == pytest.approx(mean)
    assert got["sd"] == pytest.approx(sd)
    assert got["ci"] == pytest.approx([mean - half, min(1.0, mean + half)])
    assert eval_stats.mean_ci([1.0, 1.0])["ci"] == [1.0, 1.0]
    assert eval_stats.mean_ci([0.3])["ci"] is None
    assert eval_stats.mean_ci([])["mean"] is None
    # Clipped to [0, 1] by default, not with other bounds.
    assert eval_stats.mean_ci([0.0, 1.0])["ci"] == [0.0, 1.0]
    assert eval_stats.mean_ci([0.0, 1.0], bounds=None)["ci"][0] < 0


def test_wilson_interval():
    # Known value: 0 successes of 10 at 95% -> [0, 0.2775].
    lo, hi = eval_stats.wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = eval_stats.wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert eval_stats.wilson_interval(10, 10)[1] == 1.0


def test_run_seeds_are_distinct_deterministic_and_secret_sized():
    seeds = [evaluation.run_seed(0, j) for j in range(50)]
    assert len(set(seeds)) == 50 and all(len(s) == 32 for s in seeds)
    assert evaluation.run_seed(0, 3) == evaluation.run_seed(0, 3) != evaluation.run_seed(1, 3)


# --------------------------------------------------------------------------------------------
# Configuration.


def test_config_validation_and_unit_sizes(small_input):
    config = _config(small_input, epsilons=(4, 1, 4), unit_sizes=(2, 1), top_k=(5, 2))
    assert config.epsilons == (1.0, 4.0) and config.unit_sizes == (1, 2) and config.top_k == (2, 5)
    assert [config.max_length_for(k) for k in (1, 2, 3)] == [4, 3, 2]
    assert config.encoder(2).max_length == 3
    for bad in (
        dict(epsilons=()), dict(epsilons=(0,)), dict(delta=1.5), dict(max_length=1), dict(runs=0),
        dict(engine="spark"), dict(rivals=("rappor",)), dict(top_k=(0,)), dict(input_format="xml"),
        dict(rule="mine"), dict(seed=-1), dict(unit_sizes=(0,)),
    ):
        with pytest.raises(ValueError):
            _config(small_input, **bad)


# --------------------------------------------------------------------------------------------
# Metrics wiring on a hand-made population.


@pytest.fixture(scope="module")
def small_result(small_input):
    return evaluation.run_evaluation(_config(small_input))


def test_truth_and_data_source(small_result, small_input):
    source = small_result["data_source"]
    assert source["users"] == 2000 and source["records"] == 2000 and source["distinct_items"] == 7
    assert source["files"] == [small_input]
    ranking = [(row["item"], row["users"]) for row in small_result["truth"]]
    assert ranking == sorted(SMALL.items(), key=lambda kv: -kv[1])
    assert small_result["schema"] == evaluation.SCHEMA
    json.dumps(small_result)  # JSON-ready


def test_metrics_are_the_metrics_of_each_run(small_result):
    (config,) = small_result["triehh"]
    plan = planner.plan(2000, 8.0, 1e-3, 4)
    assert config["privacy"]["theta"] == plan.theta and config["privacy"]["batch_size"] == plan.batch_size
    assert config["privacy"]["epsilon"] == pytest.approx(plan.epsilon)
    assert config["privacy"]["all_runs_composed"]["epsilon"] == pytest.approx(4 * plan.epsilon)
    runs = [run["heavy_hitters"] for run in config["runs"]]
    assert len(runs) == 4
    for block in config["metrics"]:
        k = block["k"]
        assert block["recall"]["values"] == [metrics.recall_at_k(r, SMALL, k) for r in runs]
        assert block["f1"]["values"] == [metrics.f1_at_k(r, SMALL, k) for r in runs]
        assert block["ncr"]["values"] == [metrics.ncr_at_k(r, SMALL, k) for r in runs]
        assert block["recall"]["mean"] == pytest.approx(np.mean(block["recall"]["values"]))
    # The heavy items are found every time at epsilon = 8; "toolong" never (too long for L).
    by_item = {row["item"]: row for row in config["items"]}
    assert by_item["aa"]["rate"] == 1.0 and by_item["aa"]["length"] == 3
    assert by_item["toolong"]["rate"] == 0.0 and by_item["toolong"]["length"] is None
    assert by_item["toolong"]["bound"] == 0.0
    # Best possible recall@5 misses "toolong": 4/5.
    reachable = {row["k"]: row["recall"] for row in config["reachable"]}
    assert reachable == {2: 1.0, 5: 0.8}
    # Growth: round 1 keeps at least "a" and "b"; a stopped run counts 0 prefixes.
    assert config["growth"][0]["mean"] >= 2
    assert len(config["growth"]) == 4
    for run in config["runs"]:
        assert run["rounds"] >= len(run["level_sizes"])


def test_exact_rival_is_the_ceiling(small_result):
    exact = small_result["rivals"]["exact"]
    assert [b["k"] for b in exact["metrics"]] == [2, 5]
    for block in exact["metrics"]:
        assert block["recall"]["mean"] == block["f1"]["mean"] == block["ncr"]["mean"] == 1.0
    assert exact["metrics"][1]["heavy_hitters"] == ["aa", "ab", "b", "toolong", "cc"]


def test_ties_are_resolved_as_metrics_does(tmp_path):
    # "x" and "y" tie for the second place: a run finding either has recall@2 = 1.
    path = str(tmp_path / "ties.csv")
    write_records(path, _rows({"w": 900, "x": 500, "y": 500, "z": 100}))
    result = evaluation.run_evaluation(_config(path, runs=2, top_k=(2,)))
    block = result["triehh"][0]["metrics"][0]
    assert block["recall"]["values"] == [1.0, 1.0]


def test_infeasible_targets_are_skipped_and_said(small_input):
    result = evaluation.run_evaluation(_config(small_input, epsilons=(0.05, 8.0), runs=1, rivals=()))
    assert [c["epsilon"] for c in result["triehh"]] == [8.0]
    (skipped,) = result["infeasible"]
    assert skipped["epsilon"] == 0.05 and skipped["reason"]


def test_pem_rival_runs_once_per_epsilon_k_and_run(small_input):
    result = evaluation.run_evaluation(_config(small_input, runs=2, rivals=("pem",), top_k=(2,)))
    (config,) = result["rivals"]["pem"]["configurations"]
    assert config["privacy"]["model"] == "local" and config["epsilon"] == 8.0
    (block,) = config["metrics"]
    assert block["parameters"]["k"] == 2 and block["parameters"]["n_bytes"] == 3
    assert block["parameters"]["candidates"] == 4  # the default factor 2
    assert len(block["runs"]) == 2
    assert block["recall"]["values"] == [metrics.recall_at_k(r["heavy_hitters"], SMALL, 2) for r in block["runs"]]


def test_progress_counts_every_run(small_input):
    events = []

    class Recorder(evaluation.Progress):
        def start(self, total):
            events.append(("start", total))

        def advance(self, label):
            events.append(("run", label))

    evaluation.run_evaluation(_config(small_input, runs=3, rivals=("pem",), top_k=(2,)), progress=Recorder())
    assert events[0] == ("start", 3 + 3)
    assert len(events) == 1 + 6


# --------------------------------------------------------------------------------------------
# Proposition 1 on a population where it is exact.
#
# n = 2000 users; items "a".."f" share no prefix (distinct single characters, length 2 units
# with the terminator), one item per user; the other 1450 users hold an item too long for
# L = 3 (sampled, never voting). Then an item's discovery probability *is* Proposition 1's
# P(X >= theta)^2 (theta = 7, m = 210 here), and with R = 150 runs its rate is within 4.5 sd of
# it (sd = sqrt(b(1-b)/R); two-sided tail 7e-6 per item) plus 0.01.

NO_SHARED_PREFIX = {"a": 45, "b": 60, "c": 75, "d": 90, "e": 120, "f": 160}
PROP1_RUNS = 150


def test_discovery_rate_matches_proposition_1_without_shared_prefixes(tmp_path):
    path = str(tmp_path / "prop1.parquet")
    fillers = 2000 - sum(NO_SHARED_PREFIX.values())
    write_records(path, _rows(NO_SHARED_PREFIX) + _rows({"zzzz": fillers}, start=10_000))
    config = evaluation.EvaluationConfig(
        input_pattern=path, epsilons=(4.0,), delta=1e-3, max_length=3, runs=PROP1_RUNS,
        top_k=(6,), engine="simulate", rivals=(),
    )
    result = evaluation.run_evaluation(config)
    (triehh,) = result["triehh"]
    rows = {row["item"]: row for row in triehh["items"]}
    spread = 0
    for item in NO_SHARED_PREFIX:
        row = rows[item]
        bound = row["bound"]
        assert row["length"] == 2
        tolerance = 4.5 * math.sqrt(bound * (1 - bound) / PROP1_RUNS) + 0.01
        assert row["rate"] >= bound - tolerance, (item, row)
        assert abs(row["rate"] - bound) <= tolerance, (item, row)
        assert row["rate_ci"][0] <= row["rate"] <= row["rate_ci"][1]
        spread += 0.05 < bound < 0.95
    assert spread >= 3  # the test covers the rising part of the curve, not only 0s and 1s
    assert not result["warnings"]


def test_several_items_per_user_are_flagged(tmp_path):
    path = str(tmp_path / "multi.jsonl")
    rows = _rows({"aa": 1500, "b": 500}) + [(0, "b")]
    write_records(path, rows)
    result = evaluation.run_evaluation(_config(path, runs=1, rivals=()))
    assert result["data_source"]["users_with_several_items"] == 1
    assert any("several items" in w for w in result["warnings"])


def test_the_console_says_when_proposition_1_is_no_bound(tmp_path, capsys):
    # Issue 15: with several items per user, say so where the results are printed too.
    path = str(tmp_path / "multi.jsonl")
    write_records(path, _rows({"aa": 1500, "b": 500}) + [(0, "b")])
    code = evaluate_cli.main([
        "--input", path, "--epsilon", "4", "--delta", "1e-3", "--max-length", "4", "--runs", "1",
        "--top-k", "2", "--engine", "simulate", "--rivals", "exact",
        "--output", str(tmp_path / "out"), "--no-progress",
    ])
    assert code == 0
    printed = capsys.readouterr().out
    assert "warning: some users hold several items" in printed
    assert "triehh plan --items-per-user K" in printed


# --------------------------------------------------------------------------------------------
# The command line: simulate engine, errors, and the pipeline engine against the simulation.


def test_evaluate_command_end_to_end_with_the_simulation(tmp_path, capsys):
    path = str(tmp_path / "records.csv")
    write_records(path, _rows(SMALL))
    out = str(tmp_path / "out")
    code = evaluate_cli.main([
        "--input", path, "--epsilon", "4,8", "--delta", "1e-3", "--max-length", "4",
        "--unit-size", "1,2", "--runs", "2", "--top-k", "2,3", "--engine", "simulate",
        "--rivals", "pem,exact", "--output", out, "--no-progress",
    ])
    assert code == 0
    printed = capsys.readouterr().out
    assert "recall@2" in printed and "PEM" in printed and "exact top-K" in printed
    with open(os.path.join(out, "evaluation.json"), encoding="utf-8") as f:
        result = json.load(f)
    # TrieHH at epsilon 8, unit size 2 (L = 3): its plan's m is within the crowding guard's reach
    # (Theorem 1 unproven there), so it is listed as infeasible and skipped, not run.
    assert {(c["epsilon"], c["unit_size"]) for c in result["triehh"]} == {(4, 1), (4, 2), (8, 1)}
    assert [(c["epsilon"], c["unit_size"]) for c in result["infeasible"]] == [(8, 2)]
    assert "crowding" in result["infeasible"][0]["reason"]
    assert {c["max_length"] for c in result["triehh"]} == {4, 3}
    # --max-length 4 counts units of the smallest unit size (1): items of up to 3 characters.
    assert result["parameters"]["max_length"] == 4 and result["parameters"]["max_characters"] == 3
    assert result["parameters"]["max_length_by_unit_size"] == {"1": 4, "2": 3}
    assert result["parameters"]["engine"] == "simulate"
    for name in ("report.html", "recall_at_k.png", "discovery_rate_u1.png", "discovery_rate_u2.png",
                 "recall_vs_unit_size.png", "trie_growth.png"):
        assert os.path.getsize(os.path.join(out, name)) > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "1", "--delta", "2"], "delta"),
        (["--rivals", "rappor"], "rival"),
        (["--runs", "0"], "runs"),
        (["--protocol", "partition-selection"], "not evaluated by triehh evaluate yet"),
        (["--protocol", "noisy-rounds"], "noisy-rounds is not evaluated by triehh evaluate yet"),
    ],
)
def test_evaluate_command_refuses_bad_arguments(argv, message, small_input, tmp_path, capsys):
    base = {"--input": small_input, "--epsilon": "1", "--delta": "1e-3", "--max-length": "4",
            "--output": str(tmp_path / "o")}
    for flag, value in zip(argv[::2], argv[1::2]):
        base[flag] = value
    args = [part for pair in base.items() for part in pair] + ["--engine", "simulate"]
    assert evaluate_cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_evaluate_command_reports_unusable_input_in_one_line(tmp_path, capsys):
    code = evaluate_cli.main(["--input", str(tmp_path / "missing-*.parquet"), "--epsilon", "1",
                              "--delta", "1e-3", "--max-length", "4", "--output", str(tmp_path / "o"),
                              "--engine", "simulate"])
    assert code == 2
    err = capsys.readouterr().err
    assert "no records files match" in err and len(err.strip().splitlines()) == 1
    # Beam options make sense only for the pipeline engine.
    path = str(tmp_path / "r.jsonl")
    write_records(path, _rows({"a": 10}))
    code = evaluate_cli.main(["--input", path, "--epsilon", "1", "--delta", "1e-3", "--max-length", "4",
                              "--output", str(tmp_path / "o"), "--engine", "simulate", "--runner=FlinkRunner"])
    assert code == 2


def test_evaluate_command_refuses_a_flag_beam_does_not_define(small_input, tmp_path, capsys):
    # Beam would drop it with a warning and the evaluation would run without it.
    code = evaluate_cli.main(["--input", small_input, "--epsilon", "1", "--delta", "1e-3",
                              "--max-length", "4", "--output", str(tmp_path / "o"), "--engine", "pipeline",
                              "--direct_num_workers=1", "--direct-num-workers=2"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown argument --direct-num-workers" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_register_evaluate_adds_the_subcommand():
    import argparse

    parser = argparse.ArgumentParser(prog="triehh")
    subparsers = parser.add_subparsers(dest="command")
    evaluate_cli.register_evaluate(subparsers)
    args, extra = parser.parse_known_args(
        ["evaluate", "--input", "x.csv", "--epsilon", "1,2", "--delta", "1e-9", "--max-length", "8",
         "--output", "o", "--direct_num_workers=2"])
    assert args.accepts_beam_args and callable(args.handler)
    assert args.epsilon == (1.0, 2.0) and args.rivals == ("pem", "exact") and args.engine == "pipeline"
    assert extra == ["--direct_num_workers=2"]


def test_pipeline_engine_matches_the_keyed_simulation_run_by_run(tmp_path):
    # Two real pipeline runs (in-process runner) on 1,200 users, through the command line; the
    # keyed simulation with the same seeds must grow the very same tries.
    path = str(tmp_path / "records.parquet")
    write_records(path, _rows({"aa": 400, "ab": 300, "ba": 250, "c": 150, "dd": 100}))
    out = str(tmp_path / "out")
    # One work directory for both engines: a run's samples are keyed by its job identity,
    # which includes its output path there.
    work_dir = str(tmp_path / "runs")
    argv = ["--input", path, "--epsilon", "8", "--delta", "1e-3", "--max-length", "4", "--runs", "2",
            "--top-k", "3", "--rivals", "none", "--output", out, "--no-progress", "--work-dir", work_dir]
    assert evaluate_cli.main(argv + ["--engine", "pipeline"]) == 0
    with open(os.path.join(out, "evaluation.json"), encoding="utf-8") as f:
        piped = json.load(f)
    simulated = evaluation.run_evaluation(evaluation.EvaluationConfig(
        input_pattern=path, epsilons=(8.0,), delta=1e-3, max_length=4, runs=2, top_k=(3,),
        engine="simulate", rivals=(), work_dir=work_dir))
    assert piped["parameters"]["engine"] == "pipeline"
    assert not piped["warnings"]
    for a, b in zip(piped["triehh"][0]["runs"], simulated["triehh"][0]["runs"], strict=True):
        for key in ("seed", "heavy_hitters", "frequent_prefixes", "rounds", "level_sizes"):
            assert a[key] == b[key], key
    assert piped["triehh"][0]["runs"][0]["heavy_hitters"] != []
    assert piped["triehh"][0]["metrics"] == simulated["triehh"][0]["metrics"]
