"""``triehh federated serve`` answered by a fleet of Java devices (device-java, issue 29): the
server a subprocess against the Pub/Sub emulator, as in test_federated_serve.py, and the fleet
``SimulatedFleet``'s Pub/Sub side with every answer computed by one JVM holding a Java
``DeviceClient`` per user (``FleetMain``, driven over stdin/stdout: the JVM needs only
protobuf-java, not Google's Java Pub/Sub client and its gRPC tree, which CI would download from an
empty cache on every run). The published trie is the central run's, so are the estimate round's
estimates (``--estimate-frequencies``: every device answers it), and every report the JVM sent is
byte for byte the Python device's answer to the same messages (so a Python fleet, which
test_federated_serve.py shows gives the central trie, would have sent the same reports). Under
``--secure-aggregation`` every device's run of the four exchanges is a Java ``SecureVoteSession``
in the same JVM (its secrets from ``SecureRandom``, so its bytes cannot be compared with Python's;
tests/vectors/secagg_vectors.json shows byte compatibility), and the server, which sees only
each cohort's sum, publishes the central run's trie again; with 15% of the devices dropping at each
exchange it completes and counts the lost.
Needs Java 17 and device-java built (``mvn -q -B verify`` in device-java/, which .ci/run does
first); skips with one line where Java or Maven is absent."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
from typing import Dict, List

import pytest

from tests.e2e.federated_jobs import (SEED, central_discovery, estimates_of, federated_config,
                                      fleet_population, new_topics)
from triehh_beam.device import DeviceClient, InvitationMismatchError
from triehh_beam.evaluation.fleet import secagg as fleet_secagg
from triehh_beam.evaluation.fleet.devices import SimulatedFleet
from triehh_beam.evaluation.fleet.faults import FleetOptions
from triehh_beam.protocol.federated.messages import FederatedFormatError, VoteReport
from triehh_beam.protocol.secagg.device import SecAggProtocolError
from triehh_beam.protocol.secagg.messages import SecAggRequest

DEVICE_JAVA = pathlib.Path(__file__).resolve().parents[2] / "device-java"


def _classpath() -> str:
    """device-java's classes, test classes and protobuf-java jar (built if missing)."""
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the Java device fleet needs Java 17")
    classes, test_classes = DEVICE_JAVA / "target" / "classes", DEVICE_JAVA / "target" / "test-classes"
    if not (test_classes / "org" / "triehh" / "device" / "FleetMain.class").exists():
        if shutil.which("mvn") is None:
            pytest.skip("device-java is not built and there is no mvn on PATH to build it")
        subprocess.run(["mvn", "-q", "-B", "test-compile"], cwd=DEVICE_JAVA, check=True, timeout=600)
    pom = (DEVICE_JAVA / "pom.xml").read_text()
    repository = _java_user_home() / ".m2" / "repository"  # Maven's default local repository
    jars = []
    for group, artifact, prop in (("com/google/protobuf", "protobuf-java", "protobuf.version"),
                                  ("org/bouncycastle", "bcprov-jdk18on", "bouncycastle.version")):
        version = re.search(rf"<{re.escape(prop)}>(.+?)</{re.escape(prop)}>", pom).group(1)
        jar = repository / group / artifact / version / f"{artifact}-{version}.jar"
        assert jar.exists(), f"{jar} missing: build device-java with mvn first"
        jars.append(jar)
    return os.pathsep.join(str(p) for p in (classes, test_classes, *jars))


def _java_user_home() -> pathlib.Path:
    """Java's ``user.home``, under which Maven keeps its repository: the account's home, which is
    not ``$HOME`` when HOME is set elsewhere (a fresh HOME for a newcomer's run found no jars)."""
    shown = subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                           timeout=60)
    match = re.search(r"^\s*user\.home = (.+)$", shown.stderr, re.M)
    return pathlib.Path(match.group(1).strip()) if match else pathlib.Path.home()


def _item_fields(item) -> str:
    if isinstance(item, str):
        return f"t\t{item.encode('utf-8').hex()}"
    if isinstance(item, bytes):
        return f"b\t{item.hex()}"
    return f"i\t{int(item)}"


