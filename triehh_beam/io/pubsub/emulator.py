"""The Google Cloud SDK's Pub/Sub emulator as a local server: ``start_pubsub_emulator`` runs it
on 127.0.0.1 on a free port until its context exits and yields the ``host:port`` to put in
``PUBSUB_EMULATOR_HOST`` (which ``google.cloud.pubsub`` clients, Beam's Pub/Sub reader among
them, honour: an insecure channel, no credential lookup); ``emulator_missing`` says in one line
why it cannot run here. The emulator is the Debian package ``google-cloud-cli-pubsub-emulator``
(a launcher script that starts ``java``), so the server runs in its own process group, stopped
as a whole. The tests' fixtures (``tests/pubsub_emulator.py``) and ``triehh federated simulate``
without ``PUBSUB_EMULATOR_HOST`` use it; nothing here is needed in production.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from typing import Iterator, Optional

__all__ = ["EMULATOR_BINARY", "READY_TIMEOUT_S", "emulator_missing", "start_pubsub_emulator"]

EMULATOR_BINARY = "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
READY_TIMEOUT_S = 60.0


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
def start_pubsub_emulator(
    log_path: Optional[str] = None,
    attempts: int = 3,
    binary: str = EMULATOR_BINARY,
    ready_timeout: float = READY_TIMEOUT_S,
) -> Iterator[str]:
    """Runs the emulator on 127.0.0.1 until the context exits; yields its ``host:port``.

    Args:
      log_path: where the server's output goes (appended); None: a temporary file, removed
        when the context exits.
      attempts: how many ports to try (a port found free can be taken before the server binds
        it: then it starts elsewhere).
      binary: the emulator's launcher.
      ready_timeout: seconds to wait for the server to answer.

    Raises:
      RuntimeError: the emulator cannot run here (``emulator_missing``), does not answer within
        ``ready_timeout`` seconds, or exits at start ``attempts`` times (the message ends with
        the tail of its log).
    """
    reason = emulator_missing(binary)
    if reason:
        raise RuntimeError(reason)
    with contextlib.ExitStack() as cleanup:
        if log_path is None:
            log_dir = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="pubsub-emulator-"))
            log_path = os.path.join(log_dir, "server.log")
        for attempt in range(attempts):
            host = f"127.0.0.1:{_free_port()}"
            with open(log_path, "ab") as log:
                process = subprocess.Popen(
                    [binary, "--host=127.0.0.1", f"--port={host.rsplit(':', 1)[1]}"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own process group, stopped as one
                )
            try:
                deadline = time.monotonic() + ready_timeout
                while not _ready(host):
                    if process.poll() is not None:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the Pub/Sub emulator at {host} was not ready within {ready_timeout:g} s")
                    time.sleep(0.05)
                else:
                    yield host
                    return
                if attempt + 1 == attempts:
                    with open(log_path, "rb") as log:
                        tail = log.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"the Pub/Sub emulator exited with status {process.returncode}:\n{tail}")
            finally:
                _stop(process)
