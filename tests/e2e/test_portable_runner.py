"""A whole discovery through Beam's portable job API: a separate job service and SDK worker pool.

This is the path Flink (and any portable runner) uses: the pipeline is translated to the Runner
API protobuf, submitted over gRPC to a job service, and executed by SDK harness processes that a
worker pool starts on request (``--environment_type=EXTERNAL``). Nothing runs in the test's
process except the driver itself. The test proves:

  * ``run_discovery`` works unchanged with ``--runner=PortableRunner --job_endpoint=...``: the
    first read (census and candidates) and the cut with every round are two portable jobs, their
    output files and counters (each round's, from the one job's metrics) come back to the driver, and the result (``trie.pb``, byte for byte, and ``heavy_hitters.json``)
    equals an in-process run with the same seed;
  * every job went through the job service (its ``GetJobs`` lists the two, both DONE);
  * the worker processes import ``triehh_beam`` from ``PYTHONPATH`` (no staging needed locally);
  * every server socket the two services (and the workers they start) open listens on loopback.

Beam's two ``main`` modules have no bind-address flag: ``local_job_service_main`` binds its job
port on ``localhost`` but its per-job FnAPI and logging servers on ``[::]``, and
``worker_pool_main`` binds ``[::]:<port>``. Each service is therefore started through a
three-line wrapper (``_LOOPBACK_MAIN``) that rewrites a wildcard gRPC bind address to
``localhost`` and then runs the unchanged module with ``runpy``.

Deselect with ``-m "not portable"``; it runs by default (about 20-30 s).
"""

import contextlib
import ipaddress
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam import runners
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import DiscoveryConfig, run_discovery
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.state.state_store import StateStore

pytestmark = [pytest.mark.portable, pytest.mark.slow]

REPO_ROOT = str(pathlib.Path(__file__).resolve().parents[2])
SEED = bytes(range(7, 39))
STARTUP_TIMEOUT_S = 60
DISCOVERY_TIMEOUT_S = 150  # the servers are killed after this, which fails the run instead of hanging
STOP_TIMEOUT_S = 10

# Runs a Beam main module with every wildcard gRPC bind address ("[::]:p", "0.0.0.0:p") rewritten
# to "localhost:p" (grpc binds both 127.0.0.1 and ::1 for "localhost").
_LOOPBACK_MAIN = r"""
import runpy, sys
import grpc._server as server
bind = server._Server.add_insecure_port
def loopback(self, address):
    host, _, port = address.rpartition(":")
    return bind(self, "localhost:" + port if host in ("[::]", "0.0.0.0", "") else address)
server._Server.add_insecure_port = loopback
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""

# 200 users, one word each: a few words far above theta, one near it, some below.
WORDS = ["the"] * 60 + ["to"] * 40 + ["tea"] * 30 + ["a"] * 40 + ["of"] * 20 + ["zebra"] * 5 + [
    f"x{i}" for i in range(5)
]


# ---- the two services ---------------------------------------------------------------------------


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class _Service:
    """A Beam service module run as a subprocess in its own process group, bound to loopback."""

    def __init__(self, module: str, port_flag: str, env: dict, log_path: pathlib.Path):
        self.module, self.port_flag, self.env, self.log_path = module, port_flag, env, log_path
        self.proc = None
        self.port = None

    def start(self) -> "_Service":
        for _ in range(3):  # a free port can be taken between the probe and the bind: retry
            self.port = _free_loopback_port()
            log = open(self.log_path, "ab")
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", _LOOPBACK_MAIN, self.module, self.port_flag, str(self.port)],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own process group: stop() reaches the workers too
                )
            finally:
                log.close()
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while time.monotonic() < deadline and self.proc.poll() is None:
                if _accepts(self.port):
                    return self
                time.sleep(0.2)
            if self.proc.poll() is None:
                self.stop()
                raise AssertionError(f"{self.module} did not listen on {self.port} within "
                                     f"{STARTUP_TIMEOUT_S} s:\n{self.log()}")
        raise AssertionError(f"{self.module} exited at start-up three times:\n{self.log()}")

    def stop(self) -> None:
        """SIGTERM to the service's process group, SIGKILL after a timeout."""
        if self.proc is None or self.proc.poll() is not None and not self._group_alive():
            return
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait)
            if not self._group_alive():
                return

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def pids(self):
        """The service's pid and those of its descendants (the SDK workers it started)."""
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            for children in pathlib.Path(f"/proc/{pid}/task").glob("*/children"):
                with contextlib.suppress(OSError):
                    todo.extend(int(c) for c in children.read_text().split())
        return found

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def portable_services(tmp_path):
    """A job service and an SDK worker pool; yields (job port, worker pool port, services)."""
    venv_bin = os.path.dirname(sys.executable)  # worker_pool_main starts workers as "python"
    pythonpath = [REPO_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(
        os.environ,
        PATH=os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join(pythonpath),
        PYTHONUNBUFFERED="1",
    )
    job_service = _Service("apache_beam.runners.portability.local_job_service_main", "--port", env,
                           tmp_path / "job_service.log")
    worker_pool = _Service("apache_beam.runners.worker.worker_pool_main", "--service_port", env,
                           tmp_path / "worker_pool.log")
    try:
        job_service.start()
        worker_pool.start()
        yield job_service.port, worker_pool.port, (job_service, worker_pool)
    finally:
        worker_pool.stop()
        job_service.stop()


# ---- listening sockets, from /proc ---------------------------------------------------------------


def _socket_inodes(pid: int):
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.scandir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                match = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(fd.path))
                if match:
                    inodes.add(match.group(1))
    return inodes


