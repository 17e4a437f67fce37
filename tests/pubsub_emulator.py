"""The Google Cloud SDK's Pub/Sub emulator as pytest fixtures: a Java subprocess on a free
loopback port, started once per test session (per xdist worker) since a JVM costs about a second
and a few hundred MB, and a per-test fixture that points ``PUBSUB_EMULATOR_HOST`` at it (which
``google.cloud.pubsub`` clients, Beam's Pub/Sub reader among them, honour: an insecure channel,
no credential lookup) and hands out fresh topics and subscriptions, so that tests sharing the
server never see each other's messages. The emulator is the Debian package
``google-cloud-cli-pubsub-emulator``; where its launcher or Java is absent the fixtures skip with
one line saying so. The server runs in its own process group, stopped as a whole afterwards (the
launcher is a shell script that starts ``java``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from typing import Dict, Iterator, Optional

import pytest

__all__ = [
    "EMULATOR_BINARY",
    "PubsubEmulator",
    "emulator_missing",
    "pubsub_emulator",
    "pubsub_emulator_server",
    "start_pubsub_emulator",
]

EMULATOR_BINARY = "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
PROJECT = "test-project"
_READY_TIMEOUT_S = 60.0


def emulator_missing(binary: str = EMULATOR_BINARY) -> Optional[str]:
    """Why the emulator cannot run here (one line), or None when it can."""
    if not os.access(binary, os.X_OK):
        return (
            f"the Pub/Sub emulator is not installed ({binary}; "
            "apt-get install google-cloud-cli-pubsub-emulator)"
        )
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK)) and not shutil.which("java"):
        return "the Pub/Sub emulator needs Java, and there is none (apt-get install default-jre-headless)"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(host: str) -> bool:
    # The emulator answers plain HTTP/1.1 on its gRPC port: GET / is "Ok" once it serves.
    try:
        with urllib.request.urlopen(f"http://{host}/", timeout=1) as response:
            return response.status == 200
    except OSError:  # refused while the JVM starts (URLError is an OSError)
        return False


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)  # the launcher script and its java child
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


@contextlib.contextmanager
def start_pubsub_emulator(log_path: pathlib.Path, attempts: int = 3) -> Iterator[str]:
    """Runs the emulator on 127.0.0.1 until the context exits; yields its ``host:port``.

    Raises RuntimeError when it does not answer within a minute or exits at start three times
    (a port found free can be taken before the server binds it: then it starts elsewhere).
    """
    for attempt in range(attempts):
        host = f"127.0.0.1:{_free_port()}"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [EMULATOR_BINARY, "--host=127.0.0.1", f"--port={host.rsplit(':', 1)[1]}"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, stopped as one
            )
        try:
            deadline = time.monotonic() + _READY_TIMEOUT_S
            while not _ready(host):
                if process.poll() is not None:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Pub/Sub emulator at {host} was not ready within {_READY_TIMEOUT_S} s")
                time.sleep(0.05)
            else:
                yield host
                return
            if attempt + 1 == attempts:
                raise RuntimeError(
                    f"the Pub/Sub emulator exited with status {process.returncode}:\n"
                    f"{log_path.read_text(errors='replace')[-2000:]}"
                )
        finally:
            _stop(process)


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
    with start_pubsub_emulator(log_path) as host:
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
