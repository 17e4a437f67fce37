"""`triehh plan --protocol sample-threshold`: the whole-item plan (alpha, tau, p_s for one release)
as text and JSON, its release table exact (P(Binomial(holders, p_s) >= tau) crosses each
probability at the row's holders), a target above epsilon 1 shown infeasible with the reason, and
trie-only flags refused."""

import json

import pytest

from triehh_beam import cli
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
