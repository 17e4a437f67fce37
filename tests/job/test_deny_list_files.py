"""``job.deny_lists``: a deny-list file must be a published ``heavy_hitters.json`` whose items
mean what this job's items mean and encode under its encoder; anything else is refused naming
the file and why; the digests move with the items (and the identity's with the files)."""

from __future__ import annotations

import json

import pytest

from triehh_beam import cli
from triehh_beam.job import deny_lists
from triehh_beam.job.deny_lists import DenyListError
from triehh_beam.io.write import write_records
from triehh_beam.protocol.encoding import ItemEncoder, ItemKind

TEXT = {"kind": "text", "unit": "characters", "unit_size": 1, "case_fold": False, "int_bits": None,
        "tokenizer": None, "bytes_encoding": None, "long_items": "drop"}
ENCODER = ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=6)


def _release(path, items, **encoding):
    path.write_text(json.dumps({"heavy_hitters": items, "frequent_prefixes": ["zz"],
                                "privacy": {"protocol": "triehh"}, "encoding": {**TEXT, **encoding}}))
    return str(path)


def test_items_of_several_releases_are_encoded_and_united(tmp_path):
    one = _release(tmp_path / "a.json", ["to", "of"])
    two = _release(tmp_path / "b.json", [{"item": "of", "estimate": 12, "interval": [3, 21]}, "and"],
                   unit_size=3, long_items="truncate")  # another unit size: the items re-encode
    deny = deny_lists.load([one, two, one], ENCODER)
    assert deny.files == (one, two)
    assert deny.sequences == {ENCODER.encode(w) for w in ("to", "of", "and")}  # never frequent prefixes
    assert deny.size == 3
    swapped = deny_lists.load([two, one], ENCODER)
    assert swapped.digest == deny.digest  # a set: the order of the files does not matter
    alone = deny_lists.load([_release(tmp_path / "c.json", ["to", "of", "and"])], ENCODER)
    assert alone.items_digest == deny.items_digest and alone.digest != deny.digest
    assert deny_lists.load((), ENCODER) is None


def test_bytes_and_integer_items(tmp_path):
    encoder = ItemEncoder(ItemKind.BYTES, unit_size=2, max_length=4)
    deny = deny_lists.load([_release(tmp_path / "b.json", ["00ff", "61"], kind="bytes")], encoder)
    assert deny.sequences == {encoder.encode(b"\x00\xff"), encoder.encode(b"a")}
    ints = ItemEncoder(ItemKind.INT, unit_size=4, max_length=6, int_bits=20)
    deny = deny_lists.load([_release(tmp_path / "i.json", [7, -3], kind="int", int_bits=32)], ints)
    assert deny.sequences == {ints.encode(7), ints.encode(-3)}


@pytest.mark.parametrize("content, reason", [
    ("not json {", "not JSON"),
    (json.dumps(["to", "of"]), "not a heavy_hitters.json published by a discovery"),
    (json.dumps({"heavy_hitters": ["to"]}), "no privacy, encoding"),
    (json.dumps({"heavy_hitters": "to", "privacy": {}, "encoding": TEXT}), "not a heavy_hitters.json"),
    (json.dumps({"heavy_hitters": ["to"], "privacy": {}, "encoding": {**TEXT, "case_fold": True}}),
     "case_fold True there, False here"),
    (json.dumps({"heavy_hitters": ["to"], "privacy": {}, "encoding": {**TEXT, "kind": "bytes"}}),
     "kind 'bytes' there, 'text' here"),
    (json.dumps({"heavy_hitters": ["to"], "privacy": {}, "encoding": {**TEXT, "tokenizer": "words-1"}}),
     "tokenizer"),
    (json.dumps({"heavy_hitters": ["toolonger"], "privacy": {}, "encoding": TEXT}), "longer than this job's"),
    (json.dumps({"heavy_hitters": [3], "privacy": {}, "encoding": TEXT}), "is not a text item"),
])
def test_anything_else_is_refused_naming_the_file(tmp_path, content, reason):
    path = tmp_path / "list.json"
    path.write_text(content)
    with pytest.raises(DenyListError, match=reason) as refused:
        deny_lists.load([str(path)], ENCODER)
    assert str(path) in str(refused.value)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(DenyListError, match="cannot read"):
        deny_lists.load([str(tmp_path / "missing.json")], ENCODER)


def test_discover_refuses_a_bad_list_in_one_line_before_anything_is_spent(tmp_path, capsys):
    records = tmp_path / "records.jsonl"
    write_records(str(records), [(f"u{i}", "to", 1) for i in range(200)])
    raw = tmp_path / "words.txt"
    raw.write_text("to\nof\n")
    code = cli.main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
                     "--delta", "1e-8", "--max-length", "4", "--deny-list", f"{raw}"])
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(raw) in err and "never a hand-written list" in err, err
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "out.state" / "ledger.jsonl").exists()


def test_comma_separated_paths():
    assert deny_lists.parse_paths("a.json, gs://b/c.json,") == ("a.json", "gs://b/c.json")
    with pytest.raises(ValueError):
        deny_lists.parse_paths(" , ")


def test_a_dry_run_reads_and_checks_the_list(tmp_path, capsys):
    records = tmp_path / "records.jsonl"
    write_records(str(records), [(f"u{i}", "to", 1) for i in range(2000)])
    released = _release(tmp_path / "earlier.json", ["to", "of"])
    args = ["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
            "--delta", "1e-8", "--max-length", "4", "--dry-run", "--deny-list"]
    assert cli.main(args + [released]) == 0
    assert "deny list: 2 earlier heavy hitters from 1 file" in capsys.readouterr().out
    bad = _release(tmp_path / "folded.json", ["to"], case_fold=True)
    assert cli.main(args + [f"{released},{bad}"]) == 2
    assert "case_fold" in capsys.readouterr().err
