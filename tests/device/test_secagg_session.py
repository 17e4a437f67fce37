"""A secure round over the wire messages: devices (``SecureVoteSession``, votes exactly
``DeviceClient``'s) and the server's ``SecureRound`` exchanging only serialized messages; with no
dropout the kept prefixes equal the plaintext tally's (``RoundTally`` over the same reports),
with dropouts at every phase the count equals the plaintext count over the devices left in the
unmasked cohorts, a cohort below its threshold is dropped whole and counted, and no message the
server receives holds a device's plaintext vote encoding."""

import random

import numpy as np
import pytest

from triehh_beam.device import DeviceClient
from triehh_beam.device.secagg import SecureVoteSession
from triehh_beam.protocol.federated.messages import Invitation, RoundAnnouncement
from triehh_beam.protocol.federated.tally import RoundTally
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.secagg.cohorts import CohortPolicy
from triehh_beam.protocol.secagg.messages import SecAggRequest
from triehh_beam.protocol.secagg.round import SecureRound
from triehh_beam.protocol.secagg.server import Phase
from triehh_beam.protocol.secagg.vectors import round_candidates

JOB = "job-secagg-wire"
ALPHABET = "abcdefgh"
WORDS = ["abc", "abd", "ab", "bad", "bag", "cafe", "face", "head", "zzz"]


def _round(devices=60, seed=7, policy=CohortPolicy(max_size=20, min_size=5), drops=None):
    rng = random.Random(seed)
    encoder = ItemEncoder(max_length=6)
    frontier = {("a",), ("b",), ("c",), ("f",), ("h",)}
    announcement = RoundAnnouncement(JOB, 2, encoder, frontier, 1_790_000_000_000)
    clients = [DeviceClient({rng.choice(WORDS): 1 + rng.randrange(3), rng.choice(WORDS): 1}) for _ in range(devices)]
    invitations = [Invitation(JOB, 2, b"device-%d" % i, rng.randbytes(16), rng.getrandbits(64)) for i in range(devices)]
    plain = {inv.token: c.respond(announcement, inv) for c, inv in zip(clients, invitations)}
    slots = round_candidates(frontier, list(ALPHABET), encoder.eos)
    server = SecureRound(JOB, 2, [inv.token for inv in invitations], policy, slots,
                         tuple(u.encode() for u in ALPHABET))
    seen = []  # every byte the server received
    requests = server.setups({inv.token: inv.to_bytes() for inv in invitations})
    client_of = {inv.token: (i, c) for i, (c, inv) in enumerate(zip(clients, invitations))}
    sessions, gone = {}, set()
    for phase in Phase:
        gone |= set((drops or {}).get(phase, ()))
        for token, request in requests:
            if token in gone:
                continue
            if phase is Phase.KEYS:
                i, client = client_of[token]
                sessions[token] = SecureVoteSession(client, announcement, SecAggRequest.from_bytes(request),
                                                    random.Random(seed * 1000 + i).randbytes)
                report = sessions[token].keys()
            else:
                report = sessions[token].handle_bytes(request)
            seen.append(report)
            assert server.add(report) == "counted"
        requests = server.close_phase()
    return server, plain, announcement, seen, gone


def _plain_kept(plain, announcement, tokens, theta):
    tally = RoundTally(JOB, 2, announcement.encoder, announcement.frontier, frozenset(tokens), theta)
    for token in tokens:
        tally.add(plain[token].to_bytes())
    return tally.kept()


def test_no_dropout_keeps_what_the_plaintext_tally_keeps():
    server, plain, announcement, _, _ = _round()
    for theta in (1, 3, 6):
        assert server.kept(theta) == _plain_kept(plain, announcement, list(plain), theta)
    summary = server.summary()
    assert (summary["cohorts"], summary["unmasked"], summary["devices_summed"]) == (3, 3, 60)


def test_dropouts_at_every_phase_sum_the_devices_left():
    rng = random.Random(5)
    tokens = None
    server, plain, announcement, _, _ = _round()
    tokens = sorted(plain)
    drops = {phase: set(rng.sample(tokens, 9)) for phase in Phase}  # 15% of 60 at each phase
    server, plain, announcement, _, gone = _round(drops=drops)
    summary = server.summary()
    summed = [t for c in server.cohorts if c.total is not None
              for i, t in enumerate(c.tokens) if i + 1 in c.server.survivors]
    assert summary["devices_summed"] == len(summed)
    # Survivors are those that sent a masked vector: not dropped before the unmasking phase.
    before_unmask = drops[Phase.KEYS] | drops[Phase.SHARES] | drops[Phase.MASKED]
    assert all(t not in before_unmask for t in summed)
    expected = np.zeros(server.slots.length, dtype=np.int64)
    for t in summed:
        expected[server.slots.slot(plain[t].prefix)] += 1
    assert server.total().tolist() == expected.tolist()
    assert summary["unmasked"] + sum(summary["dropped_by_phase"].values()) == summary["cohorts"]


def test_a_cohort_below_its_threshold_is_dropped_whole_and_counted():
    server, plain, _, _, _ = _round()
    first = server.cohorts[0].tokens
    server, plain, _, _, _ = _round(drops={Phase.SHARES: set(first[:8])})  # 12 of 20 left, threshold 14
    summary = server.summary()
    assert summary["dropped_by_phase"] == {"shares": 1}
    assert summary["devices_in_dropped_cohorts"] == 20 and summary["devices_summed"] == 40


def test_the_server_never_receives_a_plaintext_vote_encoding():
    server, plain, announcement, seen, _ = _round(devices=20, policy=CohortPolicy(max_size=20, min_size=5))
    for token, report in plain.items():
        one_hot = server.slots.one_hot(report.prefix).astype("<u4").tobytes()
        vote = report.to_bytes()
        for message in seen:
            assert one_hot not in message and vote not in message


def test_reports_are_labelled():
    server, plain, _, seen, _ = _round(devices=10, policy=CohortPolicy(max_size=10, min_size=5))
    assert server.add(seen[0]) == "duplicate"  # a second copy of a keys report, after the round
    assert server.kinds["duplicate"] == 1 and server.kinds["counted"] == 40
    token = sorted(plain)[0]
    other = SecureRound(JOB, 2, sorted(plain), CohortPolicy(max_size=10, min_size=5), server.slots)
    setup = dict(other.setups({t: b"inv" for t in plain}))[token]
    assert SecAggRequest.from_bytes(setup).phase.index == 1
    assert other.add(b"\x08\x09") == "malformed"
    assert other.kinds["malformed"] == 1
