"""Tests of triehh_beam.io.records.lines: lines that are not UTF-8 blanked, counted and numbered."""

from __future__ import annotations

import threading

from triehh_beam.io.records.lines import Rejects, count_lines, split_non_utf8_lines
from triehh_beam.io.schema import RejectedRow


def test_lines_that_are_not_utf8_are_blanked_and_kept_raw_with_their_numbers():
    rejects = Rejects(keep=True)
    data = b"good\n\xffbad\nok \xc3\xa9\n\xc3\n"
    kept = split_non_utf8_lines(data, rejects, lambda line: "invalid_utf8", first_line=10)
    # Blanked, not removed: the lines after a bad one keep their numbers.
    assert kept == b"good\n\nok \xc3\xa9\n\n"
    counts, rows = rejects.take()
    assert counts == {"invalid_utf8": 2}
    assert rows == [RejectedRow("invalid_utf8", b"\xffbad", 11),
                    RejectedRow("invalid_utf8", b"\xc3", 13)]
    assert rejects.take() == ({}, [])  # taken once


def test_csv_lines_also_end_at_a_lone_carriage_return():
    rejects = Rejects(keep=False)
    kept = split_non_utf8_lines(b"a,b\r\xff,c\rd,e\n", rejects, lambda line: "malformed", True)
    assert kept == b"a,b\r\rd,e\n"
    assert rejects.take() == ({"malformed": 1}, [])  # counted, not kept


def test_count_lines_as_the_readers_number_them():
    assert count_lines(b"a\nb\r\nc\rd\n") == 3
    assert count_lines(b"a\nb\r\nc\rd\n", csv_lines=True) == 4
    assert count_lines(b"no break") == 0


def test_valid_blocks_pass_unchanged():
    data = "ünï\nascii\n".encode()
    assert split_non_utf8_lines(data, Rejects(keep=True), lambda line: "x") is data


def test_rejects_count_exactly_across_threads():
    rejects = Rejects(keep=True)

    def add():
        for _ in range(1000):
            rejects.add("malformed", b"x")

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts, rows = rejects.take()
    assert counts == {"malformed": 4000} and len(rows) == 4000