def _listening(pids):
    """(address, port) of every TCP socket in LISTEN state owned by one of ``pids``."""
    inodes = set().union(*(_socket_inodes(p) for p in pids)) if pids else set()
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state != "0A" or inode not in inodes:  # 0A: LISTEN
                    continue
                hex_ip, hex_port = local.split(":")
                raw = bytes.fromhex(hex_ip)
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # host order
                found.add((ipaddress.ip_address(raw), int(hex_port, 16)))
    return found


def _is_loopback(address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


class _ListenWatcher(threading.Thread):
    """Samples the services' listening sockets while the discovery runs (per-job servers come
    and go with each job)."""

    def __init__(self, services):
        super().__init__(daemon=True)
        self.services, self.seen, self._stop_event = services, set(), threading.Event()

    def run(self):
        while not self._stop_event.is_set():
            pids = [pid for service in self.services for pid in service.pids()]
            self.seen |= _listening(pids)
            self._stop_event.wait(0.1)

    def stop(self):
        self._stop_event.set()
        self.join(timeout=5)


# ---- the test --------------------------------------------------------------------------------------


def _config(records: str, output: pathlib.Path) -> DiscoveryConfig:
    return DiscoveryConfig(
        input_pattern=records,
        output_dir=str(output),
        epsilon=4.0,
        delta=1e-6,
        max_length=5,
        seed=SEED,
        theta=5,
        batch_size=100,
        allow_no_guarantee=True,  # 200 users cannot meet Theorem 1; the plan is fixed for the test
        protocol="triehh",
    )


def _without_timings(lines):
    return [re.sub(r", [0-9.]+ s$", "", line) for line in lines]


def _job_service_jobs(port: int):
    import grpc
    from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

    with grpc.insecure_channel(f"localhost:{port}") as channel:
        stub = beam_job_api_pb2_grpc.JobServiceStub(channel)
        jobs = stub.GetJobs(beam_job_api_pb2.GetJobsRequest(), timeout=30).job_info
        return [beam_job_api_pb2.JobState.Enum.Name(job.state) for job in jobs]


def _forbid_non_loopback_network(monkeypatch):
    """The driver process may only talk to loopback (grpc's C core bypasses Python sockets; the
    /proc check covers the servers)."""
    attempts = []
    getaddrinfo, connect = socket.getaddrinfo, socket.socket.connect

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host not in ("localhost", "127.0.0.1", "::1"):
            attempts.append(("getaddrinfo", host))
            raise OSError(f"test forbids network access (getaddrinfo {host!r})")
        return getaddrinfo(host, *args, **kwargs)

    def guarded_connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if host not in ("localhost", "127.0.0.1", "::1"):
            attempts.append(("connect", address))
            raise OSError(f"test forbids network access (connect {address!r})")
        return connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    return attempts


def test_a_discovery_on_the_portable_runner_equals_the_in_process_run(
    tmp_path, portable_services, monkeypatch
):
    records = str(tmp_path / "records.parquet")
    write_records(records, [(user, word) for user, word in enumerate(WORDS)])

    # Both runs are one release (one output path, moved aside after each run, and the first
    # run's release given to the second: its seed, identity and nonce, mixed into every sampling
    # key), so both runners draw the same samples.
    output = tmp_path / "out"

    def move_aside(run: str) -> None:
        output.rename(tmp_path / run)
        pathlib.Path(f"{output}.state").rename(tmp_path / f"{run}.state")

    in_process_lines = []
    expected = run_discovery(_config(records, output), PipelineOptions([]),
                             progress=in_process_lines.append)
    release = Release.of_state(StateStore(f"{output}.state").load())
    move_aside("in_process")
    assert {"the", "to", "a"} <= set(expected.heavy_hitters)  # each held by 20-30% of the users
    assert expected.rounds_run >= 3

    job_port, worker_port, services = portable_services
    options = PipelineOptions([
        "--runner=PortableRunner",
        f"--job_endpoint=localhost:{job_port}",
        "--environment_type=EXTERNAL",
        f"--environment_config=localhost:{worker_port}",
    ])
    assert not runners.uses_in_process_runner(options)
    attempts = _forbid_non_loopback_network(monkeypatch)
    watcher = _ListenWatcher(services)
    watchdog = threading.Timer(DISCOVERY_TIMEOUT_S, lambda: [s.stop() for s in services])
    portable_lines = []
    started = time.monotonic()
    watcher.start()
    watchdog.start()
    try:
        result = run_discovery(_config(records, output), options,
                               progress=portable_lines.append, release=release)
    except Exception:
        print("---- job service log ----\n" + services[0].log()[-5000:])
        print("---- worker pool log ----\n" + services[1].log()[-5000:])
        raise
    finally:
        watchdog.cancel()
        watcher.stop()
    elapsed = time.monotonic() - started
    move_aside("portable")
    monkeypatch.undo()  # the gRPC query below is loopback anyway; restore sockets first

    # The same discovery, byte for byte.
    assert result.heavy_hitters == expected.heavy_hitters
    assert result.frequent_prefixes == expected.frequent_prefixes
    assert result.rounds_run == expected.rounds_run and result.stop_reason == expected.stop_reason
    assert (tmp_path / "portable" / "trie.pb").read_bytes() == (tmp_path / "in_process" / "trie.pb").read_bytes()
    documents = [json.loads((tmp_path / run / "heavy_hitters.json").read_text()) for run in ("in_process", "portable")]
    for document in documents:
        del document["job_id"], document["created_at"]
    assert documents[0] == documents[1]
    # The counters came back through the job service's metrics: the same per-round counters in
    # the (private) operator reports, and the same progress lines, timings aside.
    assert _without_timings(portable_lines) == _without_timings(in_process_lines)
    reports = [json.loads((tmp_path / f"{run}.state" / "operator_report.json").read_text())
               for run in ("in_process", "portable")]
    counters = [[r["counters"] for r in report["rounds"]] for report in reports]
    assert counters[0] == counters[1]
    assert all(round_counters["users_sampled"] == 100 for round_counters in counters[1])

    # Every job ran on the job service: the first read, then the cut with every round.
    assert _job_service_jobs(job_port) == ["DONE", "DONE"]
    assert "Starting worker with command" in services[1].log()

    # Nothing listened beyond loopback, and the driver made no non-loopback connection.
    assert {port for _, port in watcher.seen} >= {job_port, worker_port}
    assert [a for a in watcher.seen if not _is_loopback(a[0])] == []
    assert attempts == []
    print(f"portable discovery: census + {result.rounds_run} rounds in {elapsed:.1f} s; "
          f"{len(watcher.seen)} listening sockets seen, on {sorted({str(a) for a, _ in watcher.seen})}")


def test_the_listen_check_sees_this_process_sockets_and_tells_loopback_from_wildcard():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as v4, \
            socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as v6:
        v4.bind(("127.0.0.1", 0))
        v4.listen()
        v6.bind(("::1", 0))
        v6.listen()
        seen = _listening([os.getpid()])
        assert (ipaddress.ip_address("127.0.0.1"), v4.getsockname()[1]) in seen
        assert (ipaddress.ip_address("::1"), v6.getsockname()[1]) in seen
    assert all(_is_loopback(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1", "::ffff:127.0.0.1"))
    assert not any(_is_loopback(ipaddress.ip_address(a)) for a in ("0.0.0.0", "::", "10.1.2.3"))
