"""A pull-and-acknowledge reader of one Pub/Sub subscription, without Beam: the client half of the
product's own unbounded read (``beam.pubsub.source``). ``PullReader.pull`` makes one synchronous
pull and keeps how far the subscription has been read (``read_through``: the publish time of the
oldest message a pull brought, or the time an empty pull was sent: every message published
before then had been delivered, the service delivering the oldest first); ``hold`` keeps a delivered message unacknowledged under a key (the event-time window
it belongs to) and says whether its message id is new under that key, so a redelivery is passed
on once; ``settle`` acknowledges every message of keys whose records are durable (the window
released), ``extend`` renews the ack deadline of the messages held. ``count_backlog`` counts, for
an operator, the messages a subscription still holds (leased briefly, then handed back).
The clients honour ``PUBSUB_EMULATOR_HOST``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, Iterable, List, Optional, Set

from google.api_core import exceptions as api_exceptions
from google.cloud import pubsub_v1

from triehh_beam.io.pubsub.client import DEFAULT_TIMEOUT_S, bounded_retry

__all__ = ["Pulled", "PullReader", "count_backlog"]

_IDS_PER_REQUEST = 1000  # a request holds at most a few thousand ack ids
# How long after a lease lapses its message may take to be delivered again. Measured: the emulator
# redelivers within 0.2 s; without a margin, a pull sent at the lapse found nothing and moved the
# watermark past the message (tests/e2e/test_stream_prism.py with lost answers injected).
_REDELIVERY_MARGIN_S = 5.0


@dataclasses.dataclass(frozen=True)
class Pulled:
    """One delivered message: its id, payload, attributes, publish time (microseconds since the
    epoch, the service's clock) and the ack id of this delivery."""

    message_id: str
    data: bytes
    attributes: Dict[str, str]
    publish_micros: int
    ack_id: str


class PullReader:
    """Pulls one subscription and acknowledges what it was told is durable.

    ``read_through`` stays unset for the first ack deadline (and a margin) after the reader
    starts: a previous reader of the subscription (a killed run) may still lease messages that
    long, and the subscription is read through only once they are redelivered. A pull that gets no answer (its
    deadline passes, or the service is briefly unavailable) holds it back the same way, for the
    subscription's own ack deadline: the service may have handed that pull messages which never
    arrived, and it delivers them again only once that deadline lapses. (The emulator answers a
    quiet pull with an empty response after about 1 s, well inside ``pull_timeout``.)

    Args:
      subscription: ``projects/P/subscriptions/S``.
      max_messages: the most messages per pull.
      ack_deadline_s: the deadline given to every held message (renewed by ``extend``).
      pull_timeout: the deadline of a pull that waits for messages, in seconds.
      clock: seconds since the epoch (injected by tests).
      subscriber: a ``SubscriberClient`` (else one is made, closed by ``close``).

    Raises:
      ValueError: ``max_messages`` < 1, or an ack deadline outside Pub/Sub's 10..600 s.
    """

    def __init__(self, subscription: str, max_messages: int = 1000, ack_deadline_s: int = 30,
                 pull_timeout: float = 2.0, clock: Callable[[], float] = time.time,
                 subscriber: Optional[pubsub_v1.SubscriberClient] = None):
        if max_messages < 1:
            raise ValueError(f"max_messages must be >= 1, got {max_messages}")
        if not 10 <= ack_deadline_s <= 600:
            raise ValueError(f"ack_deadline_s must be within Pub/Sub's 10..600 s, got {ack_deadline_s}")
        self.subscription = subscription
        self.max_messages = max_messages
        self.ack_deadline_s = ack_deadline_s
        self.pull_timeout = pull_timeout
        self._clock = clock
        self._own_client = subscriber is None
        self.client = subscriber or pubsub_v1.SubscriberClient()
        self.read_through: Optional[float] = None  # seconds since the epoch
        self._held: Dict[object, List[str]] = {}  # key -> ack ids of its messages, not yet acked
        self._ids: Dict[object, Set[str]] = {}  # key -> message ids passed on under it
        self._extended_at = clock()
        self._leases_lapse_at = clock() + ack_deadline_s + _REDELIVERY_MARGIN_S  # a previous reader's
        self._subscription_deadline: Optional[int] = None
        self.pulled = 0
        self.duplicates = 0
        self.acknowledged = 0

    def pull(self) -> List[Pulled]:
        """One synchronous pull (nothing if it got no answer). Once a previous reader's leases, and
        those of any unanswered pull's messages, have lapsed, advances ``read_through`` to the
        oldest publish time it brought, or to the time it was sent if it brought nothing. (Not to the time of a pull that brought
        less than it asked for: the service caps a response's bytes, so a backlog can remain.)"""
        sent = self._clock()
        try:
            response = self.client.pull(subscription=self.subscription, max_messages=self.max_messages,
                                        timeout=self.pull_timeout, retry=None)
            received = list(response.received_messages)
        except (api_exceptions.DeadlineExceeded, api_exceptions.ServiceUnavailable):
            # No answer: the service may have handed this pull messages that never arrived. Nobody
            # holds them, yet they stay leased for the subscription's ack deadline (from when the
            # service answered, up to now), then return: until then (and a margin: the service
            # redelivers soon after, not at once) a later pull cannot show the subscription read
            # through them.
            lapse = self._clock() + self._subscription_deadline_s() + _REDELIVERY_MARGIN_S
            self._leases_lapse_at = max(self._leases_lapse_at, lapse)
            return []
        self._lease([r.ack_id for r in received])  # the subscription's own deadline may be short
        self.pulled += len(received)
        pulled = [Pulled(r.message.message_id, r.message.data, dict(r.message.attributes),
                         _micros(r.message.publish_time), r.ack_id) for r in received]
        if sent >= self._leases_lapse_at:
            through = min(m.publish_micros for m in pulled) / 1e6 if pulled else sent
            self.read_through = through if self.read_through is None else max(self.read_through, through)
        return pulled

    def _subscription_deadline_s(self) -> int:
        """How long the subscription leases a message no reader has extended: its own ack
        deadline, asked once (600 s, Pub/Sub's longest, if the reader may not ask)."""
        if self._subscription_deadline is None:
            try:
                found = self.client.get_subscription(subscription=self.subscription, timeout=DEFAULT_TIMEOUT_S)
                self._subscription_deadline = found.ack_deadline_seconds or 10
            except api_exceptions.GoogleAPICallError:
                self._subscription_deadline = 600
        return self._subscription_deadline

    def hold(self, key: object, message: Pulled) -> bool:
        """Keeps ``message`` unacknowledged under ``key``; True if its id is new under ``key``
        (pass it on), False for a redelivery of one already passed on (count it once)."""
        self._held.setdefault(key, []).append(message.ack_id)
        ids = self._ids.setdefault(key, set())
        if message.message_id in ids:
            self.duplicates += 1
            return False
        ids.add(message.message_id)
        return True

    @property
    def held_keys(self) -> List[object]:
        return list(self._held)

    @property
    def held_messages(self) -> int:
        """Deliveries held, not yet acknowledged (a redelivery counts again)."""
        return sum(len(ids) for ids in self._held.values())

    def settle(self, keys: Iterable[object]) -> int:
        """Acknowledges every message held under ``keys`` and forgets their ids; returns how many."""
        acks: List[str] = []
        for key in keys:
            acks.extend(self._held.pop(key, ()))
            self._ids.pop(key, None)
        self.acknowledge(acks)
        return len(acks)

    def acknowledge(self, ack_ids: List[str]) -> None:
        """Acknowledges deliveries now (messages never held: unusable ones)."""
        for start in range(0, len(ack_ids), _IDS_PER_REQUEST):
            self.client.acknowledge(subscription=self.subscription, ack_ids=ack_ids[start:start + _IDS_PER_REQUEST],
                                    retry=bounded_retry(DEFAULT_TIMEOUT_S), timeout=DEFAULT_TIMEOUT_S)
        self.acknowledged += len(ack_ids)

    def extend(self, force: bool = False) -> bool:
        """Renews the deadline of every held message, at most every third of the deadline unless
        ``force``; returns whether it did. (A message whose deadline lapsed anyway is redelivered
        and ``hold`` passes it on no second time.)"""
        now = self._clock()
        if not force and now - self._extended_at < self.ack_deadline_s / 3:
            return False
        self._extended_at = now
        self._lease([a for ids in self._held.values() for a in ids])
        return True

    def _lease(self, ack_ids: List[str]) -> None:
        for start in range(0, len(ack_ids), _IDS_PER_REQUEST):
            self.client.modify_ack_deadline(
                subscription=self.subscription, ack_ids=ack_ids[start:start + _IDS_PER_REQUEST],
                ack_deadline_seconds=self.ack_deadline_s, retry=bounded_retry(DEFAULT_TIMEOUT_S), timeout=DEFAULT_TIMEOUT_S)

    def close(self) -> None:
        if self._own_client:
            self.client.close()


def _micros(publish_time) -> int:
    """A protobuf Timestamp (or the client's datetime) as microseconds since the epoch."""
    if hasattr(publish_time, "seconds") and hasattr(publish_time, "nanos"):
        return publish_time.seconds * 1_000_000 + publish_time.nanos // 1000
    return int(round(publish_time.timestamp() * 1_000_000))


def count_backlog(subscription: str, seconds: float = 5.0, lease_s: int = 30,
                  subscriber: Optional[pubsub_v1.SubscriberClient] = None) -> tuple:
    """How many messages ``subscription`` still delivers: ``(count, complete)``, pulled for up to
    ``seconds`` (``complete`` False when time ran out first, so ``count`` is a lower bound). Each
    counted message is leased for ``lease_s`` while counting, then handed back at once (ack
    deadline 0): nothing is acknowledged. Messages another reader holds are not counted."""
    client = subscriber or pubsub_v1.SubscriberClient()
    seen: Set[str] = set()
    ack_ids: List[str] = []
    deadline = time.monotonic() + seconds
    complete = False
    try:
        while time.monotonic() < deadline:
            try:
                response = client.pull(subscription=subscription, max_messages=1000, timeout=2.0, retry=None)
            except api_exceptions.DeadlineExceeded:
                complete = True
                break
            received = list(response.received_messages)
            if received:
                ids = [r.ack_id for r in received]
                for start in range(0, len(ids), _IDS_PER_REQUEST):
                    client.modify_ack_deadline(subscription=subscription, ack_ids=ids[start:start + _IDS_PER_REQUEST],
                                               ack_deadline_seconds=lease_s, timeout=DEFAULT_TIMEOUT_S)
                ack_ids.extend(ids)
                seen.update(r.message.message_id for r in received)
            if not received:
                complete = True
                break
        for start in range(0, len(ack_ids), _IDS_PER_REQUEST):
            client.modify_ack_deadline(subscription=subscription, ack_ids=ack_ids[start:start + _IDS_PER_REQUEST],
                                       ack_deadline_seconds=0, timeout=DEFAULT_TIMEOUT_S)
    finally:
        if subscriber is None:
            client.close()
    return len(seen), complete
