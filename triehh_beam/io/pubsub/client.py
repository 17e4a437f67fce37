"""Small typed helpers over ``google.cloud.pubsub_v1`` for the programs that talk to Pub/Sub
outside a Beam job (the federated server's announcements, the simulated fleet): creating a topic
or subscription when missing (``ensure_topic``, ``ensure_subscription``), publishing many
messages and waiting until every one is stored (``BatchPublisher``, which raises
``PublishError`` with counts), and delivering a subscription's messages to a callback that acks
each explicitly (``PullLoop``: synchronous pulls on a thread, stoppable). The clients honour
``PUBSUB_EMULATOR_HOST``. Every call to the service has a timeout: a host that does not answer
is a one-line ``PubsubUnavailableError`` naming it, never a hang. Beam jobs read Pub/Sub with
``beam.pubsub.source`` (over ``pubsub_pull``) or, on Dataflow, Beam's own ``ReadFromPubSub``.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from google.api_core import exceptions as api_exceptions
from google.api_core import retry as api_retry
from google.cloud import pubsub_v1

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "bounded_retry",
    "BatchPublisher",
    "PublishError",
    "PubsubUnavailableError",
    "check_subscription",
    "topic_subscriptions",
    "PullCallbackError",
    "PullLoop",
    "PulledMessage",
    "delete_subscription",
    "ensure_subscription",
    "ensure_topic",
    "service_host",
]

DEFAULT_TIMEOUT_S = 30.0

# What a service that cannot be reached raises through the client (a retry that ran out of time
# raises RetryError; a single attempt, DeadlineExceeded or ServiceUnavailable).
_UNREACHABLE = (
    api_exceptions.ServiceUnavailable,
    api_exceptions.DeadlineExceeded,
    api_exceptions.RetryError,
)


class PubsubUnavailableError(ConnectionError):
    """Pub/Sub (or its emulator) did not answer in time; the message names the host."""


class PublishError(RuntimeError):
    """Some published messages were not stored.

    Attributes:
      failed: messages whose publish failed.
      pending: messages still unconfirmed when the wait timed out.
      total: messages published since the previous successful wait.
    """

    def __init__(self, message: str, failed: int, pending: int, total: int):
        super().__init__(message)
        self.failed = failed
        self.pending = pending
        self.total = total


class PullCallbackError(RuntimeError):
    """The callback of a ``PullLoop`` raised; the first exception is the ``__cause__``."""


def service_host() -> str:
    """Where the clients connect: ``PUBSUB_EMULATOR_HOST``'s value, or Pub/Sub itself."""
    emulator = os.environ.get("PUBSUB_EMULATOR_HOST")
    return f"{emulator} (PUBSUB_EMULATOR_HOST)" if emulator else "pubsub.googleapis.com"


# What the client retries by default (its publish retry's codes), for up to 600 s: bounded here.
_RETRYABLE = (
    api_exceptions.Aborted,
    api_exceptions.Cancelled,
    api_exceptions.DeadlineExceeded,
    api_exceptions.InternalServerError,
    api_exceptions.ResourceExhausted,
    api_exceptions.ServiceUnavailable,
    api_exceptions.Unknown,
)


def bounded_retry(timeout: float) -> api_retry.Retry:
    """The client's retry of transient errors, given up after ``timeout`` seconds."""
    return api_retry.Retry(predicate=api_retry.if_exception_type(*_RETRYABLE),
                           initial=0.1, maximum=2.0, multiplier=2.0, timeout=timeout)


def _unavailable(what: str, timeout: float, error: Exception) -> PubsubUnavailableError:
    reason = type(error).__name__
    return PubsubUnavailableError(f"Pub/Sub at {service_host()} did not answer within {timeout:g} s ({what}: {reason})")


