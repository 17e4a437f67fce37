"""Tests of triehh_beam.io.pubsub.pull against the Pub/Sub emulator (skipped with one line where
it is absent): how far a subscription has been read moves only with a pull that returned less
than it asked for (a backlog holds it back); a message the emulator redelivers (nacked, or its
ack deadline lapsed) is passed on once under its key and acknowledged with it; settled messages
are never delivered again; the backlog is counted without acknowledging anything."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions as api_exceptions
from google.cloud import pubsub_v1

from triehh_beam.io.pubsub import pull as pubsub_pull
from triehh_beam.io.pubsub.pull import PullReader


def _publish(emulator, topic, count, stem=b"m"):
    futures = [emulator.publisher.publish(topic, stem + b"%d" % i) for i in range(count)]
    return [f.result(timeout=60) for f in futures]


def _drain(reader, seconds=10.0):
    """Every message ``reader`` delivers within ``seconds``, until a pull brings none."""
    got = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = reader.pull()
        got.extend(batch)
        if not batch:
            break
    return got


class _Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def test_read_through_is_the_oldest_unread_publish_time_and_waits_for_a_killed_readers_leases(pubsub_emulator):
    paths = pubsub_emulator.topic("through")
    _publish(pubsub_emulator, paths["topic"], 25)
    clock = _Clock(time.time())
    reader = PullReader(paths["subscription"], max_messages=10, ack_deadline_s=30, clock=clock)
    try:
        # Within the first ack deadline a killed reader's leases may still hide messages: the
        # subscription is not read through, whatever the pulls bring.
        first = reader.pull()
        assert len(first) == 10 and reader.read_through is None
        clock.now += 36  # the first ack deadline and the redelivery margin
        seen, marks = list(first), []
        while len(seen) < 25:  # the backlog: each pull's oldest message is how far it is read
            batch = reader.pull()
            seen.extend(batch)
            if batch:
                assert reader.read_through == max(marks + [min(m.publish_micros for m in batch) / 1e6])
                marks.append(reader.read_through)
        assert reader.read_through < time.time()
        assert reader.pull() == []  # empty: read through the time it was sent
        assert reader.read_through == clock.now
        assert len({m.message_id for m in seen}) == 25
        clock.now -= 100  # a later pull never moves it back
        reader.pull()
        assert reader.read_through == clock.now + 100
    finally:
        reader.close()


def test_a_nacked_message_is_redelivered_and_passed_on_once(pubsub_emulator):
    paths = pubsub_emulator.topic("nack")
    ids = _publish(pubsub_emulator, paths["topic"], 30)
    reader = PullReader(paths["subscription"], max_messages=100)
    try:
        first = _drain(reader)
        assert sorted(m.message_id for m in first) == sorted(ids)
        assert all(reader.hold("w1", m) for m in first)
        # Hand every delivery back (deadline 0): the emulator delivers them again at once.
        reader.client.modify_ack_deadline(subscription=paths["subscription"], ack_ids=[m.ack_id for m in first],
                                          ack_deadline_seconds=0)
        again = _drain(reader)
        assert sorted(m.message_id for m in again) == sorted(ids)
        assert not any(reader.hold("w1", m) for m in again)  # counted once
        assert reader.duplicates == 30 and reader.held_messages == 60
        # Under another key (another window) the same id is new: deduplication is per window.
        assert reader.hold("w2", again[0])
        assert reader.settle(["w1", "w2"]) == 61
        time.sleep(1.0)
        assert _drain(reader, 5.0) == []  # acknowledged: never delivered again
    finally:
        reader.close()


@pytest.mark.slow
def test_a_lapsed_ack_deadline_redelivers_and_the_message_counts_once(pubsub_emulator):
    paths = pubsub_emulator.topic("lapse")
    ids = _publish(pubsub_emulator, paths["topic"], 5)
    reader = PullReader(paths["subscription"], max_messages=100, ack_deadline_s=10)
    try:
        first = _drain(reader)
        assert [reader.hold("w", m) for m in first] == [True] * 5
        time.sleep(12)  # no extend(): the 10 s lease lapses
        again = _drain(reader)
        assert sorted(m.message_id for m in again) == sorted(ids)
        assert [reader.hold("w", m) for m in again] == [False] * 5
        reader.settle(["w"])
        assert _drain(reader, 3.0) == []
    finally:
        reader.close()


class _LosesOneAnswer:
    """The emulator's client, whose next pull is served (the emulator leases what it hands out)
    but whose answer never arrives: the client's deadline passes, as under load."""

    def __init__(self, client):
        self._client = client
        self.lose_next = False

    def pull(self, **kwargs):
        response = self._client.pull(**kwargs)
        if self.lose_next:
            self.lose_next = False
            assert response.received_messages, "the lost answer must have carried messages"
            raise api_exceptions.DeadlineExceeded("the pull's answer did not arrive in time")
        return response

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_pull_without_an_answer_holds_the_mark_until_its_messages_return(pubsub_emulator):
    """Failed before: a timed-out pull was taken for a quiet subscription, and the next pull's
    newer messages moved the mark past the messages the lost answer carried (leased to nobody
    for the subscription's 10 s deadline): their window closed without them."""
    paths = pubsub_emulator.topic("lost")
    old = _publish(pubsub_emulator, paths["topic"], 5, b"old")
    offset = [-16.0]  # made 16 s ago: no earlier reader's leases left to wait for
    client = _LosesOneAnswer(pubsub_v1.SubscriberClient())
    reader = PullReader(paths["subscription"], max_messages=100, ack_deadline_s=10,
                        clock=lambda: time.time() + offset[0], subscriber=client)
    offset[0] = 0.0
    try:
        client.lose_next = True
        assert reader.pull() == [] and reader.read_through is None
        _publish(pubsub_emulator, paths["topic"], 3, b"new")
        newer = _drain(reader, 5.0)
        assert sorted(m.data for m in newer) == [b"new0", b"new1", b"new2"]
        assert reader.read_through is None  # the lost answer's messages are still out there
        time.sleep(11)  # the subscription's 10 s lease of what the lost answer carried lapses
        offset[0] = 5.0  # and the reader's margin for its redelivery passes
        back = reader.pull()  # oldest first: the lost answer's messages (and the newer ones, lapsed too)
        again = [m for m in back if m.message_id in old]
        assert sorted(m.message_id for m in again) == sorted(old)
        assert reader.read_through == min(m.publish_micros for m in back) / 1e6
    finally:
        reader.close()
        client._client.close()


