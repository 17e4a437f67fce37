"""The estimate round's messages and count (protocol/federated/estimate.py, the estimate side of
protocol/federated/messages.py and protocol/federated/tally.py): the announcement round-trips for every
item kind, every cut of each estimate message is refused, a version-1 reader refuses all three
(so an old device can never answer the estimate round as a vote round), malformed targets are
refused, every enrolled device is invited with a token of its own and the word behind the
central estimate's uniform, and the tally labels every message once and releases exactly
``frequency_estimates.release`` of the plain count of first reports."""

import random

import numpy as np
import pytest

from triehh_beam.proto import federated_pb2, vote_pb2
from triehh_beam.protocol.estimates.frequency_estimates import EstimateKeys, EstimateTargets, release
from triehh_beam.protocol.federated.estimate import (EstimateAnnouncement, estimate_invitations,
                                                     read_announcement)
from triehh_beam.protocol.federated.messages import (ESTIMATE_SCHEMA_VERSION, TOKEN_BYTES,
                                                     FederatedFormatError, Invitation, RoundAnnouncement,
                                                     VoteReport)
from triehh_beam.protocol.federated.selection import Registry, select_round
from triehh_beam.protocol.federated.tally import ESTIMATE_KINDS, EstimateTally, RoundTally
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.sampling import Sampler, uniform_from_word

TEXT = ItemEncoder(max_length=6)
TOKEN = bytes(range(TOKEN_BYTES))
DEADLINE = 1_790_000_000_000
JOB = "job-7"

# (encoder, targets: heavy hitters end with the terminator "" / b"", frequent prefixes do not)
CASES = {
    "text": (TEXT, [("f", "e", "d", ""), ("h", "é", "l", "l", "o", "w"), ("t", "o", "")]),
    "text-units-2": (ItemEncoder(unit_size=2, max_length=4, case_fold=True, tokenize=True),
                     [("he", "ll", "o", ""), ("日本", "語", ""), ("wo", "rl", "d!", "ab")]),
    "bytes": (ItemEncoder(kind="bytes", unit_size=1, max_length=4), [(b"\x00", b""), (b"a", b"b", b"c", b"d")]),
    "int": (ItemEncoder(kind="int", int_bits=4, unit_size=2, max_length=3), [(b"10", b"01", b""), (b"01", b"11", b"")]),
}


def announcement(case="text", **changes) -> EstimateAnnouncement:
    encoder, targets = CASES[case]
    fields = dict(job_id=JOB, round_index=9, encoder=encoder, targets=EstimateTargets(tuple(targets)),
                  deadline_millis=DEADLINE, report_goal=0, too_long="drop")
    fields.update(changes)
    return EstimateAnnouncement(**fields)


# ---- the messages ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("too_long, goal", [("drop", 0), ("truncate", 4321)])
def test_an_estimate_announcement_round_trips(case, too_long, goal):
    sent = announcement(case, too_long=too_long, report_goal=goal)
    data = sent.to_bytes()
    assert EstimateAnnouncement.from_bytes(data) == sent == read_announcement(data)
    assert sent.targets.sequences == tuple(sorted(tuple(t) for t in CASES[case][1]))
    assert federated_pb2.EstimateAnnouncement.FromString(data).schema_version == ESTIMATE_SCHEMA_VERSION == 2


def test_read_announcement_reads_a_vote_rounds_announcement_too():
    vote = RoundAnnouncement(JOB, 2, TEXT, {("a",), ("b",)}, DEADLINE)
    assert read_announcement(vote.to_bytes()) == vote


def test_the_estimate_round_may_come_after_round_l():
    """Its index is vote rounds run + 1: L + 1 when the vote rounds ran to L."""
    sent = announcement(round_index=TEXT.max_length + 1)
    assert EstimateAnnouncement.from_bytes(sent.to_bytes()).round_index == 7
    report = VoteReport(JOB, 7, TOKEN, ("t", "o", ""), estimate=True)
    assert VoteReport.from_bytes(report.to_bytes(), TEXT) == report


def _every_cut_is_refused(data, parse):
    for end in range(len(data)):
        with pytest.raises(FederatedFormatError):
            parse(data[:end])


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_cut_of_an_estimate_announcement_is_refused(case):
    data = announcement(case, report_goal=99).to_bytes()
    _every_cut_is_refused(data, EstimateAnnouncement.from_bytes)
    _every_cut_is_refused(data, read_announcement)


