"""Tests of triehh_beam.io.lines: lines that are not UTF-8 taken out and counted."""

from __future__ import annotations

import threading

from triehh_beam.io.lines import Rejects, split_non_utf8_lines
from triehh_beam.io.schema import RejectedRow


def test_lines_that_are_not_utf8_are_taken_out_and_kept_raw():
    rejects = Rejects(keep=True)
    data = b"good\n\xffbad\nok \xc3\xa9\n\xc3\n"
    kept = split_non_utf8_lines(data, rejects, lambda line: "invalid_utf8")
    assert kept == b"good\nok \xc3\xa9\n"
    counts, rows = rejects.take()
    assert counts == {"invalid_utf8": 2}
    assert rows == [RejectedRow("invalid_utf8", b"\xffbad"), RejectedRow("invalid_utf8", b"\xc3")]
    assert rejects.take() == ({}, [])  # taken once


def test_csv_lines_also_end_at_a_lone_carriage_return():
    rejects = Rejects(keep=False)
    kept = split_non_utf8_lines(b"a,b\r\xff,c\rd,e\n", rejects, lambda line: "malformed", True)
    assert kept == b"a,b\rd,e\n"
    assert rejects.take() == ({"malformed": 1}, [])  # counted, not kept


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
