"""Tests of triehh_beam.io.records.jsonl: the Arrow path, the per-line path and the switch between them."""

from __future__ import annotations

import json

from triehh_beam.io import iter_record_blocks, write_records
from triehh_beam.io.records import jsonl
from triehh_beam.protocol.randomness import sampling
from tests.io.helpers import (
    LONG_ITEM,
    LONG_USER,
    batch_rows,
    read_blocks,
    read_rows,
)


def test_jsonl_mixed_types_take_the_slow_path_with_the_same_result(tmp_path):
    path = tmp_path / "m.jsonl"
    lines = [
        '{"user_id": 42, "item": "a"}',
        '{"user_id": "42", "item": "b", "count": 3, "extra": [1, {"x": null}]}',
        '{"user_id": 99999999999999999999, "item": "c", "count": null}',
        '{"user_id": 4.5, "item": "d"}',  # bad user
        '{"user_id": true, "item": "d"}',  # bad user
        '{"user_id": "u", "item": 5}',  # bad item
        '{"user_id": "u", "item": "e", "count": 2.0}',  # bad count
        '{"user_id": "u", "item": "e", "count": "2"}',  # bad count
        '{"user_id": "u", "item": "e", "count": 9223372036854775808}',  # bad count
        '{"item": "f"}',  # missing user
        '{"user_id": "", "item": 5}',  # missing user (checked before the item's type)
        '{"user_id": "v", "item": ""}',  # missing item
        "not json",  # malformed
        "[1, 2]",  # malformed
        "",
        "   ",
        '{"user_id": "w", "item": "ü", "count": 0}',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows, drops = read_rows(str(path))
    assert rows == [(b"42", "a", 1), (b"42", "b", 3), (b"99999999999999999999", "c", 1),
                    (b"w", "ü", 0)]
    assert drops == {"bad_user": 2, "bad_item": 1, "bad_count": 3, "missing_user": 2,
                     "missing_item": 1, "malformed": 2}


def test_jsonl_blocks_switch_between_id_types(tmp_path, monkeypatch):
    # Small blocks: one holds integer ids, the next string ids, the last a mixture.
    monkeypatch.setattr(jsonl, "_BLOCK_BYTES", 256)
    rows = [(i, f"item{i}") for i in range(20)] + [(f"s{i}", "x") for i in range(20)]
    rows += [(1, "a"), ("1", "b")] * 5
    path = str(tmp_path / "s.jsonl")
    write_records(path, rows)
    got, drops = read_rows(path, batch_size=7)
    assert got == [(sampling.user_id_bytes(u), item, 1) for u, item in rows] and drops == {}


def test_jsonl_value_checks_on_the_arrow_path_keep_the_raw_lines(tmp_path):
    lines = [
        b'{"user_id": "a", "item": "x", "count": 1}',
        b"",
        b'{"user_id": "", "item": "x", "count": 1}',
        b"   ",
        b'{"user_id": "' + LONG_USER.encode() + b'", "item": "x"}',
        b'{"user_id": "b", "item": "x", "count": -5}',
        b'{"user_id": "c", "item": "' + LONG_ITEM.encode() + b'"}',
        b'{"user_id": "d", "item": null}',
        b'{"user_id": "e", "item": "y"}',
    ]
    path = tmp_path / "typed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows, drops, rejected = read_blocks(str(path))
    assert rows == [(b"a", "x", 1), (b"e", "y", 1)]
    assert drops == {"missing_user": 1, "oversized_user": 1, "bad_count": 1,
                     "oversized_item": 1, "missing_item": 1}
    assert [(r.line, r.raw) for r in rejected] == [(i + 1, lines[i]) for i in (2, 4, 5, 6, 7)]


def test_one_broken_line_in_a_big_jsonl_file_costs_one_sub_block(tmp_path, monkeypatch):
    n = 6000
    lines = [json.dumps({"user_id": f"user{i:05d}", "item": f"item{i % 97}"}).encode()
             for i in range(n)]
    lines[3000] = b'{"user_id": "broken", "item": '
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    slow_lines = []
    parse_with_json = jsonl._JsonLinesParser._parse_with_json

    def spy(self, chunk, first_line):
        slow_lines.append(chunk.count(b"\n") + 1)
        return parse_with_json(self, chunk, first_line)

    monkeypatch.setattr(jsonl._JsonLinesParser, "_parse_with_json", spy)
    blocks = list(iter_record_blocks(str(path), keep_rejected=True, batch_size=4096))
    rows = [r for b in blocks for r in batch_rows(b.batch)]
    assert len(rows) == n - 1 and rows[0] == (b"user00000", "item0", 1)
    assert [(r.line, r.raw) for b in blocks for r in b.rejected] == [(3001, lines[3000])]
    assert sum(slow_lines) < 2000  # one ~64 KiB sub-block, not the whole 270 KB block
    assert all(b.batch.num_rows >= 1024 for b in blocks[:-1])  # sub-blocks are merged


def test_mixed_id_types_in_jsonl_still_read_every_record(tmp_path):
    rows = [(i, "a") if i % 2 else (f"s{i}", "b") for i in range(3000)]
    path = str(tmp_path / "mixed.jsonl")
    write_records(path, rows)
    got, drops, _ = read_blocks(path)
    assert sorted(got) == sorted((str(u).encode(), item, 1) for u, item in rows) and drops == {}
