"""The Google Cloud SDK's Pub/Sub emulator as pytest fixtures: a Java subprocess on a free
loopback port, started once per test session (per xdist worker) since a JVM costs about a second
and a few hundred MB, and a per-test fixture that points ``PUBSUB_EMULATOR_HOST`` at it (which
``google.cloud.pubsub`` clients, Beam's Pub/Sub reader among them, honour: an insecure channel,
no credential lookup) and hands out fresh topics and subscriptions, so that tests sharing the
server never see each other's messages. The server is the library's
(``triehh_beam.io.pubsub.emulator``: the Debian package ``google-cloud-cli-pubsub-emulator`` in
its own process group, stopped as a whole); where its launcher or Java is absent the fixtures
skip with the one line ``emulator_missing`` gives.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Dict, Iterator

import pytest

from triehh_beam.io.pubsub.emulator import EMULATOR_BINARY, emulator_missing, start_pubsub_emulator

__all__ = [
    "EMULATOR_BINARY",
    "PubsubEmulator",
    "emulator_missing",
    "pubsub_emulator",
    "pubsub_emulator_server",
    "start_pubsub_emulator",
]

PROJECT = "test-project"


@dataclasses.dataclass
class PubsubEmulator:
    """The running emulator as a test sees it: ``host`` (also in ``PUBSUB_EMULATOR_HOST``),
    a publisher client, and fresh topics with a subscription each."""

    host: str
    project: str = PROJECT

    def __post_init__(self) -> None:
        from google.cloud import pubsub_v1

        self.publisher = pubsub_v1.PublisherClient()
        self.subscriber = pubsub_v1.SubscriberClient()

    def topic(self, name: str = "records") -> Dict[str, str]:
        """Creates a new topic and a subscription to it (unique names, with ``name`` in them);
        returns ``{"topic": path, "subscription": path}``."""
        suffix = uuid.uuid4().hex[:12]
        topic = self.publisher.topic_path(self.project, f"{name}-{suffix}")
        subscription = self.subscriber.subscription_path(self.project, f"{name}-{suffix}-sub")
        self.publisher.create_topic(name=topic)
        self.subscriber.create_subscription(name=subscription, topic=topic)
        return {"topic": topic, "subscription": subscription}

    def publish(self, topic: str, data: bytes, **attributes: str) -> str:
        """Publishes one message and waits for it to be stored; returns its message id."""
        return self.publisher.publish(topic, data, **attributes).result(timeout=30)

    def close(self) -> None:
        self.publisher.stop()
        self.subscriber.close()


@pytest.fixture(scope="session")
def pubsub_emulator_server(tmp_path_factory) -> Iterator[str]:
    """The emulator's ``host:port``, one server per test session (per xdist worker)."""
    reason = emulator_missing()
    if reason:
        pytest.skip(reason)
    log_path = tmp_path_factory.mktemp("pubsub-emulator") / "server.log"
    with start_pubsub_emulator(str(log_path)) as host:
        yield host


@pytest.fixture
def pubsub_emulator(pubsub_emulator_server, monkeypatch) -> Iterator[PubsubEmulator]:
    """``PUBSUB_EMULATOR_HOST`` set to the session's emulator for this test; yields a
    ``PubsubEmulator`` (make a fresh topic and subscription with ``.topic()``)."""
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator_server)
    monkeypatch.setenv("PUBSUB_PROJECT_ID", PROJECT)
    emulator = PubsubEmulator(pubsub_emulator_server)
    try:
        yield emulator
    finally:
        emulator.close()