def _answer(call: Callable[[], Any], what: str, timeout: float) -> Any:
    """``call()``'s answer; raises PubsubUnavailableError (naming ``what``) when the service does
    not answer within ``timeout`` seconds."""
    try:
        return call()
    except _UNREACHABLE as e:
        raise _unavailable(what, timeout, e) from e


def _done_unless(call: Callable[[], object], already: type, what: str, timeout: float) -> bool:
    """True once ``call()`` has done its change, False if it raised ``already`` (nothing to do);
    raises PubsubUnavailableError as ``_answer``."""
    try:
        _answer(call, what, timeout)
        return True
    except already:
        return False


def _look_up(call: Callable[[], Any], name: str, shape: str, missing: str, timeout: float) -> Any:
    """``call()``'s answer about ``name``; raises ValueError when ``name`` does not exist
    (``missing``) or is not of the ``shape`` its kind has, PubsubUnavailableError as ``_answer``."""
    try:
        return _answer(call, f"reading {name}", timeout)
    except api_exceptions.NotFound as e:
        raise ValueError(missing) from e
    except api_exceptions.InvalidArgument as e:
        raise ValueError(f"{name!r} is not a {shape}: {e.message}") from e


def ensure_topic(topic: str, publisher: Optional[pubsub_v1.PublisherClient] = None,
                 timeout: float = DEFAULT_TIMEOUT_S) -> bool:
    """Creates ``topic`` (``projects/P/topics/T``) unless it exists; returns True if created.

    Raises:
      PubsubUnavailableError: the service did not answer within ``timeout`` seconds.
    """
    client = publisher or pubsub_v1.PublisherClient()
    return _done_unless(lambda: client.create_topic(name=topic, retry=bounded_retry(timeout), timeout=timeout),
                        api_exceptions.AlreadyExists, f"creating {topic}", timeout)


