"""`triehh plan`: human and JSON output, exit codes, errors without tracebacks."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.cli_runs import run_cli
from triehh_beam import cli
from triehh_beam.protocol.planning import planner, utility

FEASIBLE = ["plan", "--protocol", "triehh", "--population", "100000", "--epsilon", "4", "--delta", "1e-10",
            "--max-length", "10"]
INFEASIBLE = ["plan", "--protocol", "triehh", "--population", "1e4", "--epsilon", "1", "--delta", "1e-8",
              "--max-length", "10"]


def test_feasible_plan_text(capsys):
    code, out, err = run_cli(capsys, FEASIBLE)
    assert code == 0 and err == ""
    assert "FEASIBLE" in out and "INFEASIBLE" not in out
    assert "threshold theta           14" in out
    assert "2,354 users per round" in out
    assert "achieved epsilon" in out and "3.99821" in out
    assert "achieved delta" in out and "1.251e-11" in out
    assert "worst case" in out
    for row in ("50%", "90%", "99%"):
        assert row in out
    p = planner.plan(100_000, 4, 1e-10, 10)
    need = utility.min_frequency_for_plan(p, 0.9)
    assert f"{need.count:,}" in out


def test_feasible_plan_json(capsys):
    code, out, err = run_cli(capsys, FEASIBLE + ["--json", "--unit-size", "2"])
    assert code == 0 and err == ""
    data = json.loads(out)
    for key in ("feasible", "theta", "gamma", "batch_size", "epsilon", "delta", "reason",
                "alternatives"):
        assert key in data
    p = planner.plan(100_000, 4, 1e-10, 10)
    assert data["feasible"] is True and data["reason"] is None and data["alternatives"] == []
    assert (data["theta"], data["batch_size"]) == (p.theta, p.batch_size)
    assert data["epsilon"] == p.epsilon and data["delta"] == p.delta
    assert data["unit_size"] == 2 and data["max_item_characters"] == 18
    assert data["item_length"] == 10 and data["item_length_is_worst_case"] is True
    assert [row["probability"] for row in data["discovery"]] == [0.5, 0.9, 0.99]
    for row in data["discovery"]:
        need = utility.min_frequency_for_plan(p, row["probability"])
        assert row["count"] == need.count and row["fraction"] == need.fraction


def test_item_length_option(capsys):
    code, out, _ = run_cli(capsys, FEASIBLE + ["--item-length", "4", "--json"])
    assert code == 0
    data = json.loads(out)
    assert data["item_length"] == 4 and data["item_length_is_worst_case"] is False
    code, worst, _ = run_cli(capsys, FEASIBLE + ["--json"])
    assert data["discovery"][1]["count"] < json.loads(worst)["discovery"][1]["count"]
    code, text, _ = run_cli(capsys, FEASIBLE + ["--item-length", "4"])
    assert "item of 4 units:" in text


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_items_per_user_plans_for_holders_of_several_items(capsys):
    # Issue 15: "users holding it" assumes one item per user; with K items a holder votes for
    # this one with probability 1/K, so more holders are needed than K times the one-item count.
    code, one, _ = run_cli(capsys, FEASIBLE)
    assert "Assumes one item per user" in one and "--items-per-user K" in one
    code, out, err = run_cli(capsys, FEASIBLE + ["--items-per-user", "4", "--json"])
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["items_per_user"] == 4 and data["item_share"] == 0.25
    p = planner.plan(100_000, 4, 1e-10, 10)
    for row in data["discovery"]:
        need = utility.min_frequency_for_plan(p, row["probability"], share=0.25)
        single = utility.min_frequency_for_plan(p, row["probability"])
        assert row["count"] == need.count > 4 * single.count
        assert row["user_equivalents"] == need.count / 4
    code, text, _ = run_cli(capsys, FEASIBLE + ["--items-per-user", "4"])
    assert "(holders of 4 items)" in text and "user-equivalents" in text
    need = utility.min_frequency_for_plan(p, 0.9, share=0.25)
    assert f"{need.count:,}" in text and "at least 1/4 of its records" in text
    code = cli.main(FEASIBLE + ["--items-per-user", "0.5"])
    assert code == 2


def test_infeasible_plan_text(capsys):
    code, out, err = run_cli(capsys, INFEASIBLE)
    assert code == 0 and err == ""
    assert "INFEASIBLE" in out
    assert "THETACEIL" in out and "gamma >= 1 fails" in out
    assert "lower theta to 9" in out and "3.215e-06" in out
    assert "raise epsilon to 1.3 " in out  # 1.28 (m = 100) fails the crowding guard (docs/protocol.md)
    assert "collect at least n = 16141" in out
    assert "Worst-case discovery" not in out


def test_infeasible_plan_json(capsys):
    code, out, _ = run_cli(capsys, INFEASIBLE + ["--json"])
    assert code == 0
    data = json.loads(out)
    assert data["feasible"] is False
    assert data["epsilon"] is None and data["delta"] is None
    assert "gamma >= 1" in data["reason"]
    assert (data["theta"], data["batch_size"]) == (12, 79)
    kinds = {a["kind"]: a for a in data["alternatives"]}
    assert set(kinds) == {"lower_theta", "raise_epsilon", "raise_population"}
    assert kinds["lower_theta"]["theta"] == 9 and kinds["lower_theta"]["batch_size"] == 105
    assert data["discovery"] == []


def test_rule_option(capsys):
    code, out, _ = run_cli(capsys, ["plan", "--protocol", "triehh", "-n", "1e5", "--epsilon", "4", "--delta", "0.001",
                                 "--max-length", "10", "--rule", "corollary1", "--json"])
    assert code == 0
    data = json.loads(out)
    assert data["rule"] == "corollary1" and data["theta"] == 10  # Corollary 1's floor
    code, out, _ = run_cli(capsys, ["plan", "--protocol", "triehh", "-n", "1e5", "--epsilon", "4", "--delta", "0.001",
                                 "--max-length", "10", "--json"])
    assert json.loads(out)["theta"] == 7  # the exact smallest theta


@pytest.mark.parametrize(
    "change, message",
    [
        (("--epsilon", "0"), "--epsilon"),
        (("--epsilon", "-1"), "--epsilon"),
        (("--epsilon", "nan"), "--epsilon"),
        (("--delta", "0"), "--delta"),
        (("--delta", "1"), "--delta"),
        (("--delta", "2"), "--delta"),
        (("--population", "0"), "--population"),
        (("--population", "1.5"), "--population"),
        (("--population", "many"), "--population"),
        (("--max-length", "0"), "--max-length"),
        (("--item-length", "11"), "--item-length"),
        (("--unit-size", "0"), "--unit-size"),
        (("--rule", "paper"), "--rule"),
        (("--epsilon", "100000"), "too large"),
    ],
)
def test_invalid_arguments_exit_2_with_one_line(capsys, change, message):
    argv = list(FEASIBLE)
    if change[0] in argv:
        argv[argv.index(change[0]) + 1] = change[1]
    else:
        argv += list(change)
    code, out, err = run_cli(capsys, argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_missing_arguments_and_command(capsys):
    code, _, err = run_cli(capsys, ["plan", "--protocol", "triehh", "--population", "100"])
    assert code == 2 and err.count("\n") == 1 and "required" in err
    code, _, err = run_cli(capsys, [])
    assert code == 2 and err.count("\n") == 1


def test_help_exits_0(capsys):
    code, out, _ = run_cli(capsys, ["plan", "--protocol", "triehh", "--help"])
    assert code == 0
    assert "--unit-size" in out and "units of K characters" in out


def test_subcommands_are_registered_by_functions():
    parser = cli.build_parser()
    args = parser.parse_args(FEASIBLE)
    assert args.command == "plan" and callable(args.handler)


@pytest.mark.slow
def test_python_dash_m(tmp_path):
    root = pathlib.Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ok = subprocess.run([sys.executable, "-m", "triehh_beam.cli", *INFEASIBLE],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "INFEASIBLE" in ok.stdout and ok.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "triehh_beam.cli", "plan", "--protocol", "triehh", "--population", "0",
                          "--epsilon", "1", "--delta", "1e-8", "--max-length", "10"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2
    assert bad.stdout == "" and bad.stderr.count("\n") == 1
    assert "Traceback" not in bad.stderr and "--population" in bad.stderr


def test_the_default_protocol_is_triehh_pp_with_exact_accounting(capsys):
    # issue 38: the default is the protocol certified exactly; TrieHH is --protocol triehh.
    code, out, _ = run_cli(capsys, ["plan", "-n", "100000", "--epsilon", "2", "--delta", "1e-8", "--max-length", "4",
                                 "--json"])
    data = json.loads(out)
    assert code == 0 and data["protocol"] == "triehh++" and data["accounting"] == "exact"
    from triehh_beam.job.settings.config import BY_NAME
    from triehh_beam.protocol.protocols import DEFAULT_PROTOCOL, Protocol

    assert DEFAULT_PROTOCOL is Protocol.TRIEHH_PP and BY_NAME["protocol"].default is DEFAULT_PROTOCOL