def test_every_cut_of_an_estimate_invitation_and_report_is_refused():
    invitation = Invitation(JOB, 9, b"device-1", TOKEN, 2**64 - 1, estimate=True)
    assert Invitation.from_bytes(invitation.to_bytes()) == invitation
    _every_cut_is_refused(invitation.to_bytes(), Invitation.from_bytes)
    for target in (("f", "e", "d", ""), ("h", "é", "l", "l", "o", "w"), None):
        report = VoteReport(JOB, 9, TOKEN, target, estimate=True)
        assert VoteReport.from_bytes(report.to_bytes(), TEXT) == report
        _every_cut_is_refused(report.to_bytes(), lambda d: VoteReport.from_bytes(d, TEXT))


def test_a_version_one_reader_refuses_every_estimate_message():
    """A device built before estimates reads schema_version 1 only: each estimate message says
    2. And were a reader to skip the version check, the announcement read as a vote round's has
    no frontier, and its last field (the target count) makes the frontier's count disagree."""
    data = announcement().to_bytes()
    with pytest.raises(FederatedFormatError, match="schema_version 2"):
        RoundAnnouncement.from_bytes(data)
    as_vote_round = federated_pb2.RoundAnnouncement.FromString(data)
    assert as_vote_round.schema_version == 2 and list(as_vote_round.frontier_shared) == []
    as_vote_round.schema_version, as_vote_round.round_index = 1, 3  # a round a vote round could have
    with pytest.raises(FederatedFormatError, match="0 frontier prefixes but frontier_count 3"):
        RoundAnnouncement.from_proto(as_vote_round)
    invitation = Invitation(JOB, 9, b"device-1", TOKEN, 5, estimate=True).to_bytes()
    report = VoteReport(JOB, 9, TOKEN, ("t", "o", ""), estimate=True).to_bytes()
    assert federated_pb2.Invitation.FromString(invitation).schema_version == 2
    assert federated_pb2.VoteReport.FromString(report).schema_version == 2
    # A vote round's invitation and report keep version 1: version-1 devices still vote.
    assert federated_pb2.Invitation.FromString(Invitation(JOB, 3, b"d", TOKEN, 5).to_bytes()).schema_version == 1


def _message(**fields):
    message = federated_pb2.EstimateAnnouncement.FromString(announcement().to_bytes())
    for name, value in fields.items():
        if value is None:
            message.ClearField(name)
        else:
            setattr(message, name, value)
    return message


def _targets(*units, count=None):
    message = _message()
    del message.targets[:]
    message.targets.extend(vote_pb2.Prefix(units=list(u)) for u in units)
    message.target_count = len(units) if count is None else count
    return message.SerializeToString()


@pytest.mark.parametrize("data, problem", [
    (_message(schema_version=1).SerializeToString(), "schema_version 1; this reader understands schema_version 2"),
    (_message(schema_version=0).SerializeToString(), "no schema_version"),
    (_message(encoding=None).SerializeToString(), "no encoding"),
    (_message(long_items=0).SerializeToString(), "unknown or unspecified long_items 0"),
    (_message(deadline_millis=0).SerializeToString(), "deadline_millis"),
    (_message(round_index=0).SerializeToString(), "rounds are numbered from 1"),
    (_message(job_id="").SerializeToString(), "the job id"),
    (_message(target_count=None).SerializeToString(), "3 targets but target_count no count"),
    (_targets((b"t", b"o", b""), (b"f", b"e", b"d", b"")), "out of canonical order"),
    (_targets((b"f", b""), (b"f", b"")), "out of canonical order, or repeated"),
    (_targets((b"f", b"e"), (b"f", b"e", b"d", b"")), "is a prefix of"),
    (_targets(), "no target"),
    (_targets((b"f", b"", b"d")), "terminator at position 1"),
    (_targets((b"fe", b"d")), "longer than unit_size=1"),
    (_targets((b"\xff",)), "is not UTF-8"),
    (_targets((b"a",) * 7), "more than max_length=6"),
    (_targets((b"a",), (b"b",), count=1), "2 targets but target_count 1"),
])
def test_a_malformed_estimate_announcement_is_refused(data, problem):
    with pytest.raises(FederatedFormatError, match=problem) as caught:
        EstimateAnnouncement.from_bytes(data, source="topic announce-7")
    assert caught.value.source == "topic announce-7"


@pytest.mark.parametrize("changes, problem", [
    (dict(prefix=()), "at least one unit"),
    (dict(prefix=("a", b"b")), "units are all str or all bytes"),
    (dict(estimate=1), "estimate is a bool"),
])
def test_an_invalid_estimate_report_cannot_be_built(changes, problem):
    fields = dict(job_id=JOB, round_index=9, token=TOKEN, prefix=("a",), estimate=True)
    fields.update(changes)
    with pytest.raises(ValueError, match=problem):
        VoteReport(**fields)


# ---- who is invited, with what ------------------------------------------------------------


