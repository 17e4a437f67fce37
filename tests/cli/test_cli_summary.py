"""The end of ``triehh discover`` on the console: a screenful of heavy hitters, how many there are
and where all of them are; a warning in words, on stderr, when a notable share of the input could
not be used, with no exact count."""

import json
import re
import string

import pytest

from tests.holders import write_holders
from triehh_beam.cli import main
from triehh_beam.cli.summary import SCREENFUL, input_warnings, share_in_words

SEED = bytes(range(32))


@pytest.fixture
def seed_file(tmp_path):
    path = tmp_path / "seed.bin"
    path.write_bytes(SEED)
    return str(path)


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_discovery_lists_a_screenful_and_says_where_the_rest_is(tmp_path, seed_file, capsys):
    # 26 two-letter words of 400 holders each: at epsilon 8 (theta 14) nearly all are found; each
    # run is a fresh release, so one may be missed, and its first letter kept as a frequent prefix.
    records = write_holders(str(tmp_path / "records.jsonl"), {c + "z": 400 for c in string.ascii_lowercase})
    output = tmp_path / "out"
    assert main(["discover", "--protocol", "triehh", "--input", records, "--output", str(output), "--epsilon", "8", "--delta", "1e-6",
                 "--max-length", "3", "--seed-file", seed_file]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    document = json.loads((output / "heavy_hitters.json").read_text())
    found, prefixes = document["heavy_hitters"], len(document["frequent_prefixes"])
    assert len(found) > SCREENFUL  # not vacuous: more than a screenful was found
    head = next(i for i, line in enumerate(lines) if line.startswith("discovered "))
    assert lines[head].startswith(f"discovered {len(found)} heavy hitters in ")
    assert lines[head].endswith(f"; the first {SCREENFUL} found (the rounds publish no counts; --estimate-frequencies adds them):")
    listed = lines[head + 1:head + 1 + SCREENFUL]
    assert listed == [f"  {word}" for word in sorted(found)[:SCREENFUL]]
    also = "" if not prefixes else (f"; they and the {prefixes} frequent prefix{'' if prefixes == 1 else 'es'} "
                                    "(starts of several items, none frequent alone)")
    assert lines[head + 1 + SCREENFUL] == (f"  ... and {len(found) - SCREENFUL} more{also}, all in "
                                           f"`triehh show {output}` and {output / 'heavy_hitters.json'}")
    assert "WARNING" not in err  # every record was usable


def test_a_notable_share_of_unusable_input_is_a_warning_in_words(tmp_path, seed_file, capsys):
    # A third of the users hold only an item of 8 letters, too long for L = 4 (3 letters and the end).
    records = write_holders(str(tmp_path / "records.jsonl"), {"ab": 3000, "abcdefgh": 1500})
    assert main(["discover", "--protocol", "triehh", "--input", records, "--output", str(tmp_path / "out"), "--epsilon", "4",
                 "--delta", "1e-6", "--max-length", "4", "--seed-file", seed_file]) == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.startswith("WARNING")]
    assert warnings == [
        "WARNING: more than a quarter of the records hold items too long for --max-length 4 at --unit-size 1 "
        "(dropped); more than a quarter of the users hold no usable item and could not vote: raise --max-length "
        "or --unit-size (triehh plan --compare-units shows what each finds); exact counts in the operator report"]
    assert not re.search(r"1,?500|4,?500|3,?000", out + err)  # no exact count on the console
    assert re.search(r"^discovered 1 heavy hitter in \d+ rounds \(", out, re.M), out  # "ab" alone, in the singular
    report = json.loads((tmp_path / "out.state" / "operator_report.json").read_text())
    assert report["input"]["users_without_usable_item"] == 1500  # ... they are in the operator report


@pytest.mark.parametrize("part, whole, words", [
    (76, 100, "more than three quarters"), (75, 100, "more than half"), (486, 1000, "more than a quarter"),
    (11, 100, "more than a tenth"), (6, 100, "more than 1 in 20"), (5, 100, None), (4, 1000, None), (0, 0, None),
])
def test_share_in_words(part, whole, words):
    assert share_in_words(part, whole) == words


def _report(records=800, users=800, too_long=0, mute=0, dropped=None):
    return {"input": {"records_read": records, "distinct_users": users, "items_too_long": too_long,
                      "users_without_usable_item": mute, "dropped": dropped or {}}}


def test_the_issue_s_input_warns_and_a_small_share_does_not():
    # The new user's input: 76% of the records too long, 48.6% of the users unable to vote.
    [line] = input_warnings(_report(too_long=760, mute=389), max_length=10, unit_size=3, truncated=False)
    assert line.startswith("WARNING: more than three quarters of the records hold items too long for "
                           "--max-length 10 at --unit-size 3 (dropped); more than a quarter of the users")
    assert "760" not in line and "389" not in line
    assert input_warnings(_report(too_long=4, mute=3), max_length=10, unit_size=3, truncated=False) == []


def test_rejected_rows_warn_naming_their_reasons():
    [line] = input_warnings(_report(dropped={"malformed": 300, "missing_user": 10}), 10, 1, False)
    assert line.startswith("WARNING: more than a quarter of the rows were rejected (malformed, missing_user)")
    assert "--dead-letter" in line and "300" not in line


