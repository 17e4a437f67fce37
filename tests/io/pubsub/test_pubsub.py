"""Tests of triehh_beam.io.pubsub.client (topics, subscriptions, the batching publisher, the pull loop)
against the real Pub/Sub emulator (skipped with one line where it is absent), of a host that
does not answer (a closed loopback port: a one-line error within the timeout), and of the
federated attributes (io.pubsub.federated_attributes, pure)."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

from triehh_beam.io.pubsub import client as pubsub
from triehh_beam.io.pubsub import federated_attributes as fa


def _names(emulator, stem):
    suffix = uuid.uuid4().hex[:10]
    return (f"projects/{emulator.project}/topics/{stem}-{suffix}",
            f"projects/{emulator.project}/subscriptions/{stem}-{suffix}-sub")


def _wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {seconds} s")
        time.sleep(0.02)


# ---- topics and subscriptions ---------------------------------------------------------------


def test_topics_and_subscriptions_are_created_once_and_deleted(pubsub_emulator):
    topic, subscription = _names(pubsub_emulator, "ensure")
    assert pubsub.ensure_topic(topic) is True
    assert pubsub.ensure_topic(topic) is False
    assert pubsub.ensure_subscription(subscription, topic, ack_deadline_seconds=20) is True
    got = pubsub_emulator.subscriber.get_subscription(subscription=subscription)
    assert (got.topic, got.ack_deadline_seconds) == (topic, 20)
    assert pubsub.ensure_subscription(subscription, topic, ack_deadline_seconds=45) is False
    assert pubsub_emulator.subscriber.get_subscription(subscription=subscription).ack_deadline_seconds == 45
    assert pubsub.delete_subscription(subscription) is True
    assert pubsub.delete_subscription(subscription) is False


def test_a_subscription_on_another_topic_or_a_bad_deadline_is_refused(pubsub_emulator):
    topic, subscription = _names(pubsub_emulator, "other")
    other, _ = _names(pubsub_emulator, "other")
    pubsub.ensure_topic(topic)
    pubsub.ensure_topic(other)
    pubsub.ensure_subscription(subscription, topic)
    with pytest.raises(ValueError, match="exists on .*, not on"):
        pubsub.ensure_subscription(subscription, other)
    with pytest.raises(ValueError, match="10 to 600 seconds, got 5"):
        pubsub.ensure_subscription(subscription, topic, ack_deadline_seconds=5)


# ---- publishing and pulling -----------------------------------------------------------------


class _Collect:
    """A pull callback that keeps (data, attributes) and acks; ``nack_first`` data are nacked
    at their first delivery, ``raise_first`` data make the callback raise at theirs."""

    def __init__(self, nack_first=(), raise_first=()):
        self.lock = threading.Lock()
        self.got = []
        self.nack_first = set(nack_first)
        self.raise_first = set(raise_first)

    def __call__(self, message):
        with self.lock:
            if message.data in self.raise_first:
                self.raise_first.discard(message.data)
                raise KeyError(message.data)
            self.got.append((message.data, message.attributes))
            if message.data in self.nack_first:
                self.nack_first.discard(message.data)
                message.nack()
                return
        message.ack()


def test_every_published_message_is_delivered_once_with_its_attributes(pubsub_emulator):
    paths = pubsub_emulator.topic("many")
    sent = [(b"m%05d" % i, {"kind": "report", "i": str(i)}) for i in range(3000)]
    collect = _Collect()
    with pubsub.PullLoop(paths["subscription"], collect, max_messages=500) as loop:
        with pubsub.BatchPublisher(max_messages=200) as publisher:
            assert publisher.publish_many(paths["topic"], sent) == 3000
            assert publisher.wait() == 3000
            assert publisher.pending == 0 and publisher.published == 3000
            publisher.publish(paths["topic"], b"last", {"kind": "x"})
            assert publisher.wait() == 1  # counted from the previous wait
        _wait_for(lambda: len(collect.got) >= 3001, 30, "3,001 messages")
        time.sleep(0.3)  # a redelivery would come now (all acked: none may)
    assert sorted(collect.got, key=lambda m: m[0]) == sorted(sent + [(b"last", {"kind": "x"})], key=lambda m: m[0])
    assert loop.delivered == 3001 and not loop.running


def test_a_nacked_message_comes_again_and_a_failing_callback_is_raised_by_stop(pubsub_emulator):
    paths = pubsub_emulator.topic("nack")
    collect = _Collect(nack_first={b"b"}, raise_first={b"c"})
    loop = pubsub.PullLoop(paths["subscription"], collect).start()
    for data in (b"a", b"b", b"c"):
        pubsub_emulator.publish(paths["topic"], data)
    # b nacked, then delivered again; c's callback raised (nacked by the loop), then delivered
    _wait_for(lambda: sorted(d for d, _ in collect.got) == [b"a", b"b", b"b", b"c"], 30, "the redeliveries")
    with pytest.raises(pubsub.PullCallbackError, match="failed 1 time.*KeyError") as raised:
        loop.stop()
    assert isinstance(raised.value.__cause__, KeyError)


def test_pulling_a_subscription_that_does_not_exist_is_refused(pubsub_emulator):
    _, subscription = _names(pubsub_emulator, "absent")
    with pytest.raises(ValueError, match="no subscription .*absent"):
        pubsub.PullLoop(subscription, print).start()


# ---- a host that does not answer ------------------------------------------------------------


@pytest.fixture
def nobody_home(monkeypatch):
    """PUBSUB_EMULATOR_HOST set to a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", host)
    return host


