"""``job.settings.deny_lists``: a deny-list file must be a published ``heavy_hitters.json`` whose items
mean what this job's items mean and encode under its encoder; anything else is refused naming
the file and why; the digests move with the items (and the identity's with the files)."""

from __future__ import annotations

import json
import re

import pytest

from tests.published_releases import release_document
from triehh_beam import cli
from triehh_beam.io.write import write_records
from triehh_beam.job.settings import deny_lists
from triehh_beam.job.settings.deny_lists import DenyListError
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind

TEXT = {"kind": "text", "unit": "characters", "unit_size": 1, "case_fold": False, "int_bits": None,
        "tokenizer": None, "bytes_encoding": None, "long_items": "drop"}
ENCODER = ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=6)


def _release(path, items, **encoding):
    path.write_text(json.dumps(release_document(items, **encoding)))
    return str(path)


def test_items_of_several_releases_are_encoded_and_united(tmp_path):
    one = _release(tmp_path / "a.json", ["to", "of"])
    two = _release(tmp_path / "b.json", ["of", "and"], unit_size=3, long_items="truncate")  # another unit size
    with_estimates = json.loads((tmp_path / "b.json").read_text())
    with_estimates["heavy_hitters"][1] = {"item": "of", "estimate": 12, "interval": [3, 21]}  # as estimates are
    (tmp_path / "b.json").write_text(json.dumps(with_estimates))
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
    deny = deny_lists.load([_release(tmp_path / "b.json", [b"\x00\xff", b"a"], kind="bytes")], encoder)
    assert deny.sequences == {encoder.encode(b"\x00\xff"), encoder.encode(b"a")}
    ints = ItemEncoder(ItemKind.INT, unit_size=4, max_length=6, int_bits=20)
    deny = deny_lists.load([_release(tmp_path / "i.json", [7, -3], kind="int", unit_size=8, max_length=5, int_bits=32)], ints)
    assert deny.sequences == {ints.encode(7), ints.encode(-3)}


def _changed(items=("to",), **fields):
    document = release_document(list(items))
    for key, value in fields.items():
        document[key] = {**document[key], **value} if isinstance(value, dict) else value
    return json.dumps(document)


