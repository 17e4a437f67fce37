"""Shared by the compare-and-swap, lease and record-log tests: both stores (a local directory,
and GCS as served by fake-gcs-server, which enforces generation preconditions), the racing
processes and their workers, a fake clock, and stores whose writes always lose or whose
responses are always lost. The workers live here so that the forkserver preloads them."""

from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.forkserver
import os
import queue
import sys
import time
from typing import Callable, List, Optional, Sequence

import pytest

from tests.gcs_emulators import anonymous_client
from triehh_beam.job.state import cas
from triehh_beam.job.state.cas import LocalCasStore, PreconditionFailed, cas_store_for
from triehh_beam.job.state.lease import Lease, LeaseHeld
from triehh_beam.job.state.record_log import append_record

BACKENDS = ["local", "gcs"]
PROCESS_TIMEOUT_S = 60


@dataclasses.dataclass(frozen=True)
class StoreSpec:
    """How to open the same store in another process (a store holding a client is not
    picklable, and a client must not cross a fork)."""

    root: str
    endpoint: Optional[str] = None

    def open(self) -> cas.CasStore:
        return cas_store_for(self.root, client=anonymous_client(self.endpoint) if self.endpoint else None)


@pytest.fixture(params=BACKENDS)
def spec(request, tmp_path) -> StoreSpec:
    if request.param == "local":
        return StoreSpec(str(tmp_path / "cas"))
    bucket = request.getfixturevalue("fake_gcs_bucket")
    return StoreSpec(f"gs://{bucket}/jobs/a", request.getfixturevalue("fake_gcs_server").api_endpoint)


@pytest.fixture
def store(spec) -> cas.CasStore:
    return spec.open()


@pytest.fixture(scope="module")
def process_context():
    """Workers are forked from a forkserver that has already imported this module (the
    workers), the library and the client library, so a race of N processes starts in milliseconds, and no worker is forked
    from the (threaded) test process itself. The server is stopped with the module."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        ["triehh_beam.job.state.cas", "triehh_beam.job.state.lease", "triehh_beam.job.state.record_log",
         "google.cloud.storage", __name__]
    )
    # Python 3.11's forkserver does not apply the parent's sys.path before it preloads (the
    # workers do get it): hand it over through PYTHONPATH for the moment the server starts.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
        multiprocessing.forkserver.ensure_running()
    yield context
    multiprocessing.forkserver._forkserver._stop()


def run_processes(context, target: Callable, argument_lists: Sequence[tuple]) -> List:
    """Runs ``target(barrier, results, *arguments)`` in one process per argument tuple; every
    worker waits on the barrier, then puts one result. Returns the results."""
    barrier = context.Barrier(len(argument_lists), timeout=PROCESS_TIMEOUT_S)
    results = context.Queue()
    processes = [context.Process(target=target, args=(barrier, results) + tuple(a)) for a in argument_lists]
    for p in processes:
        p.start()
    collected = []
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    try:
        while len(collected) < len(processes):
            try:
                collected.append(results.get(timeout=0.05))
            except queue.Empty:
                crashed = any(p.exitcode not in (None, 0) for p in processes)
                if crashed or time.monotonic() > deadline or all(p.exitcode is not None for p in processes):
                    raise AssertionError(
                        f"{len(processes) - len(collected)} worker(s) did not report; "
                        f"exit codes {[p.exitcode for p in processes]}"
                    ) from None
    except BaseException:
        for p in processes:  # the others may be waiting at the barrier for the one that died
            if p.is_alive():
                p.kill()
        raise
    finally:
        for p in processes:
            p.join(timeout=PROCESS_TIMEOUT_S)
    assert [p.exitcode for p in processes] == [0] * len(processes)
    return collected


def report(results, work: Callable):
    try:
        results.put(("ok", work()))
    except Exception as e:  # reported to the test, which names it
        results.put(("error", f"{type(e).__name__}: {e}"))


def create_racer(barrier, results, spec: StoreSpec, name: str, index: int):
    store = spec.open()
    barrier.wait()

    def work():
        try:
            store.create(name, f"writer {index}".encode())
            return index
        except PreconditionFailed:
            return None

    report(results, work)


def replace_racer(barrier, results, spec: StoreSpec, name: str, generation, index: int):
    store = spec.open()
    barrier.wait()

    def work():
        try:
            store.replace(name, f"writer {index}".encode(), generation)
            return index
        except PreconditionFailed:
            return None

    report(results, work)


def lease_taker(barrier, results, spec: StoreSpec, owner: str):
    lease = Lease(spec.open(), "state/LEASE")
    barrier.wait()

    def work():
        try:
            return ("won", lease.acquire(owner, ttl_seconds=600).owner)
        except LeaseHeld as e:
            return ("held", e.owner)

    report(results, work)


def appender(barrier, results, spec: StoreSpec, writer: int, count: int):
    store = spec.open()
    barrier.wait()

    def work():
        for i in range(count):
            append_record(store, "ledger/spend.jsonl", {"writer": writer, "i": i}, max_attempts=200,
                          max_backoff=0.05)
        return writer

    report(results, work)


class BudgetExhausted(Exception):
    pass


def budgeted_appender(barrier, results, spec: StoreSpec, writer: int, tries: int, budget: int):
    store = spec.open()

    def fits(records):
        if len(records) >= budget:
            raise BudgetExhausted()

    barrier.wait()

    def work():
        charged = 0
        for i in range(tries):
            try:
                append_record(store, "ledger.jsonl", {"writer": writer, "i": i}, precondition=fits,
                              max_attempts=200, max_backoff=0.05)
                charged += 1
            except BudgetExhausted:
                pass
        return charged

    report(results, work)


def winners_of(collected) -> list:
    assert all(status == "ok" for status, _ in collected), collected
    return [value for _, value in collected if value is not None]


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class AlwaysContended(LocalCasStore):
    """Every write loses a race (someone else always wrote first)."""

    def create(self, name, data):
        raise PreconditionFailed(self.location(name), None)

    def replace(self, name, data, expected_generation):
        raise PreconditionFailed(self.location(name), expected_generation)


class LostResponses(LocalCasStore):
    """Every write lands, but its caller is told it failed: what a client sees when a request
    succeeds, its response is lost, and the retry fails the precondition against itself."""

    def create(self, name, data):
        super().create(name, data)
        raise PreconditionFailed(self.location(name), None)

    def replace(self, name, data, expected_generation):
        super().replace(name, data, expected_generation)
        raise PreconditionFailed(self.location(name), expected_generation)
