"""What a windowed discover prints about its input and its windows, read as a new user would:
a user without a usable item is not a bad row (the dead letter holds none of them), and counts
of one are singular."""

import csv

import pytest

from triehh_beam.cli import main
from triehh_beam.job.stream import describe_window

WINDOW = ["--window", "1h", "--windows", "2026-11-01T00:00:00Z..2026-11-01T01:00:00Z", "--timestamp-column", "ts",
          "--epsilon", "4", "--delta", "1e-6", "--max-length", "4"]
WORDS = ("the", "to", "of", "and", "a", "in", "is", "it")


def _records(path, extra_row):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["user_id", "item", "ts"])
        for user in range(3000):
            writer.writerow([f"u{user}", WORDS[user % len(WORDS)], f"2026-11-01T00:{user % 60:02d}:00Z"])
        writer.writerow(extra_row)


@pytest.mark.parametrize("extra_row, says, never", [
    # Only the first 4 characters of an item can be found at L = 4: this user holds nothing usable.
    (["u-long", "abcdefghijklmnopqrstuvwxyz", "2026-11-01T00:01:00Z"],
     "input: some users hold no usable item", "see the dead letter"),
    (["", "the", "2026-11-01T00:01:00Z"], "input: some rows are bad, within --max-bad-fraction; see the dead letter",
     "some users hold no usable item"),
])
def test_a_windowed_discover_names_bad_rows_and_unusable_users_apart(tmp_path, capsys, extra_row, says, never):
    records = tmp_path / "records.csv"
    _records(records, extra_row)
    assert main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), *WINDOW]) == 0
    out = capsys.readouterr().out
    assert says in out and never not in out, out
    assert "1 window, 1 released" in out, out
    letters = "dead letters: none" if extra_row[0] else "dead letters: missing_user"
    assert letters in out, out


@pytest.mark.parametrize("rounds, says", [(1, "1 round ->"), (4, "4 rounds ->")])
def test_a_window_line_counts_its_rounds_in_the_singular_and_plural(rounds, says):
    report = {"window_start": "2026-11-01T00:00:00Z", "released": True, "reason": None, "heavy_hitters": 0,
              "rounds": [{}] * rounds, "published_to": "out"}
    assert says in describe_window(report)


def test_a_windowed_discover_with_a_deny_list_says_so_and_its_window_records_it(tmp_path, capsys):
    import json

    from tests.published_releases import release_document

    records = tmp_path / "records.csv"
    _records(records, ["u-extra", "to", "2026-11-01T00:01:00Z"])
    deny = tmp_path / "earlier.json"
    deny.write_text(json.dumps(release_document(["the"], max_length=4)))
    assert main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), *WINDOW,
                 "--deny-list", str(deny)]) == 0
    out = capsys.readouterr().out
    assert "every window's votes skip the 1 earlier heavy hitter of the deny list (1 file)" in out, out
    published = json.loads((tmp_path / "out" / "window=2026-11-01T00:00:00Z" / "heavy_hitters.json").read_text())
    assert published["deny_list"]["items"] == 1 and "the" not in published["heavy_hitters"]
    assert "to" in published["heavy_hitters"]  # held by as many users as "the": the comparison can fail


def test_a_windowed_discover_refuses_a_raw_deny_list_in_one_line_and_makes_nothing(tmp_path, capsys):
    import json

    records = tmp_path / "records.csv"
    _records(records, ["u-extra", "to", "2026-11-01T00:01:00Z"])
    deny = tmp_path / "raw.json"
    deny.write_text(json.dumps({"heavy_hitters": ["the"]}))
    assert main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), *WINDOW,
                 "--deny-list", str(deny)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "raw.json" in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.state").exists()
