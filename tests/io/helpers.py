"""Shared by the reader tests: the bad-input corpus (tests/io/fixtures/bad_input) and what each
file of it holds, and small helpers that read a file without Beam or a job's counters."""

from __future__ import annotations

import collections
import os

from apache_beam.metrics.metric import MetricsFilter

from triehh_beam.io import RECORD_SCHEMA, RecordOptions, iter_record_batches, iter_record_blocks

FORMATS = ["jsonl", "csv", "parquet"]
CORPUS = os.path.join(os.path.dirname(__file__), "fixtures", "bad_input")
LONG_USER = "u" * 300
LONG_ITEM = "x" * 4100

TEXT = RecordOptions()
BASE64 = RecordOptions(item_kind="bytes", bytes_encoding="base64")
INT32 = RecordOptions(item_kind="int", int_bits=32)

# file -> (options, good rows, drops per reason)
EXPECTED = {
    "bad.jsonl": (
        TEXT,
        [(b"u1", "apple", 2), (b"42", "pear", 1), (b"u3", "ünïcödé 🍐", 1), (b"u5", "fig", 0)],
        {"malformed": 2, "invalid_utf8": 2, "missing_user": 2, "bad_user": 1,
         "oversized_user": 1, "missing_item": 2, "bad_item": 1, "oversized_item": 1,
         "bad_count": 2},
    ),
    "bad.csv": (
        TEXT,
        [(b"u1", "apple", 2), (b"42", "pear", 1), (b"u3", "ünïcödé 🍐", 1),
         (b"u,4", "item, with comma", 3), (b"c3", "kiwi", 1), (b"u5", "fig", 0)],
        {"malformed": 2, "invalid_utf8": 2, "missing_user": 1, "oversized_user": 1,
         "missing_item": 1, "oversized_item": 1, "bad_count": 2},
    ),
    "bad_rows.parquet": (
        TEXT,
        [(b"u1", "ok", 1), (b"u9", "d", 1), (b"u10", "e", 3)],
        {"invalid_utf8": 1, "missing_user": 2, "oversized_user": 1, "missing_item": 1,
         "oversized_item": 1, "bad_count": 1},
    ),
    "good.parquet": (TEXT, [(b"1", "a", 1), (b"2", "b", 2), (b"3", "ü", 3)], {}),
    "empty.parquet": (TEXT, [], {}),
    "empty.jsonl": (TEXT, [], {}),
    "blank_lines.jsonl": (TEXT, [], {}),
    "header_only.csv": (TEXT, [], {}),
    "bytes_base64.csv": (
        BASE64, [(b"u1", b"\x00\x01\x02", 1), (b"u2", b"\xff", 1)],
        {"bad_item": 2, "missing_item": 1},
    ),
    "ints.jsonl": (
        INT32, [(b"u1", 7, 1), (b"u2", -(2**31), 1), (b"u3", 42, 1)], {"bad_item": 4},
    ),
}

UNREADABLE = {
    "wrong_schema.parquet": r"wrong_schema\.parquet: the user id column 'user_id' has type double",
    "wrong_item_type.parquet": r"wrong_item_type\.parquet: the item column 'item' has type list",
    "not_parquet.parquet": r"not_parquet\.parquet: cannot read it as parquet",
    "truncated.jsonl.gz": r"truncated\.jsonl\.gz: the compressed stream ends before its end marker",
}


def corpus(name):
    return os.path.join(CORPUS, name)


def batch_rows(batch):
    """(user bytes, item, count) rows of one normalised batch."""
    return list(zip(*(c.to_pylist() for c in batch.columns)))


def batches_rows(batches):
    """(user bytes, item, count) rows of a list of text-item batches."""
    rows = []
    for batch in batches:
        assert batch.schema == RECORD_SCHEMA
        rows.extend(batch_rows(batch))
    return rows


def read_rows(path, **kwargs):
    """(rows, summed nonzero drop counts) of one file, read without Beam."""
    batches, drops = [], {}
    for batch, batch_drops in iter_record_batches(path, **kwargs):
        batches.append(batch)
        for reason, n in batch_drops.items():
            drops[reason] = drops.get(reason, 0) + n
    return batches_rows(batches), {reason: n for reason, n in drops.items() if n}


def read_blocks(path, options=TEXT, keep_rejected=True, **kwargs):
    """(rows, nonzero drops, rejected rows) of one file, read without Beam."""
    rows, drops, rejected = [], collections.Counter(), []
    for block in iter_record_blocks(path, options=options, keep_rejected=keep_rejected, **kwargs):
        assert block.batch.schema == options.schema
        block.batch.validate(full=True)
        rows.extend(batch_rows(block.batch))
        drops.update({k: v for k, v in block.drops.items() if v})
        rejected.extend(block.rejected)
    return rows, dict(drops), rejected


def counters(result):
    """Committed counters of a finished job in the triehh namespace, by name."""
    found = result.metrics().query(MetricsFilter().with_namespace("triehh"))["counters"]
    totals = collections.Counter()
    for counter in found:
        totals[counter.key.metric.name] += counter.committed
    return totals


# Rows of every type of user id, and what the reader makes of them.
ROWS = [(42, "apple", 2), ("007", "pear", 1), ("42", "fig", 3), ("ü", "kiwi", 1)]
ROWS_EXPECTED = [
    (b"42", "apple", 2), (b"007", "pear", 1), (b"42", "fig", 3), ("ü".encode(), "kiwi", 1)
]


def text_ids(rows):
    """Parquet columns have one type: the same rows with every user id as text."""
    return [(str(r[0]) if isinstance(r[0], int) else r[0],) + tuple(r[1:]) for r in rows]