def test_extend_keeps_held_messages_from_being_redelivered(pubsub_emulator):
    paths = pubsub_emulator.topic("extend")
    _publish(pubsub_emulator, paths["topic"], 3)
    clock = _Clock(0.0)
    reader = PullReader(paths["subscription"], ack_deadline_s=30, clock=clock)
    try:
        held = _drain(reader)
        for m in held:
            reader.hold("w", m)
        assert not reader.extend()  # renewed at most every third of the deadline
        clock.now = 11.0
        assert reader.extend()
        assert _drain(reader, 3.0) == []  # still leased to this reader
    finally:
        reader.settle(["w"])
        reader.close()


def test_count_backlog_counts_without_acknowledging(pubsub_emulator):
    paths = pubsub_emulator.topic("backlog")
    ids = _publish(pubsub_emulator, paths["topic"], 1500)
    assert pubsub_pull.count_backlog(paths["subscription"], seconds=30) == (1500, True)
    reader = PullReader(paths["subscription"])  # handed back: all still delivered
    try:
        assert sorted(m.message_id for m in _drain(reader, 30)) == sorted(ids)
    finally:
        reader.close()


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_messages"):
        PullReader("projects/p/subscriptions/s", max_messages=0, subscriber=object())
    with pytest.raises(ValueError, match="10..600"):
        PullReader("projects/p/subscriptions/s", ack_deadline_s=5, subscriber=object())