@pytest.mark.parametrize("content, reason", [
    ("not json {", "not JSON"),
    (json.dumps(["to", "of"]), "not a heavy_hitters.json published by a discovery"),
    (json.dumps({"heavy_hitters": ["to"]}), "no privacy, encoding"),
    (json.dumps({"heavy_hitters": "to", "privacy": {}, "encoding": TEXT}), "not a heavy_hitters.json"),
    (_changed(encoding={"case_fold": True}), "case_fold True there, False here"),
    (_changed(encoding={"kind": "bytes"}), "kind 'bytes' there, 'text' here"),
    (_changed(encoding={"tokenizer": "words-1"}), "tokenizer"),
    (json.dumps(release_document(["toolonger"], max_length=10)), "longer than this job's"),
    (_changed(heavy_hitters=[3]), "is not a text item"),
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
    code = cli.main(["discover", "--protocol", "triehh", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
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
    args = ["discover", "--protocol", "triehh", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
            "--delta", "1e-8", "--max-length", "4", "--dry-run", "--deny-list"]
    assert cli.main(args + [released]) == 0
    assert "deny list: 2 earlier heavy hitters from 1 file" in capsys.readouterr().out
    bad = _release(tmp_path / "folded.json", ["to"], case_fold=True)
    assert cli.main(args + [f"{released},{bad}"]) == 2
    assert "case_fold" in capsys.readouterr().err


# ---- content: a deny list must be what this product published, not only shaped like it -------

RAW = [f"{a}{b}{c}" for a in "abcdefghij" for b in "klmnopqrst" for c in "uvwxy"]  # 500 raw items


def test_the_forged_500_item_file_is_refused(tmp_path):
    """The reproduction: 500 raw items under the blocks a release has, accepted for its shape."""
    forged = tmp_path / "heavy_hitters.json"
    forged.write_text(json.dumps({"heavy_hitters": RAW, "privacy": {"protocol": "triehh"}, "encoding": TEXT}))
    with pytest.raises(DenyListError, match="not a release this product published") as refused:
        deny_lists.load([str(forged)], ENCODER)
    assert str(forged) in str(refused.value) and "\n" not in str(refused.value)


def test_500_items_in_a_real_release_are_more_than_its_plan_could_release(tmp_path):
    """A real output (n public, so m is published) with its items swapped for 500 raw ones:
    round 3 would have kept 500 prefixes where its plan keeps at most floor(m / theta)."""
    real = release_document(["the", "and", "for"], population=200_000, m=4709, theta=14)
    path = tmp_path / "heavy_hitters.json"
    path.write_text(json.dumps(real))
    assert deny_lists.load([str(path)], ENCODER).size == 3  # the real output is accepted
    path.write_text(json.dumps({**real, "heavy_hitters": RAW}))
    with pytest.raises(DenyListError) as refused:
        deny_lists.load([str(path)], ENCODER)
    message = str(refused.value)
    assert str(path) in message and "\n" not in message
    assert ("500 prefixes of 3 units in its heavy hitters, more than round 3 could keep under its own plan "
            "(floor(batch_size / theta) = floor(4,709 / 14) = 336)") in message, message
    # Within the bound (m = 140,000: 10,000 per round) the same items are a possible release.
    path.write_text(json.dumps({**release_document(["the"], population=200_000, m=140_000, theta=14),
                                "heavy_hitters": RAW}))
    assert deny_lists.load([str(path)], ENCODER).size == 500


def _privacy(**changes):
    return _changed(privacy=changes)


@pytest.mark.parametrize("content, reason", [
    (_privacy(protocol="pem"), "protocol 'pem', none this product runs"),
    (_privacy(theta=0), "theta 0 is outside"),
    (_privacy(target_epsilon="4"), "no valid target_epsilon"),
    (_privacy(population_public=None), "whether n is public"),
    (_changed(rounds_run=2), "a heavy hitter of 3 units, beyond its 2 rounds"),
    (_changed(items=("to", "of"), heavy_hitters=["to", "to"]), "more than once"),
    (_changed(job_id=None), "rounds_run, frequent_prefixes, stop_reason, job_id or created_at"),
    (_changed(encoding={"long_items": None}), "no long_items policy"),
    (json.dumps({**release_document(["to"], population=1000, m=2000)}), "batch size 2,000 exceeds its population 1,000"),
])
def test_a_release_whose_fields_disagree_is_refused(tmp_path, content, reason):
    path = tmp_path / "list.json"
    path.write_text(content)
    with pytest.raises(DenyListError, match=re.escape(reason)) as refused:
        deny_lists.load([str(path)], ENCODER)
    assert str(path) in str(refused.value) and "not a release this product published" in str(refused.value)


@pytest.fixture(scope="module")
def whole_item_release(tmp_path_factory):
    """A real whole-item (sample-and-threshold) output, n declared public."""
    root = tmp_path_factory.mktemp("whole")
    records = root / "records.jsonl"
    write_records(str(records), [(f"u{i}", ["to", "of", "in"][i % 3], 1) for i in range(6000)])
    assert cli.main(["discover", "--protocol", "triehh", "--input", str(records), "--output", str(root / "out"), "--epsilon", "1",
                     "--delta", "1e-6", "--max-length", "4", "--protocol", "sample-threshold",
                     "--population", "6000"]) == 0
    return json.loads((root / "out" / "heavy_hitters.json").read_text())


def test_a_real_whole_item_release_is_accepted_and_its_counts_checked(whole_item_release, tmp_path):
    document = whole_item_release
    assert document["privacy"]["protocol"] == "sample-threshold" and document["heavy_hitters"]
    path = tmp_path / "heavy_hitters.json"
    path.write_text(json.dumps(document))
    assert deny_lists.load([str(path)], ENCODER).size == len(document["heavy_hitters"])
    tau = document["privacy"]["tau"]
    below = [dict(entry, count=tau - 1) for entry in document["released"]]
    path.write_text(json.dumps({**document, "released": below}))
    with pytest.raises(DenyListError, match=f"below its tau {tau}"):
        deny_lists.load([str(path)], ENCODER)
    path.write_text(json.dumps({**document, "privacy": {**document["privacy"], "sample_probability": 0.5}}))
    with pytest.raises(DenyListError, match="sample_probability is not alpha"):
        deny_lists.load([str(path)], ENCODER)
    many = document["privacy"]["population"] // tau + 1
    items = RAW[:many]
    path.write_text(json.dumps({**document, "heavy_hitters": items,
                                "released": [{"item": v, "count": tau, "estimate": 1.0} for v in items]}))
    with pytest.raises(DenyListError, match=f"add up to {many * tau:,} reports, more than its 6,000 users"):
        deny_lists.load([str(path)], ENCODER)  # at least tau reports each: more than floor(n / tau) items
