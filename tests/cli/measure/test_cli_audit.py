"""``triehh audit``: the JSON object and the text report of a real audit (the pipeline run on a
records file, and a windowed replay of the synthetic population), and the refusals, each one
line on stderr with exit code 2."""

import json

import pytest

from triehh_beam.cli import main
from triehh_beam.io.write import write_records


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("audit") / "records.jsonl")
    items = ["ab"] * 200 + ["ba"] * 60 + ["c"] * 40
    write_records(path, [(f"user-{i}", item) for i, item in enumerate(items)])
    return path


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_json_is_one_object_with_the_verdict_the_claim_and_the_counts(records, capsys):
    argv = ["audit", "--input", records, "--protocol", "sample-threshold", "--epsilon", "1", "--delta", "1e-3",
            "--runs", "1", "--target", "ab", "--target-holders", "3", "--event", "estimate-at-least", "--at-least", "5", "--json",
            "--no-progress"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "inconclusive" and result["violated"] is False
    assert result["job"]["protocol"] == "sample-threshold" and result["releases"] == 2
    assert result["population"] == {"users": 303, "target": "ab", "target_user": "triehh-audit-target-user",
                                    "target_holders": 3}
    assert result["claim"]["accounting"] == "exact"
    # 'ab' is held by 200 + 3 users: its released count (about 25 at p_s = 12.8%) is at least 5 in every run.
    # (One run per population: the counts are read the same way for every run.)
    assert result["event"] == {"name": "estimate-at-least", "at_least": 5.0, "runs_d": 1, "runs_d_prime": 1,
                               "hits_d": 1, "hits_d_prime": 1}
    assert result["input"]["records"] == 300
    assert [d["numerator"] for d in result["directions"]] == ["D'", "D"]


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_text_report_of_a_windowed_replay(capsys):
    argv = ["audit", "--protocol", "triehh++", "--epsilon", "1", "--delta", "1e-3", "--max-length", "2",
            "--users", "30", "--window", "--runs", "3"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "discover --protocol triehh++ --epsilon 1 --delta 0.001 --max-length 2 --window 1h" in out
    assert "one --window replay of 3 windows per population" in out
    assert "inconclusive" in out and "consistent" not in out
    assert "D: 3 windows in one replay" in captured.err


@pytest.mark.parametrize("extra, message", [
    (["--releases", "2", "--event", "published"], "--releases 2"),
    (["--protocol", "sample-threshold", "--window"], "--window runs a trie"),
    (["--releases", "2", "--target-holders", "1"], "--releases 1"),
    (["--input", "/nonexistent/records.parquet"], "nonexistent"),
    # An infeasible target. (audit has no --accounting and plans sample-and-threshold exactly,
    # under which epsilon 4 is a plan: the refusal it gave there is now TrieHH's, for its n.)
    (["--protocol", "triehh", "--epsilon", "0.1"], "Theorem 1 cannot certify (epsilon=0.1"),
])
def test_refusals_are_one_line_and_exit_2(extra, message, capsys):
    assert main(["audit", "--runs", "1", "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
