"""What a windowed discover prints about its input and its windows, read as a new user would:
a user without a usable item is not a bad row (the dead letter holds none of them), and counts
of one are singular."""

import csv

import pytest

from triehh_beam.cli import main
from triehh_beam.job.windows.stream import describe_window

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
    (["", "the", "2026-11-01T00:01:00Z"],
     "input: some rows are bad (missing_user), within --max-bad-fraction; they go to the dead letter (private",
     "some users hold no usable item"),
])
def test_a_windowed_discover_names_bad_rows_and_unusable_users_apart(tmp_path, capsys, extra_row, says, never):
    records = tmp_path / "records.csv"
    _records(records, extra_row)
    assert main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), *WINDOW]) == 0
    out = capsys.readouterr().out
    assert says in out and never not in out, out
    assert "1 window, 1 released" in out and "outside --windows" not in out, out
    letters = "dead letters: none" if extra_row[0] else "dead letters: missing_user"
    assert letters in out, out


def test_the_input_line_and_the_last_line_name_the_same_bad_rows_and_the_same_dead_letter(tmp_path, capsys):
    # The input check counts bad rows before any window is charged; the last line reads the dead
    # letter the run wrote. They read "see the dead letter" then "dead letters: none"; now both
    # name the same reasons, with the same private counts (--verbose), and the same place.
    import re

    records = tmp_path / "records.csv"
    _records(records, ["", "the", "2026-11-01T00:01:00Z"])
    with open(records, "a", newline="") as f:
        csv.writer(f).writerows([["u-a", "the", "yesterday"], ["u-b", "", "2026-11-01T00:02:00Z"],
                                 ["", "to", "2026-11-01T00:03:00Z"], ["u-c", "to", "2026-11-02T00:00:00Z"],
                                 ["u-d", "to", "2026-10-31T23:59:59Z"]])
    elsewhere = tmp_path / "rejected" / "rows.jsonl"
    elsewhere.parent.mkdir()
    assert main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), *WINDOW,
                 "--dead-letter", str(elsewhere), "--verbose"]) == 0
    out = capsys.readouterr().out
    said = re.search(r"^input: some rows are bad \((.*)\), within --max-bad-fraction; they go to the dead "
                     r"letter \(private, in (.*)\)$", out, re.M)
    listed = re.search(r"^1 window, 1 released; dead letters: (.*) \(private, in (.*)\)$", out, re.M)
    assert said and listed, out
    assert said.groups() == listed.groups() == (
        "missing_user, bad_timestamp, missing_item "
        "[private: 2 missing_user, 1 bad_timestamp, 1 missing_item]",
        str(elsewhere)), out
    assert elsewhere.read_text().count("\n") == 4
    # Not bad rows, nor in the dead letter: records of no declared window were dropped unsaid.
    assert ("input: some records fall outside --windows 2026-11-01T00:00:00Z..2026-11-01T01:00:00Z: they are "
            "in no window, neither released nor in the dead letter [private: 2 records]") in out, out


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


def _window_report(heavy_hitters, rounds, users, records):
    return {"window_start": "2026-11-01T00:00:00Z", "released": True, "reason": None,
            "heavy_hitters": heavy_hitters, "rounds": [{}] * rounds, "published_to": "out", "detail": None,
            "input": {"distinct_users": users, "records": records}}


@pytest.mark.parametrize("counts, says", [
    ((1, 1, 1, 1), "released 1 heavy hitter, 1 round -> out [private: 1 user, 1 record]"),
    ((0, 1, 2, 1200), "released 0 heavy hitters, 1 round -> out [private: 2 users, 1,200 records]"),
    ((3, 2, 1, 5), "released 3 heavy hitters, 2 rounds -> out [private: 1 user, 5 records]"),
])
def test_a_window_line_counts_everything_in_the_singular_and_plural(counts, says):
    # It read "released 0 heavy hitters, 1 rounds" and "[private: 1 users, ...]".
    line = describe_window(_window_report(*counts), verbose=True)
    assert line == f"window 2026-11-01T00:00:00Z: {says}", line


def test_a_stream_stopping_after_one_window_says_one_window():
    from triehh_beam.job.windows.stream import stop_reason

    assert stop_reason(1, 1, 3, 1) == "1 window closed: stopping (--stop-after-windows)"
    assert stop_reason(2, 2, 3, 2) == "2 windows closed: stopping (--stop-after-windows)"


def test_the_stream_summary_line_counts_one_window_in_the_singular(tmp_path, capsys, monkeypatch):
    # The line cli/stream.py prints once the stream ends; the stream itself runs against the
    # Pub/Sub emulator in tests/e2e/test_stream_emulator.py, replaced here by what it returns.
    from triehh_beam.job.windows import stream

    def ran(config, source, options, progress=print, poll_seconds=1.0):
        return stream.WindowedRun([_window_report(1, 1, 1, 1)], "CANCELLED", str(tmp_path / "dead-letter"))

    monkeypatch.setattr(stream, "run_stream", ran)
    assert main(["stream", "--protocol", "triehh", "--subscription", "projects/p/subscriptions/s",
                 "--output", str(tmp_path / "out"), "--epsilon", "4", "--delta", "1e-8", "--max-length", "6",
                 "--window", "1h", "--windows", "2025-11-23T10:00:00Z..2025-11-24T00:00:00Z",
                 "--population", "50000"]) == 0
    out = capsys.readouterr().out
    says = f"stream cancelled: 1 window closed, 1 released; dead letters: none (private, in {tmp_path}"
    assert says in out, out
