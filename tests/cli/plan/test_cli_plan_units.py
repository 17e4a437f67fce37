"""`triehh plan --unit-size auto` / `--compare-units`: the table and the recommendation, as text
and JSON, equal to what `protocol.planning.unit_advice` computes (itself tested against the planners);
`--protocol` restricts it; flags that belong to one unit size are refused in one line."""

import json

import pytest

from tests.cli_runs import run_cli
from triehh_beam.protocol.planning import unit_advice as ua

BASE = ["plan", "--population", "100000", "--epsilon", "4", "--delta", "1e-8", "--max-length", "10"]


def test_json_is_the_comparison_with_its_recommendations(capsys):
    code, out, err = run_cli(capsys, BASE + ["--unit-size", "auto", "--find-frequency", "0.3%",
                                          "--json"])
    assert code == 0 and err == ""
    data = json.loads(out)
    expected = ua.compare_units(4, 1e-8, 9, 100_000, find_frequency=0.003).to_dict()
    assert data == {"compare_units": True, **json.loads(json.dumps(expected))}
    assert [r["protocol"] for r in data["recommendations"]] == ["triehh", "triehh++"]
    assert {o["protocol"] for o in data["options"]} == {"triehh", "triehh++"}


def test_text_shows_every_row_and_the_rule(capsys):
    code, out, err = run_cli(capsys, BASE + ["--compare-units", "--find-frequency", "0.003"])
    assert code == 0 and err == ""
    advice = ua.compare_units(4, 1e-8, 9, 100_000, find_frequency=0.003)
    for row in advice.options:
        if row.feasible:
            counts = " / ".join(f"{row.holders_for(p):,}" for p in ua.PROBABILITIES)
            assert counts in out
            assert (f"theta {row.threshold}" if row.protocol == "triehh"
                    else f"tau {row.threshold}") in out
    # TrieHH++ is planned exactly (the default accounting): the whole item's eps_r = 4/2 = 2, outside
    # the bound's theorem, is a plan too (an infeasible row: the next test).
    whole = [row for row in advice.options if row.protocol == "triehh++" and row.max_length == 2]
    assert len(whole) == 1 and whole[0].feasible and f"tau {whole[0].threshold}" in out
    assert "INFEASIBLE" not in out and all(row.feasible for row in advice.options)
    assert "items up to 9 characters" in out
    for rec in advice.recommendations:
        assert f"--unit-size {rec.option.unit_size} --max-length {rec.option.max_length}" in out
    assert "The rule: the smallest unit size whose 90% holders are at most ceil(F n)" in out
    assert "ceil(F n) = 300 holders" in out
    assert max(len(line) for line in out.splitlines()) <= 96


def test_an_infeasible_row_points_to_its_reason_below_the_table(capsys):
    # Theorem 1 cannot certify epsilon 1 over L = 10 for n = 10,000 (the other unit sizes it can).
    code, out, err = run_cli(capsys, ["plan", "--population", "10000", "--epsilon", "1", "--delta", "1e-8",
                                   "--max-length", "10", "--compare-units", "--protocol", "triehh"])
    assert code == 0 and err == ""
    advice = ua.compare_units(1, 1e-8, 9, 10_000, protocols=("triehh",))
    infeasible = [row for row in advice.options if not row.feasible]
    assert [(row.protocol, row.unit_size) for row in infeasible] == [("triehh", 1)]
    assert "TrieHH    unit 1      10  1 char   INFEASIBLE (reason 1 below)" in out
    flat = " ".join(out.split())  # the reasons are wrapped
    assert f"1. TrieHH, unit 1 (L = 10): {' '.join(infeasible[0].reason.split())}" in flat
    assert out.count("INFEASIBLE") == 1


def test_protocol_restricts_the_table_and_unit_size_sets_the_characters(capsys):
    code, out, _ = run_cli(capsys, BASE + ["--compare-units", "--unit-size", "2", "--protocol",
                                        "triehh", "--json"])
    assert code == 0
    data = json.loads(out)
    assert data["max_characters"] == 18  # (L - 1) * K: the items --unit-size 2 admits
    assert {o["protocol"] for o in data["options"]} == {"triehh"}
    assert data["recommendations"][0]["find_frequency"] is None
    code, text, _ = run_cli(capsys, BASE + ["--unit-size", "auto", "--protocol", "triehh++"])
    assert "TrieHH++" in text and "theta" not in text
    assert "Fewest holders for 90%" in text


def test_nothing_found_names_the_closest(capsys):
    code, out, _ = run_cli(capsys, BASE + ["--unit-size", "auto", "--find-frequency", "0.001"])
    assert code == 0
    assert "no unit size finds it; the closest is" in out


@pytest.mark.parametrize("extra, message", [
    (["--find-frequency", "0.01"], "--find-frequency recommends a unit size"),
    (["--compare-units", "--item-length", "3"], "--item-length is for one unit size"),
    (["--unit-size", "auto", "--plot", "plots"], "--plot is for one unit size"),
    (["--find-frequency", "0"], "argument --find-frequency: must be in (0, 1]"),
    (["--find-frequency", "150%"], "argument --find-frequency: must be in (0, 1]"),
    (["--unit-size", "autox"], "argument --unit-size"),
])
def test_wrong_combinations_fail_in_one_line(capsys, extra, message):
    code, out, err = run_cli(capsys, BASE + extra)
    assert code == 2 and out == ""
    assert message in err


def test_one_unit_plans_as_before(capsys):
    # Without --compare-units one plan: the default protocol's (TrieHH++ since issue 38), or TrieHH's.
    code, out, _ = run_cli(capsys, BASE + ["--json"])
    assert code == 0 and json.loads(out)["protocol"] == "triehh++" and "compare_units" not in json.loads(out)
    code, out, _ = run_cli(capsys, BASE + ["--protocol", "triehh", "--json"])
    assert code == 0 and json.loads(out)["theta"] == 12 and "compare_units" not in json.loads(out)