def ensure_subscription(
    subscription: str,
    topic: str,
    ack_deadline_seconds: int = 60,
    subscriber: Optional[pubsub_v1.SubscriberClient] = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> bool:
    """Creates ``subscription`` (``projects/P/subscriptions/S``) to ``topic`` unless it exists,
    with the given ack deadline (10 to 600 s); an existing one gets that ack deadline too.
    Returns True if created.

    Raises:
      ValueError: the ack deadline is out of range, or the subscription exists on another topic.
      PubsubUnavailableError: the service did not answer within ``timeout`` seconds.
    """
    if not 10 <= ack_deadline_seconds <= 600:
        raise ValueError(f"the ack deadline must be 10 to 600 seconds, got {ack_deadline_seconds}")
    client = subscriber or pubsub_v1.SubscriberClient()
    request = {"name": subscription, "topic": topic, "ack_deadline_seconds": ack_deadline_seconds}
    if _done_unless(lambda: client.create_subscription(request=request, retry=bounded_retry(timeout), timeout=timeout),
                    api_exceptions.AlreadyExists, f"creating {subscription}", timeout):
        return True
    existing = _answer(lambda: client.get_subscription(subscription=subscription, retry=bounded_retry(timeout),
                                                       timeout=timeout), f"reading {subscription}", timeout)
    if existing.topic != topic:
        raise ValueError(f"{subscription} exists on {existing.topic}, not on {topic}")
    if existing.ack_deadline_seconds != ack_deadline_seconds:
        update = {"subscription": {"name": subscription, "ack_deadline_seconds": ack_deadline_seconds},
                  "update_mask": {"paths": ["ack_deadline_seconds"]}}
        _answer(lambda: client.update_subscription(request=update, retry=bounded_retry(timeout), timeout=timeout),
                f"updating {subscription}", timeout)
    return False


def check_subscription(subscription: str, subscriber: Optional[pubsub_v1.SubscriberClient] = None,
                       timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """Checks that ``subscription`` exists, before a job relies on it; returns its topic.

    Raises:
      PubsubUnavailableError: the service did not answer within ``timeout`` seconds.
      ValueError: it does not exist, or the name is not a subscription's (the text says which).
    """
    client = subscriber or pubsub_v1.SubscriberClient()
    try:
        return _look_up(
            lambda: client.get_subscription(subscription=subscription, retry=bounded_retry(timeout), timeout=timeout).topic,
            subscription, "subscription name (projects/P/subscriptions/S)",
            f"the subscription {subscription} does not exist: create it on the topic the devices' reports are "
            "published to", timeout)
    finally:
        if subscriber is None:
            client.close()


def topic_subscriptions(topic: str, publisher: Optional[pubsub_v1.PublisherClient] = None,
                        timeout: float = DEFAULT_TIMEOUT_S) -> List[str]:
    """The subscriptions of an existing ``topic`` (what would receive its messages).

    Raises:
      PubsubUnavailableError: the service did not answer within ``timeout`` seconds.
      ValueError: the topic does not exist, or the name is not a topic's.
    """
    client = publisher or pubsub_v1.PublisherClient()
    return _look_up(lambda: list(client.list_topic_subscriptions(topic=topic, retry=bounded_retry(timeout), timeout=timeout)),
                    topic, "topic name (projects/P/topics/T)", f"the topic {topic} does not exist", timeout)


def delete_subscription(subscription: str, subscriber: Optional[pubsub_v1.SubscriberClient] = None,
                        timeout: float = DEFAULT_TIMEOUT_S) -> bool:
    """Deletes ``subscription`` if it exists; returns True if it did.

    Raises:
      PubsubUnavailableError: the service did not answer within ``timeout`` seconds.
    """
    client = subscriber or pubsub_v1.SubscriberClient()
    return _done_unless(lambda: client.delete_subscription(subscription=subscription, retry=bounded_retry(timeout),
                                                           timeout=timeout),
                        api_exceptions.NotFound, f"deleting {subscription}", timeout)


class BatchPublisher:
    """Publishes many messages in batches and waits for every one to be stored.

    ``publish`` and ``publish_many`` return at once (the client batches up to ``max_messages``
    messages or ``max_latency`` seconds per request, on its own thread); ``wait`` blocks until
    every message published so far is confirmed and raises ``PublishError`` if any failed.
    Safe to use from several threads. Use as a context manager, or call ``close``.

    Args:
      max_messages: the most messages per publish request.
      max_latency: the longest a message waits for its batch to fill, in seconds.
      timeout: the default of ``wait`` and of each publish request's retries, in seconds.
      client: a ``PublisherClient`` to use (else one is made with these batch settings).
    """

    def __init__(self, max_messages: int = 1000, max_latency: float = 0.01,
                 timeout: float = DEFAULT_TIMEOUT_S, client: Optional[pubsub_v1.PublisherClient] = None):
        self.timeout = timeout
        self.client = client or pubsub_v1.PublisherClient(
            batch_settings=pubsub_v1.types.BatchSettings(max_messages=max_messages, max_latency=max_latency),
            publisher_options=pubsub_v1.types.PublisherOptions(retry=bounded_retry(timeout), timeout=timeout),
        )
        self._condition = threading.Condition()
        self._pending = 0
        self._failed = 0
        self._total = 0
        self._first_error: Optional[BaseException] = None
        self.published = 0  # confirmed, over the publisher's life

    def publish(self, topic: str, data: bytes, attributes: Optional[Mapping[str, str]] = None) -> None:
        """Queues one message (``attributes``: text to text)."""
        with self._condition:
            self._pending += 1
            self._total += 1
        future = self.client.publish(topic, data, **dict(attributes or {}))
        future.add_done_callback(self._done)

    def publish_many(self, topic: str, messages: Iterable[Tuple[bytes, Mapping[str, str]]]) -> int:
        """Queues every ``(data, attributes)``; returns how many."""
        count = 0
        for data, attributes in messages:
            self.publish(topic, data, attributes)
            count += 1
        return count

    def _done(self, future: Any) -> None:
        error = future.exception()
        with self._condition:
            self._pending -= 1
            if error is None:
                self.published += 1
            else:
                self._failed += 1
                if self._first_error is None:
                    self._first_error = error
            self._condition.notify_all()

    @property
    def pending(self) -> int:
        """Messages published and not yet confirmed (nor failed)."""
        with self._condition:
            return self._pending

    def wait(self, timeout: Optional[float] = None) -> int:
        """Blocks until every message published so far is confirmed; returns how many were
        published since the previous successful wait.

        Raises:
          PublishError: some failed (the first failure is the ``__cause__``), or some were not
            confirmed within ``timeout`` seconds (default: the publisher's); the counts are
            then reset, so that the next wait is about the messages published after.
        """
        timeout = self.timeout if timeout is None else timeout
        with self._condition:
            self._condition.wait_for(lambda: self._pending == 0, timeout=timeout)
            failed, pending, total, first = self._failed, self._pending, self._total, self._first_error
            self._failed, self._total, self._first_error = 0, self._pending, None
        if failed or pending:
            what = f"{failed} of {total} messages failed" if failed else f"{pending} of {total} messages unconfirmed"
            if failed and pending:
                what += f" and {pending} unconfirmed"
            cause = f" ({type(first).__name__})" if first is not None else ""
            raise PublishError(f"publishing to Pub/Sub at {service_host()}: {what}{cause}, waiting up to {timeout:g} s",
                               failed, pending, total) from first
        return total

    def close(self) -> None:
        """Sends what is queued and stops the client's batching thread."""
        self.client.stop()

    def __enter__(self) -> "BatchPublisher":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class PulledMessage:
    """One message a ``PullLoop`` delivered: ``data``, ``attributes``, ``message_id``,
    ``publish_time`` (seconds since the epoch); ``ack()`` or ``nack()`` it (a nacked message
    is redelivered at once, one neither acked nor nacked after the ack deadline)."""

    __slots__ = ("data", "attributes", "message_id", "publish_time", "_ack_id", "_loop")

    def __init__(self, data: bytes, attributes: Dict[str, str], message_id: str, publish_time: float,
                 ack_id: str, loop: "PullLoop"):
        self.data = data
        self.attributes = attributes
        self.message_id = message_id
        self.publish_time = publish_time
        self._ack_id = ack_id
        self._loop = loop

    def ack(self) -> None:
        self._loop._settle(self._ack_id, True)

    def nack(self) -> None:
        self._loop._settle(self._ack_id, False)


class PullLoop:
    """Delivers the messages of a subscription to ``callback(message)`` (a ``PulledMessage``)
    from one thread, until ``stop``.

    Synchronous pulls of up to ``max_messages`` at a time, the acks of each batch sent in one
    request: against the emulator this delivers about 20,000 messages a second where the
    client's streaming pull managed about 2,000. The callback acks each message explicitly; if
    it raises, the message is nacked, the first exception kept and the loop goes on; ``stop``
    (or ``check``) raises ``PullCallbackError`` from it: a callback's failure is never only a
    log line.

    Args:
      subscription: ``projects/P/subscriptions/S``.
      callback: called once per delivered message, on the loop's thread.
      max_messages: the most messages per pull.
      timeout: seconds to wait for the service when starting, and for each request.
      poll_timeout: the deadline of a pull that waits for messages, in seconds (the emulator
        answers an empty pull about a second before it): how long ``stop`` may take.
      subscriber: a ``SubscriberClient`` to use (else one is made, and closed by ``stop``).
    """

    def __init__(self, subscription: str, callback: Callable[[PulledMessage], None], max_messages: int = 1000,
                 timeout: float = DEFAULT_TIMEOUT_S, poll_timeout: float = 1.5,
                 subscriber: Optional[pubsub_v1.SubscriberClient] = None):
        self.subscription = subscription
        self.callback = callback
        self.max_messages = max_messages
        self.timeout = timeout
        self.poll_timeout = poll_timeout
        self._own_client = subscriber is None
        self.client = subscriber or pubsub_v1.SubscriberClient()
        self._thread: Optional[threading.Thread] = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._acks: List[str] = []
        self._nacks: List[str] = []
        self._errors: List[BaseException] = []
        self.delivered = 0

    def start(self) -> "PullLoop":
        """Checks that the subscription exists, then starts pulling.

        Raises:
          PubsubUnavailableError: the service did not answer within the timeout.
          ValueError: the subscription does not exist.
          RuntimeError: already started.
        """
        if self._thread is not None:
            raise RuntimeError(f"the pull loop of {self.subscription} is already running")
        try:
            self.client.get_subscription(subscription=self.subscription, retry=bounded_retry(self.timeout),
                                         timeout=self.timeout)
        except api_exceptions.NotFound as e:
            raise ValueError(f"no subscription {self.subscription} at {service_host()}") from e
        except _UNREACHABLE as e:
            raise _unavailable(f"reading {self.subscription}", self.timeout, e) from e
        self._thread = threading.Thread(target=self._run, name=f"PullLoop({self.subscription})", daemon=True)
        self._thread.start()
        return self

    def _settle(self, ack_id: str, ack: bool) -> None:
        with self._lock:
            (self._acks if ack else self._nacks).append(ack_id)

    def _flush(self) -> None:
        with self._lock:
            acks, self._acks = self._acks, []
            nacks, self._nacks = self._nacks, []
        for start in range(0, len(acks), 1000):  # a request holds at most a few thousand ids
            self.client.acknowledge(subscription=self.subscription, ack_ids=acks[start:start + 1000],
                                    retry=bounded_retry(self.timeout), timeout=self.timeout)
        for start in range(0, len(nacks), 1000):
            self.client.modify_ack_deadline(subscription=self.subscription, ack_ids=nacks[start:start + 1000],
                                            ack_deadline_seconds=0, retry=bounded_retry(self.timeout), timeout=self.timeout)

    def _pull(self) -> list:
        try:
            response = self.client.pull(subscription=self.subscription, max_messages=self.max_messages,
                                        timeout=self.poll_timeout, retry=None)
        except api_exceptions.DeadlineExceeded:  # nothing arrived in time
            return []
        except api_exceptions.ServiceUnavailable:  # a blip: the next pull retries
            self._stopping.wait(0.1)
            return []
        return list(response.received_messages)

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                for received in self._pull():
                    message = received.message
                    pulled = PulledMessage(message.data, dict(message.attributes), message.message_id,
                                           message.publish_time.timestamp(), received.ack_id, self)
                    try:
                        self.callback(pulled)
                    except Exception as e:  # kept and raised by stop(): a thread would only print it
                        pulled.nack()
                        with self._lock:
                            self._errors.append(e)
                    else:
                        with self._lock:
                            self.delivered += 1
                self._flush()
            self._flush()
        except Exception as e:  # the service failed for good: stop() raises it
            with self._lock:
                self._errors.append(e)

    @property
    def running(self) -> bool:
        """Whether the loop's thread is pulling."""
        return self._thread is not None and self._thread.is_alive()

    def check(self) -> None:
        """Raises ``PullCallbackError`` if the callback (or the service) has raised."""
        with self._lock:
            errors = list(self._errors)
        if errors:
            raise PullCallbackError(
                f"the pull loop of {self.subscription} failed {len(errors)} time(s): "
                f"{type(errors[0]).__name__}: {errors[0]}") from errors[0]

    def stop(self) -> None:
        """Stops pulling after the current batch (its acks sent) and closes the client if the
        loop made it.

        Raises:
          PullCallbackError: the callback (or the service) raised at some point.
        """
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping.set()
            thread.join()
        if self._own_client:
            self.client.close()
        self.check()

    def __enter__(self) -> "PullLoop":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