def test_every_enrolled_device_is_invited_with_the_central_estimates_uniform():
    rng = random.Random(3)
    ids = [f"device-{rng.getrandbits(40)}" for _ in range(5000)] + ["é", "0"]
    registry = Registry.from_ids(ids)
    sampler = Sampler(bytes(range(40, 72)), b"estimate-identity")
    invited = estimate_invitations(sampler, registry, 6)
    assert invited.device_ids == list(registry.ids) and len(invited) == len(registry) == 5002
    keys = EstimateKeys.derive(sampler.seed, sampler.identity)
    central = keys.choice_uniforms(registry.ids)  # the central estimate's uniform per user
    device = np.array([uniform_from_word(int(w)) for w in invited.choice_words])
    assert np.array_equal(device.view(np.uint64), central.view(np.uint64))  # bit for bit
    assert np.array_equal(invited.choice_words, keys.user_hashes_packed(*keyed_hash.pack_messages(registry.ids)))
    # Tokens: 16 bytes, one per device, and none of a vote round's (independent keys).
    assert len(invited.token_set()) == len(registry) and {len(t) for t in invited.tokens} == {TOKEN_BYTES}
    for r in (1, 5, 6):
        assert not invited.token_set() & select_round(sampler, registry, r, batch_size=3000).token_set()
    # Another seed, other words and tokens.
    other = estimate_invitations(Sampler(bytes(range(41, 73)), b"estimate-identity"), registry, 6)
    assert not set(other.tokens) & invited.token_set()
    assert np.mean(other.choice_words == invited.choice_words) < 0.001


# ---- the count ----------------------------------------------------------------------------


TARGETS = EstimateTargets((("f", "e", "d", ""), ("t", "o", ""), ("h", "e", "l", "l", "o", "w")))


def _token(i: int) -> bytes:
    return i.to_bytes(16, "little")


def _report(i, target, round_index=9, job=JOB, estimate=True) -> bytes:
    return VoteReport(job, round_index, _token(i), target, estimate=estimate).to_bytes()


def _tally(tokens=range(100)):
    return EstimateTally(JOB, 9, TEXT, TARGETS, frozenset(_token(i) for i in tokens))


def test_every_kind_of_message_gets_its_estimate_label():
    tally = _tally()
    cases = [
        (_report(0, ("t", "o", "")), "counted"),
        (_report(1, None), "abstained"),
        (_report(2, ("t", "o")), "off_target"),  # a prefix of a target is not one
        (_report(3, ("f", "e", "d", "x")), "off_target"),
        (_report(0, ("f", "e", "d", "")), "duplicate"),  # its first report stands
        (_report(500, ("t", "o", "")), "not_selected"),
        (_report(4, ("a", "b"), round_index=2, estimate=False), "late"),  # a vote round's
        (_report(5, ("a",) * 6, round_index=6, estimate=False), "late"),
        (_report(6, ("t", "o", ""), round_index=8), "late"),
        (_report(7, ("t", "o", ""), round_index=10), "unannounced"),
        (_report(8, ("t", "o", ""), job="another-job"), "other_job"),
        (b"\x0a\x03not a report", "malformed"),
        (_report(9, ("t", "o", ""))[:-2], "malformed"),
    ]
    for data, kind in cases:
        assert tally.add(data) == kind, kind
    assert tally.reported == 4  # tokens 0, 1, 2, 3
    assert sum(tally.label_counts().values()) == len(cases) and set(tally.label_counts()) == set(ESTIMATE_KINDS)


def test_a_vote_rounds_count_labels_estimate_reports_unannounced_and_the_drain_late():
    during = RoundTally(JOB, 3, TEXT, {("a", "b")}, frozenset({_token(0)}), 1)
    assert during.add(_report(0, ("t", "o", ""), round_index=4)) == "unannounced"
    after = RoundTally(JOB, 5, TEXT, (), frozenset(), 1)  # the drain after estimate round 4
    assert after.add(_report(0, ("t", "o", ""), round_index=4)) == "late"
    assert during.kept() == after.kept() == []


def test_the_release_is_frequency_estimates_release_of_the_first_reports():
    rng = random.Random(11)
    tally = _tally(range(2000))
    keys = EstimateKeys.derive(bytes(range(16)), b"job")
    expected = [0, 0, 0]
    answered = set()
    for _ in range(5000):
        i = rng.randrange(2200)
        choice = rng.randrange(5)
        target = TARGETS.sequences[choice] if choice < 3 else (None if choice == 3 else ("z",))
        kind = tally.add(_report(i, target))
        if i < 2000 and i not in answered:
            answered.add(i)
            if choice < 3:
                expected[choice] += 1
                assert kind == "counted"
        else:
            assert kind in ("duplicate", "not_selected")
    assert sum(expected) > 1000
    released = tally.release(1.0, keys)
    assert released == release(expected, TARGETS, 1.0, keys)
    assert released.estimates != tuple(expected)  # noisy (at these seeds)
