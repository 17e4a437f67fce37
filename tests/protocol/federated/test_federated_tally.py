"""A federated round's count labels every message once, counts only first reports of issued
tokens that extend the frontier, and releases nothing below theta."""

import random

from triehh_beam.protocol.federated.messages import VoteReport
from triehh_beam.protocol.federated.tally import KINDS, RoundTally
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind

ENCODER = ItemEncoder(kind=ItemKind.TEXT, unit_size=1, max_length=6)
JOB = "federated-test"


def _token(i: int) -> bytes:
    return i.to_bytes(16, "little")


def _report(i, prefix, round_index=2, job=JOB) -> bytes:
    return VoteReport(job_id=job, round_index=round_index, token=_token(i), prefix=prefix).to_bytes()


def _tally(theta=3, tokens=range(100)):
    return RoundTally(JOB, 2, ENCODER, {("a",), ("b",)}, frozenset(_token(i) for i in tokens), theta)


def test_every_kind_of_message_gets_its_label():
    tally = _tally()
    cases = [
        (_report(0, ("a", "x")), "voted"),
        (_report(1, None), "abstained"),
        (_report(2, ("c", "x")), "off_frontier"),
        (_report(0, ("a", "y")), "duplicate"),  # the token reported already: its first report stands
        (_report(500, ("a", "x")), "not_selected"),
        (_report(3, ("a",), round_index=1), "late"),
        (_report(4, ("a", "x", "z"), round_index=3), "unannounced"),
        (_report(5, ("a", "x"), job="another-job"), "other_job"),
        (b"\x0a\x03not a report", "malformed"),
        (b"\xff\xff", "malformed"),
        (_report(7, ("a", "x", "y", "z"), round_index=4, job="another-job")[:-2], "malformed"),
        (_report(6, ("a", "x"))[:-3], "malformed"),
    ]
    for data, kind in cases:
        assert tally.add(data) == kind, kind
    assert tally.reported == 3  # tokens 0, 1, 2: what the report goal counts
    assert sum(tally.label_counts().values()) == len(cases)
    assert set(tally.label_counts()) == set(KINDS)


def test_only_prefixes_at_theta_leave_and_duplicates_never_add_a_vote():
    tally = _tally(theta=3)
    for i in range(3):
        tally.add(_report(i, ("a", "x")))
    for i in range(3, 5):
        tally.add(_report(i, ("b", "q")))
    for _ in range(10):  # one device resending cannot lift ("b", "q") to theta
        tally.add(_report(3, ("b", "q")))
    assert tally.kept() == [("a", "x")]
    assert tally.label_counts()["duplicate"] == 10


def test_the_count_equals_a_plain_count_of_first_reports():
    rng = random.Random(7)
    tally = _tally(theta=5, tokens=range(300))
    messages, first = [], {}
    for _ in range(2000):
        i = rng.randrange(400)  # 300 issued tokens, 100 forged
        prefix = rng.choice([("a", "x"), ("a", "y"), ("b", "z"), ("c", "z"), None])
        messages.append((i, prefix))
        if i < 300:
            first.setdefault(i, prefix)
    for i, prefix in messages:
        tally.add(_report(i, prefix))
    votes = {}
    for prefix in first.values():
        if prefix is not None and prefix[0] in ("a", "b"):
            votes[prefix] = votes.get(prefix, 0) + 1
    assert tally.kept() == sorted(p for p, n in votes.items() if n >= 5)
    labels = tally.label_counts()
    assert labels["voted"] == sum(votes.values())
    assert labels["not_selected"] == sum(1 for i, _ in messages if i >= 300)
    assert sum(labels.values()) == len(messages)


def test_another_jobs_report_with_another_encoding_is_another_jobs():
    # A job with a longer L shares the subscription: its round-7 report cannot be read with this
    # job's encoding, yet it is another job's report, not a malformed one.
    other = ItemEncoder(kind=ItemKind.TEXT, unit_size=1, max_length=10)
    data = VoteReport(job_id="another-job", round_index=7, token=_token(1), prefix=tuple("abcdefg")).to_bytes()
    assert VoteReport.from_bytes(data, other).round_index == 7
    assert _tally().add(data) == "other_job"
