"""The secure-aggregation test vectors (tests/vectors/secagg_vectors.json, for a port to replay):
the committed file equals a fresh generation (a changed byte anywhere in it fails), and every
device replayed from its records, its seeded secrets and the server's requests sends exactly the
committed report bytes. (Not every request byte changes a device's answer: the choice word's
low 11 bits are not drawn from, and an alphabet unit the vote does not use leaves its slot.)
Every refusal vector (a request cut, of another version, round or token, replayed, a second
setup) is refused with its kind, which the Java suite checks too, and the unchanged request is
answered."""

from __future__ import annotations

import json
import random

import pytest

from tests.vectors.secagg_generate import VECTORS, build_vectors, replay_refusal
from triehh_beam.device import DeviceClient
from triehh_beam.device.secagg import SecureVoteSession
from triehh_beam.protocol.federated.messages import RoundAnnouncement
from triehh_beam.protocol.secagg.device import SecAggProtocolError
from triehh_beam.protocol.secagg.messages import SecAggRequest

DOCUMENT = json.loads(VECTORS.read_text())


def test_the_committed_vectors_are_fresh():
    assert build_vectors() == DOCUMENT


def _replay(device: dict, exchanges):
    """The device's report bytes for each request (raising what the device refuses)."""
    announcement = RoundAnnouncement.from_bytes(bytes.fromhex(DOCUMENT["announcement"]))
    client = DeviceClient(dict((item, count) for item, count in device["records"]))
    first = SecAggRequest.from_bytes(exchanges[0])
    session = SecureVoteSession(client, announcement, first, random.Random(device["seed"]).randbytes)
    return [session.keys()] + [session.handle_bytes(request) for request in exchanges[1:]]


@pytest.mark.parametrize("index", range(4))
def test_every_device_replays_to_the_committed_reports(index):
    device = DOCUMENT["devices"][index]
    requests = [bytes.fromhex(e["request"]) for e in device["exchanges"]]
    assert [r.hex() for r in _replay(device, requests)] == [e["report"] for e in device["exchanges"]]


def test_the_sum_is_the_plaintext_votes_of_the_devices_that_masked():
    slots = [tuple(c) for c in DOCUMENT["slots"]]
    assert sum(DOCUMENT["sum"]) == 3 and len(DOCUMENT["sum"]) == len(slots) + 2  # device 4 dropped


def test_a_one_byte_change_in_a_committed_report_is_caught():
    device = DOCUMENT["devices"][0]
    requests = [bytes.fromhex(e["request"]) for e in device["exchanges"]]
    expected = [bytes.fromhex(e["report"]) for e in device["exchanges"]]
    expected[2] = expected[2][:-1] + bytes([expected[2][-1] ^ 1])  # the masked vector's last byte
    got = _replay(device, requests)
    assert [i for i, (g, e) in enumerate(zip(got, expected)) if g != e] == [2]


def test_a_one_byte_change_in_an_inbox_ciphertext_is_refused():
    device = DOCUMENT["devices"][0]
    requests = [bytes.fromhex(e["request"]) for e in device["exchanges"]]
    requests[2] = requests[2][:-1] + bytes([requests[2][-1] ^ 1])  # the last ciphertext's GCM tag
    with pytest.raises(SecAggProtocolError, match="do not authenticate"):
        _replay(device, requests)


#: The refusal each vector names, as both libraries code it (``Refusal.code()`` in Java).
REFUSALS = {"cut_inside_a_field": "secagg:malformed", "another_schema_version": "secagg:version",
            "another_round": "secagg:mismatch", "another_token": "secagg:mismatch",
            "a_replayed_roster": "secagg:protocol", "a_second_setup": "secagg:protocol"}


@pytest.mark.parametrize("case", DOCUMENT["refusals"], ids=lambda case: case["name"])
def test_every_refusal_vector_is_refused_with_its_kind(case):
    announcement = RoundAnnouncement.from_bytes(bytes.fromhex(DOCUMENT["announcement"]))
    device = DOCUMENT["devices"][case["device"]]
    assert case["refusal"] == REFUSALS[case["name"]]
    assert replay_refusal(announcement, device, case["answered"], bytes.fromhex(case["request"])) == case["refusal"]


def test_the_refusal_vectors_cover_every_kind_and_the_unchanged_roster_is_answered():
    assert {case["name"] for case in DOCUMENT["refusals"]} == set(REFUSALS)
    announcement = RoundAnnouncement.from_bytes(bytes.fromhex(DOCUMENT["announcement"]))
    device = DOCUMENT["devices"][0]
    roster = bytes.fromhex(device["exchanges"][1]["request"])
    assert replay_refusal(announcement, device, 1, roster) == "answered"