class JavaFleetProcess:
    """One JVM answering for every device (``FleetMain``), one request at a time."""

    def __init__(self, devices: Dict[bytes, Dict], path: pathlib.Path):
        path.write_text("".join(f"{device.hex()}\t{_item_fields(item)}\t{count}\n"
                                for device, records in devices.items() for item, count in records.items()))
        self._process = subprocess.Popen(["java", "-cp", _classpath(), "org.triehh.device.FleetMain", str(path)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self._process.stdout.readline().split()
        assert ready == ["ready", str(len(devices))], ready
        self._lock = threading.Lock()
        self.answered = 0

    def answer(self, device_id: bytes, announcement: bytes, invitation: bytes) -> str:
        self.answered += 1
        return self.ask(device_id.hex(), announcement.hex(), invitation.hex())

    def ask(self, *fields: str) -> str:
        """One request line to the JVM, its one answer line."""
        with self._lock:
            self._process.stdin.write(" ".join(fields) + "\n")
            self._process.stdin.flush()
            return self._process.stdout.readline().strip()

    def close(self) -> None:
        self._process.stdin.close()
        assert self._process.wait(timeout=30) == 0


class _JavaReport:
    """What ``SimulatedFleet`` needs of a report: its bytes (the JVM's, as they are) and whether it
    abstains."""

    def __init__(self, data: bytes, abstains: bool):
        self._data, self.abstains = data, abstains

    def to_bytes(self) -> bytes:
        return self._data


class _JavaDevice:
    """A device whose answers the JVM computes, checked against the Python reference's."""

    def __init__(self, java: JavaFleetProcess, device_id: bytes, python: DeviceClient, differences: List):
        self._java, self._id, self._python, self._differences = java, device_id, python, differences

    def respond(self, announcement, invitation):
        answer = self._java.answer(self._id, announcement.to_bytes(), invitation.to_bytes())
        try:
            expected = "R " + self._python.respond(announcement, invitation).to_bytes().hex()
        except InvitationMismatchError:
            expected = "X invitation:mismatch"
        if answer != expected:
            self._differences.append((self._id, announcement.round_index, expected, answer))
        if answer == "X invitation:mismatch":
            raise InvitationMismatchError(f"the JVM refused the invitation of {self._id!r}")
        data = bytes.fromhex(answer.removeprefix("R "))
        return _JavaReport(data, VoteReport.from_bytes(data, announcement.encoder).abstains)


class _JavaSession:
    """What ``fleet_secagg.SecureDevices`` needs of a ``SecureVoteSession``, run by the JVM: a
    Java ``SecureVoteSession`` per device and round; a Java refusal raised as the Python one."""

    runs = 0

    def __init__(self, client: _JavaDevice, announcement, setup: SecAggRequest):
        self._java = client._java
        self._name = f"{client._id.hex()}:{setup.job_id}:{setup.round_index}"
        self._keys = self._answer(self._java.ask("S", self._name, client._id.hex(), announcement.to_bytes().hex(),
                                                 setup.to_bytes().hex()))
        _JavaSession.runs += 1

    @staticmethod
    def _answer(line: str) -> bytes:
        if line.startswith("R "):
            return bytes.fromhex(line[2:])
        code = line.removeprefix("X ")
        if code == "invitation:mismatch":
            raise InvitationMismatchError(code)
        if code == "secagg:protocol":
            raise SecAggProtocolError(code)
        raise FederatedFormatError("<java device>", code)

    def keys(self) -> bytes:
        return self._keys

    def handle(self, request: SecAggRequest) -> bytes:
        return self._answer(self._java.ask("H", self._name, request.to_bytes().hex()))


class JavaFleet(SimulatedFleet):
    """``SimulatedFleet`` (its Pub/Sub side, unchanged) with Java devices answering."""

    def __init__(self, java: JavaFleetProcess, devices, *args, **kwargs):
        super().__init__(devices, *args, **kwargs)
        self.java, self.differences = java, []
        self._java_devices = {device_id: _JavaDevice(java, device_id, DeviceClient(records, device_id),
                                                     self.differences)
                              for device_id, records in devices.items()}

    def _client(self, device_id: bytes):
        return self._java_devices[device_id]


EPSILON_EST = "1"


def _serve(tmp_path, registry_path, announce, subscription, *extra):
    """``triehh federated serve`` as test_federated_serve.py runs it, with ``extra`` flags."""
    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    command = [sys.executable, "-m", "triehh_beam.cli", "federated", "serve", "--devices", str(registry_path),
               "--announce-topic", announce, "--reports-subscription", subscription,
               "--output", str(tmp_path / "out"), "--seed-file", str(seed), "--epsilon", "8", "--delta", "1e-6",
               "--max-length", "8", "--round-deadline", "60", "--project", "test-project", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=dict(os.environ))


def test_serve_answered_by_java_devices_publishes_the_central_trie_and_estimates(pubsub_emulator, tmp_path):
    records, users, _, registry_path = fleet_population(tmp_path, n=2000)
    announce, reports, subscription = new_topics()
    java = JavaFleetProcess(users, tmp_path / "fleet_records.tsv")
    try:
        with JavaFleet(java, users, announce, reports, FleetOptions(latency_median_s=0.05)) as fleet:
            done = _serve(tmp_path, registry_path, announce, subscription, "--estimate-frequencies", EPSILON_EST)
    finally:
        java.close()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "round 1: closed (report goal)" in done.stdout, done.stdout[-3000:]
    counts = fleet.counts()
    assert fleet.differences == [], fleet.differences[:5]
    # The vote rounds' selected devices, then every one of the 2,000 in the estimate round.
    assert java.answered == counts["reports"] >= 2000 + 3 * 100 and counts["refused"] == 0, counts
    assert counts["abstentions"] < counts["reports"]
    config = federated_config(tmp_path, registry_path, estimate_frequencies=float(EPSILON_EST))
    central_trie, _ = central_discovery(tmp_path, records, config)
    assert (tmp_path / "out" / "trie.pb").read_bytes() == central_trie
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    central = json.loads((tmp_path / "central" / "heavy_hitters.json").read_text())
    assert '"fed"' in estimates_of(published)[0]
    assert estimates_of(published) == estimates_of(central)



def _secure_serve(tmp_path, monkeypatch, options: FleetOptions, *extra):
    """``serve --secure-aggregation`` (cohorts of at most 100) answered by Java sessions."""
    records, users, _, registry_path = fleet_population(tmp_path, n=2000)
    announce, reports, subscription = new_topics()
    monkeypatch.setattr(fleet_secagg, "SecureVoteSession", _JavaSession)
    monkeypatch.setattr(_JavaSession, "runs", 0)
    java = JavaFleetProcess(users, tmp_path / "fleet_records.tsv")
    try:
        with JavaFleet(java, users, announce, reports, options) as fleet:
            done = _serve(tmp_path, registry_path, announce, subscription, "--secure-aggregation",
                          "--cohort-size", "100", *extra)
    finally:
        java.close()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return records, registry_path, done, fleet.counts()


@pytest.mark.slow
def test_serve_with_secure_aggregation_answered_by_java_devices_publishes_the_central_trie(
        pubsub_emulator, tmp_path, monkeypatch):
    records, registry_path, done, counts = _secure_serve(tmp_path, monkeypatch, FleetOptions(latency_median_s=0.05))
    # Every selected device ran the four exchanges in the JVM, and no answer was refused.
    assert _JavaSession.runs == counts["invitations"] > 0 and counts["refused"] == counts["dropped"] == 0, counts
    assert counts["reports"] == counts["secagg_requests"] == 4 * counts["invitations"], counts
    central_trie, _ = central_discovery(tmp_path, records, federated_config(tmp_path, registry_path))
    assert (tmp_path / "out" / "trie.pb").read_bytes() == central_trie
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    assert published["heavy_hitters"] and "secure aggregation" in published["federated"]["mode"]


@pytest.mark.slow
def test_java_devices_dropping_at_every_exchange_leave_the_recoverable_cohorts_counted(
        pubsub_emulator, tmp_path, monkeypatch):
    options = FleetOptions(latency_median_s=0.05, dropout=0.15)
    # Each exchange waits its deadline for the devices that dropped (the server cannot know): at
    # most 4 rounds of 4 x 15 s.
    _, _, done, counts = _secure_serve(tmp_path, monkeypatch, options, "--round-deadline", "15", "--cohort-size", "50",
                                       "--cohort-threshold", "0.4", "--max-length", "4")
    # 15% of the devices asked drop at each exchange: binomial over the requests, 6 sd.
    asked = counts["secagg_requests"]
    assert abs(counts["dropped"] - 0.15 * asked) < 6 * (asked * 0.15 * 0.85) ** 0.5, counts
    assert counts["refused"] == 0 and 0 < _JavaSession.runs < counts["invitations"], counts  # some drop at setup
    # The operator report (private) counts every cohort as unmasked or dropped whole at an
    # exchange, and the devices summed: fewer than those set up (85% answer each exchange).
    [report_path] = tmp_path.rglob("operator_report.json")
    secure = json.loads(report_path.read_text())["secure_aggregation"]
    assert secure["unmasked"] + sum(secure["dropped_by_phase"].values()) == secure["cohorts"] > 0, secure
    assert 0 < secure["devices_summed"] < counts["invitations"], (secure, counts)