def test_a_few_rejected_rows_are_noted_never_silent():
    # One 50 MB item among 1,000 rows was dropped with no line at all; still no count.
    [line] = input_warnings(_report(dropped={"oversized_item": 1, "malformed": 0}), 10, 1, False)
    assert line.startswith("note: a few rows were rejected (oversized_item: an item over --max-item-bytes)")
    assert "malformed" not in line and "--dead-letter" in line and not re.search(r"\b1\b", line)
    assert input_warnings(_report(dropped={"malformed": 0}), 10, 1, False) == []


def test_a_rejected_row_names_the_limit_it_broke_and_its_count_only_when_verbose():
    limits = {"max_item_bytes": 4096, "max_user_bytes": 256}
    report = _report(dropped={"oversized_item": 1, "oversized_user": 3})
    [line] = input_warnings(report, 10, 1, False, limits=limits)
    assert line.startswith("note: a few rows were rejected (oversized_item: an item over --max-item-bytes 4096, "
                           "oversized_user: a user id over --max-user-bytes 256); --dead-letter PATH writes them")
    assert "private" not in line and not re.search(r"\b[13]\b", line)
    [line] = input_warnings(report, 10, 1, False, limits=limits, verbose=True)
    assert ("(oversized_item: an item over --max-item-bytes 4096 [private: 1 row], oversized_user: a user id "
            "over --max-user-bytes 256 [private: 3 rows])") in line


def _two_items_each(tmp_path, users=400, extra=()):
    """Records of ``users`` users holding "ab" and "cd", one record each (weighted users: half the
    holders), and the rows of ``extra``."""
    rows = [json.dumps({"user_id": f"u{u}", "item": item}) for u in range(users) for item in ("ab", "cd")]
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(rows + [json.dumps(row) for row in extra]) + "\n")
    return records


def test_discover_notes_several_items_per_user_and_an_oversized_item(tmp_path, seed_file, capsys):
    # 400 users hold the same two words, one record each; one more user holds a 50 kB item over
    # --max-item-bytes 1000. Both were silent on the console before (plan and evaluate said the
    # first; only the operator report the second).
    records = _two_items_each(tmp_path, extra=[{"user_id": "big", "item": "x" * 50_000}])
    assert main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "1",
                 "--delta", "1e-6", "--max-length", "3", "--max-item-bytes", "1000",
                 "--seed-file", seed_file]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: the input holds more records than users (by more than 1 in 20), so users may hold several items: a "
        "sampled user votes for one of its items per round, drawn by its share of its records, so an item counts "
        "each holder of several for less than one (estimates are weighted users, fewer than the holders); triehh "
        "plan --items-per-user K plans for it",
        "note: a few rows were rejected (oversized_item: an item over --max-item-bytes 1000); --dead-letter PATH "
        "writes them; exact counts in the operator report"]
    report = json.loads((tmp_path / "out.state" / "operator_report.json").read_text())
    assert report["input"]["dropped"] == {"oversized_item": 1}  # the count stays private, in the report


def test_more_records_than_users_notes_that_users_may_hold_several_items():
    # 3 items per user: a holder of several counts for less; one record each (or a few extra,
    # or extra rows that were rejected) says nothing; partition selection bounds k items itself.
    [line] = input_warnings(_report(records=2400, users=800), 10, 1, False)
    assert line.startswith("note: the input holds more records than users") and "--items-per-user" in line
    assert "2400" not in line and "2,400" not in line
    assert input_warnings(_report(records=830, users=800), 10, 1, False) == []
    assert input_warnings(_report(records=2400, users=800), 10, 1, False, one_vote_per_user=False) == []
    assert not any(line.startswith("note: the input holds")
                   for line in input_warnings(_report(records=1200, users=800, dropped={"malformed": 400}), 10, 1, False))


def test_a_whole_item_release_says_its_estimates_count_weighted_users(tmp_path, seed_file, capsys):
    # 800 users hold "ab" and "cd" (one record each): each item's weighted users are 400, half its
    # 800 holders, and the console said only "the holders when each holds one item".
    records = _two_items_each(tmp_path, users=800)
    assert main(["discover", "--protocol", "sample-threshold", "--input", str(records), "--output",
                 str(tmp_path / "out"), "--epsilon", "1", "--delta", "1e-6", "--max-length", "3",
                 "--seed-file", seed_file]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines.index("released 2 items (whole-item sample-and-threshold, one pass):")
    assert lines[head + 1].endswith(
        "estimate = count / p_s, of the item's weighted users: the sum over users of the share of their records "
        "that are the item, its holders when each holds one item and fewer when holders hold several; the "
        "interval holds them given the release)")
    # The numbers say the same. Each release draws afresh (a new nonce), so the tolerance is stated:
    # the count is Bin(800, p_s / 2), and the estimate count / p_s lies within 6 sd (~34 at p_s ~0.29;
    # missed with probability ~2e-9) of the 400 weighted users, far below the 800 holders (12 sd).
    p_s = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())["privacy"]["sample_probability"]
    sd = (800 * p_s / 2 * (1 - p_s / 2)) ** 0.5 / p_s
    for row in lines[head + 3:head + 5]:
        estimate = int(row.split()[2].replace(",", ""))
        assert abs(estimate - 400) < 6 * sd and 800 - estimate > 6 * sd, row