def _one_line_within(call, seconds, error):
    started = time.monotonic()
    with pytest.raises(error) as raised:
        call()
    # The call gives up at its own timeout instead of the client's default retry deadline (60 s
    # and more); the margin is for a loaded machine, not a measure of its speed.
    assert time.monotonic() - started < seconds + 30
    text = str(raised.value)
    assert "\n" not in text
    return raised.value


def test_an_unreachable_host_is_a_one_line_error_within_the_timeout(nobody_home):
    topic, subscription = "projects/p/topics/unreachable", "projects/p/subscriptions/unreachable"
    for call in (lambda: pubsub.ensure_topic(topic, timeout=1),
                 lambda: pubsub.ensure_subscription(subscription, topic, timeout=1),
                 lambda: pubsub.delete_subscription(subscription, timeout=1),
                 lambda: pubsub.PullLoop(subscription, print, timeout=1).start()):
        error = _one_line_within(call, 1, pubsub.PubsubUnavailableError)
        assert f"Pub/Sub at {nobody_home} (PUBSUB_EMULATOR_HOST) did not answer within 1 s" in str(error)
    publisher = pubsub.BatchPublisher(timeout=1)
    publisher.publish(topic, b"x", {"kind": "report"})
    publisher.publish(topic, b"y", {"kind": "report"})
    error = _one_line_within(publisher.wait, 1, pubsub.PublishError)
    assert (error.failed + error.pending, error.total) == (2, 2)
    assert nobody_home in str(error)
    publisher.close()


# ---- federated attributes -------------------------------------------------------------------


def test_federated_attributes_round_trip():
    assert fa.announcement_attributes("job-1", 3) == {"kind": "announcement", "job": "job-1", "round": "3"}
    assert fa.report_attributes("job-1", 3) == {"kind": "report", "job": "job-1", "round": "3"}
    invitation = fa.invitation_attributes("job-1", 12, "ünïcode 7".encode())
    assert invitation == {"kind": "invitation", "job": "job-1", "round": "12", "device": "ünïcode 7"}
    assert fa.read_attributes(invitation) == fa.Envelope("invitation", "job-1", 12, "ünïcode 7".encode())
    assert fa.read_attributes(fa.report_attributes("j", 1)) == fa.Envelope("report", "j", 1, None)


@pytest.mark.parametrize("attributes, message", [
    ({}, "kind attribute is None"),
    ({"kind": "vote", "job": "j", "round": "1"}, "'vote', not one of"),
    ({"kind": "report", "round": "1"}, "without a job"),
    ({"kind": "report", "job": "j", "round": "0"}, "round attribute is '0'"),
    ({"kind": "report", "job": "j", "round": "-1"}, "round attribute is '-1'"),
    ({"kind": "report", "job": "j", "round": "١"}, "round attribute"),  # a non-ASCII digit
    ({"kind": "report", "job": "j", "round": "1", "device": "d"}, "only they, name a device"),
    ({"kind": "invitation", "job": "j", "round": "1"}, "only they, name a device"),
    ({"kind": "invitation", "job": "j", "round": "1", "device": ""}, "only they, name a device"),
])
def test_federated_attributes_that_do_not_route_are_refused(attributes, message):
    with pytest.raises(fa.EnvelopeError, match=message):
        fa.read_attributes(attributes)


def test_device_ids_that_cannot_be_an_attribute_are_refused():
    with pytest.raises(ValueError, match="not UTF-8"):
        fa.invitation_attributes("j", 1, b"\xff\xfe")
    with pytest.raises(ValueError, match="at most 1024 bytes"):
        fa.device_text(b"d" * 1025)
    with pytest.raises(ValueError, match="cannot be empty"):
        fa.device_text(b"")
    with pytest.raises(ValueError, match="from 1"):
        fa.announcement_attributes("j", 0)
    with pytest.raises(ValueError, match="job id"):
        fa.report_attributes("", 1)
