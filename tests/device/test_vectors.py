"""The shared device test vectors (tests/vectors/device_vectors.json, which device-java's JUnit
suite also runs) against the Python device library: the committed files are exactly what
``tests/vectors/generate.py`` writes today, every case's committed answer (report bytes or
refusal kind) is what ``DeviceClient.respond_bytes`` gives, the vectors reach every refusal kind
of both messages, votes, abstentions and estimate reports, and the comparison catches a one-byte
difference."""

import collections
import json

import pytest

from tests.vectors import generate
from tests.vectors.cases import record_sets

VECTORS = json.loads(generate.VECTORS.read_text(encoding="ascii"))


def _item(value: dict):
    (kind, raw), = value.items()
    return {"text": lambda: raw, "bytes": lambda: bytes.fromhex(raw), "int": lambda: int(raw),
            "bool": lambda: raw}[kind]()


def _records(name: str):
    record_set = VECTORS["record_sets"][name]
    device_id = None if record_set["device_id"] is None else bytes.fromhex(record_set["device_id"])
    return [(_item(item), count) for item, count in record_set["records"]], device_id


def disagreements(cases) -> list:
    """The names of the cases whose committed answer the Python device does not give."""
    messages = [bytes.fromhex(m) for m in VECTORS["messages"]]
    records = {name: _records(name) for name in VECTORS["record_sets"]}
    wrong = []
    for case in cases:
        got = generate.answer(*records[case["records"]], messages[case["announcement"]],
                              messages[case["invitation"]])
        expected = {key: case[key] for key in ("report", "refusal") if key in case}
        if got != expected:
            wrong.append(case["name"])
    return wrong


def test_the_committed_vectors_and_tables_are_a_fresh_generation():
    assert generate.stale(generate.generated()) == [], "run: python tests/vectors/generate.py"


def test_the_python_device_gives_every_committed_answer():
    assert VECTORS["format"] == generate.FORMAT
    assert len(VECTORS["cases"]) > 5000
    assert disagreements(VECTORS["cases"]) == []


def test_the_json_records_read_back_as_the_generated_record_sets():
    for name, record_set in record_sets().items():
        assert _records(name) == (list(record_set.records), record_set.device_id)


def test_a_one_byte_difference_in_an_expected_report_is_caught():
    case = next(c for c in VECTORS["cases"] if "report" in c and c["name"].startswith("unicode/"))
    report = bytearray.fromhex(case["report"])
    report[-1] ^= 1
    assert disagreements([{**case, "report": report.hex()}]) == [case["name"]]
    refused = next(c for c in VECTORS["cases"] if c.get("refusal") == "announcement:invalid")
    assert disagreements([{**refused, "refusal": "announcement:malformed"}]) == [refused["name"]]


def test_the_vectors_reach_every_refusal_and_every_kind_of_answer():
    answers = collections.Counter(c.get("refusal", "report") for c in VECTORS["cases"])
    for message in ("announcement", "invitation"):
        for kind in ("malformed", "version", "invalid"):
            assert answers[f"{message}:{kind}"] >= 3, (message, kind)
    assert answers["invitation:mismatch"] >= 3 and set(VECTORS["refusal_kinds"]) == set(generate.REFUSAL_KINDS)
    assert set(answers) <= {f"{m}:{k}" for m in ("announcement", "invitation") for k in generate.REFUSAL_KINDS} | {
        "report"}
    # Reports: votes and abstentions (field 6, the empty Abstain: bytes 32 00 at the end), of vote
    # rounds (schema_version 1: 08 01) and of the estimate round (08 02), for every record set.
    reports = [c for c in VECTORS["cases"] if "report" in c]
    abstain = [c for c in reports if c["report"].endswith("3200")]
    assert len(abstain) >= 100 and len(reports) - len(abstain) >= 1000
    assert sum(c["report"].startswith("0802") for c in reports if c not in abstain) >= 100
    voted_sets = {c["records"] for c in reports if c not in abstain}
    assert voted_sets >= set(VECTORS["record_sets"]) - {"empty", "zeros"}


@pytest.mark.parametrize("prefix", ["unicode/", "casefold/", "sentences/", "ints/", "int_text/", "bytes/", "long/"])
def test_each_record_set_votes_for_several_distinct_prefixes(prefix):
    votes = {c["report"] for c in VECTORS["cases"] if c["name"].startswith(prefix) and "report" in c
             and not c["report"].endswith("3200")}
    assert len(votes) >= 10, prefix
