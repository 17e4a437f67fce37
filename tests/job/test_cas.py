"""The compare-and-swap contract, run against both stores: a local directory, and GCS as served
by fake-gcs-server (which enforces generation preconditions). The concurrency tests race real
processes; the lease and ledger tests check that no two writers both win and nothing is lost."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import multiprocessing.forkserver
import os
import queue
import sys
import time
from typing import Callable, List, Optional, Sequence

import pytest

from tests.gcs_emulators import (  # noqa: F401 (fixtures)
    anonymous_client,
    fake_gcs_bucket,
    fake_gcs_server,
    gcs_emulator_client,
    gcs_emulator_server,
)
from triehh_beam.job import cas
from triehh_beam.job.cas import (
    CasError,
    ContentionError,
    GcsCasStore,
    Lease,
    LeaseHeld,
    LeaseLost,
    LocalCasStore,
    PreconditionFailed,
    append_record,
    cas_store_for,
    read_records,
)

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


# ---- processes ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def process_context():
    """Workers are forked from a forkserver that has already imported this module and the
    client library, so a race of N processes starts in milliseconds, and no worker is forked
    from the (threaded) test process itself. The server is stopped with the module."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["triehh_beam.job.cas", "google.cloud.storage", __name__])
    # Python 3.11's forkserver does not apply the parent's sys.path before it preloads (the
    # workers do get it): hand it over through PYTHONPATH for the moment the server starts.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
        multiprocessing.forkserver.ensure_running()
    yield context
    multiprocessing.forkserver._forkserver._stop()


def _run_processes(context, target: Callable, argument_lists: Sequence[tuple]) -> List:
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


def _report(results, work: Callable):
    try:
        results.put(("ok", work()))
    except Exception as e:  # reported to the test, which names it
        results.put(("error", f"{type(e).__name__}: {e}"))


def _create_racer(barrier, results, spec: StoreSpec, name: str, index: int):
    store = spec.open()
    barrier.wait()

    def work():
        try:
            store.create(name, f"writer {index}".encode())
            return index
        except PreconditionFailed:
            return None

    _report(results, work)


def _replace_racer(barrier, results, spec: StoreSpec, name: str, generation, index: int):
    store = spec.open()
    barrier.wait()

    def work():
        try:
            store.replace(name, f"writer {index}".encode(), generation)
            return index
        except PreconditionFailed:
            return None

    _report(results, work)


def _lease_taker(barrier, results, spec: StoreSpec, owner: str):
    lease = Lease(spec.open(), "state/LEASE")
    barrier.wait()

    def work():
        try:
            return ("won", lease.acquire(owner, ttl_seconds=600).owner)
        except LeaseHeld as e:
            return ("held", e.owner)

    _report(results, work)


def _appender(barrier, results, spec: StoreSpec, writer: int, count: int):
    store = spec.open()
    barrier.wait()

    def work():
        for i in range(count):
            append_record(store, "ledger/spend.jsonl", {"writer": writer, "i": i}, max_attempts=200,
                          max_backoff=0.05)
        return writer

    _report(results, work)


class BudgetExhausted(Exception):
    pass


def _budgeted_appender(barrier, results, spec: StoreSpec, writer: int, tries: int, budget: int):
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

    _report(results, work)


def _winners(collected) -> list:
    assert all(status == "ok" for status, _ in collected), collected
    return [value for _, value in collected if value is not None]


# ---- the contract -----------------------------------------------------------------------------


def test_read_of_a_missing_object_is_none(store):
    assert store.read("nothing/here") is None


def test_create_then_read(store):
    generation = store.create("MANIFEST.json", b'{"round": 1}')
    assert store.read("MANIFEST.json") == cas.Versioned(b'{"round": 1}', generation)


@pytest.mark.parametrize("data", [b"", b"\x00\xff\n binary \n", "ünïcode\n".encode()])
def test_bytes_round_trip_exactly(store, data):
    generation = store.create("blob", data)
    assert store.read("blob") == cas.Versioned(data, generation)


def test_create_twice_fails_and_keeps_the_first(store):
    generation = store.create("MANIFEST.json", b"first")
    with pytest.raises(PreconditionFailed, match="MANIFEST.json"):
        store.create("MANIFEST.json", b"second")
    assert store.read("MANIFEST.json") == cas.Versioned(b"first", generation)


def test_replace_from_the_current_generation(store):
    first = store.create("MANIFEST.json", b"1")
    second = store.replace("MANIFEST.json", b"2", first)
    assert second != first
    assert store.read("MANIFEST.json") == cas.Versioned(b"2", second)
    third = store.replace("MANIFEST.json", b"3", second)
    assert len({first, second, third}) == 3


def test_replace_with_a_stale_generation_fails(store):
    first = store.create("MANIFEST.json", b"1")
    second = store.replace("MANIFEST.json", b"2", first)
    with pytest.raises(PreconditionFailed) as raised:
        store.replace("MANIFEST.json", b"stale", first)
    assert raised.value.expected == first
    assert store.read("MANIFEST.json") == cas.Versioned(b"2", second)


def test_replace_of_a_missing_object_fails(store):
    generation = store.create("other", b"x")
    with pytest.raises(PreconditionFailed):
        store.replace("missing", b"x", generation)
    assert store.read("missing") is None


def test_delete_with_the_current_generation(store):
    generation = store.create("LEASE", b"x")
    store.delete("LEASE", generation)
    assert store.read("LEASE") is None
    with pytest.raises(PreconditionFailed):
        store.delete("LEASE", generation)


@pytest.fixture
def store_enforcing_delete_preconditions(request, spec, store):
    if spec.endpoint is not None:  # strict: the day the emulator enforces it, this test says so
        request.node.add_marker(pytest.mark.xfail(
            strict=True, reason="fake-gcs-server 1.54 ignores ifGenerationMatch on DELETE (real GCS enforces it)"
        ))
    return store


def test_delete_with_a_stale_generation_fails(store_enforcing_delete_preconditions):
    store = store_enforcing_delete_preconditions
    first = store.create("LEASE", b"1")
    second = store.replace("LEASE", b"2", first)
    with pytest.raises(PreconditionFailed):
        store.delete("LEASE", first)
    assert store.read("LEASE") == cas.Versioned(b"2", second)


def test_a_generation_from_before_a_delete_does_not_match_the_new_object(store):
    old = store.create("MANIFEST.json", b"old")
    store.delete("MANIFEST.json", old)
    new = store.create("MANIFEST.json", b"new")
    assert new != old
    with pytest.raises(PreconditionFailed):
        store.replace("MANIFEST.json", b"ABA", old)
    assert store.read("MANIFEST.json").data == b"new"


def test_nested_names_are_separate_objects(store):
    store.create("ledger/2024/spend.jsonl", b"a")
    store.create("ledger/spend.jsonl", b"b")
    assert store.read("ledger/2024/spend.jsonl").data == b"a"
    assert store.read("ledger/spend.jsonl").data == b"b"


@pytest.mark.parametrize("name", ["", "/abs", "a//b", "a/../b", "./a", "a/", ".cas/locks/x"])
def test_invalid_names_are_refused(store, name):
    with pytest.raises(ValueError, match="name"):
        store.create(name, b"x")


def test_exactly_one_of_many_concurrent_creators_wins(process_context, spec):
    collected = _run_processes(process_context, _create_racer, [(spec, "MANIFEST.json", i) for i in range(6)])
    winners = _winners(collected)
    assert len(winners) == 1
    assert spec.open().read("MANIFEST.json").data == f"writer {winners[0]}".encode()


def test_exactly_one_of_many_concurrent_replacers_wins(process_context, spec, store):
    generation = store.create("MANIFEST.json", b"round 1")
    racers = [(spec, "MANIFEST.json", generation, i) for i in range(6)]
    collected = _run_processes(process_context, _replace_racer, racers)
    winners = _winners(collected)
    assert len(winners) == 1
    assert store.read("MANIFEST.json").data == f"writer {winners[0]}".encode()


# ---- Lease ----------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_lease_excludes_others_until_it_expires(store):
    clock = FakeClock()
    lease = Lease(store, "state/LEASE", clock=clock)
    held = lease.acquire("job-a", ttl_seconds=60)
    assert (held.owner, held.expires_at) == ("job-a", clock.now + 60)
    for other in ("job-b", "job-a"):  # the same owner name in another process is no exception
        with pytest.raises(LeaseHeld) as raised:
            lease.acquire(other, ttl_seconds=60)
        assert (raised.value.owner, raised.value.expires_at) == ("job-a", clock.now + 60)
    assert "job-a" in str(raised.value) and "state/LEASE" in str(raised.value)
    clock.now += 60  # expired: free for a takeover
    taken = lease.acquire("job-b", ttl_seconds=60)
    assert taken.owner == "job-b" and taken.lease_id != held.lease_id
    assert lease.current().owner == "job-b"


def test_renew_extends_and_release_frees(store):
    clock = FakeClock()
    lease = Lease(store, "LEASE", clock=clock)
    held = lease.acquire("job-a", ttl_seconds=60)
    clock.now += 50
    renewed = lease.renew(held, ttl_seconds=60)
    assert renewed.expires_at == clock.now + 60 and renewed.lease_id == held.lease_id
    clock.now += 50  # past the first expiry, within the renewed one
    with pytest.raises(LeaseHeld):
        lease.acquire("job-b", ttl_seconds=60)
    with pytest.raises(LeaseLost):
        lease.renew(held, ttl_seconds=60)  # the stale proof of the first hold
    lease.release(renewed)
    assert lease.current().released
    assert lease.acquire("job-b", ttl_seconds=60).owner == "job-b"  # no wait for expiry


def test_a_lease_taken_over_is_lost_to_its_old_holder(store):
    clock = FakeClock()
    lease = Lease(store, "LEASE", clock=clock)
    held = lease.acquire("job-a", ttl_seconds=10)
    clock.now += 11
    lease.acquire("job-b", ttl_seconds=10)
    for act in (lambda: lease.renew(held, 10), lambda: lease.release(held)):
        with pytest.raises(LeaseLost, match="job-b"):
            act()
    assert lease.current().owner == "job-b"


def test_take_over_decides_for_an_unexpired_holder(store):
    clock = FakeClock()
    lease = Lease(store, "LEASE", clock=clock)
    lease.acquire("crashed-process", ttl_seconds=600)
    asked = []

    def holder_is_alive(record):
        asked.append(record.owner)
        return False

    with pytest.raises(LeaseHeld):
        lease.acquire("job-b", ttl_seconds=60, take_over=holder_is_alive)
    held = lease.acquire("job-b", ttl_seconds=60, take_over=lambda record: record.owner == "crashed-process")
    assert asked == ["crashed-process"] and lease.current().owner == held.owner == "job-b"
    lease.release(held)
    never = lambda record: pytest.fail("take_over is asked only about an unexpired holder")  # noqa: E731
    assert lease.acquire("job-c", ttl_seconds=60, take_over=never).owner == "job-c"


def test_invalid_lease_arguments(store):
    lease = Lease(store, "LEASE")
    with pytest.raises(ValueError, match="ttl"):
        lease.acquire("a", ttl_seconds=0)
    with pytest.raises(ValueError, match="owner"):
        lease.acquire("", ttl_seconds=1)


def test_a_corrupt_lease_object_is_refused_with_its_name(store):
    store.create("LEASE", b"not json")
    with pytest.raises(CasError, match="LEASE.*not a lease"):
        Lease(store, "LEASE").acquire("a", ttl_seconds=1)


def test_two_takers_of_an_expired_lease_one_wins(process_context, spec, store):
    Lease(store, "state/LEASE", clock=FakeClock(0.0)).acquire("crashed-job", ttl_seconds=60)  # long expired
    for race in range(3):  # each race starts from an expired lease
        if race:
            held = Lease(store, "state/LEASE").current()
            assert held is not None
            store.replace(
                "state/LEASE",
                dataclasses.replace(held, expires_at=0.0).to_bytes(),
                store.read("state/LEASE").generation,
            )
        collected = _run_processes(process_context, _lease_taker, [(spec, f"taker-{race}-{i}") for i in range(2)])
        outcomes = sorted(value for _, value in collected)
        assert [status for status, _ in collected] == ["ok", "ok"], collected
        assert [o[0] for o in outcomes] == ["held", "won"], outcomes
        winner = outcomes[1][1]
        assert outcomes[0][1] == winner  # the loser was told who holds it
        assert Lease(store, "state/LEASE").current().owner == winner


# ---- append-only log ------------------------------------------------------------------------


def test_append_record_keeps_order_and_does_not_touch_the_record(store):
    record = {"job": "a", "epsilon": 1.5}
    ids = [append_record(store, "ledger.jsonl", record), append_record(store, "ledger.jsonl", {"job": "b"})]
    assert record == {"job": "a", "epsilon": 1.5}
    records = read_records(store, "ledger.jsonl")
    assert records == [
        {"job": "a", "epsilon": 1.5, "record_id": ids[0]},
        {"job": "b", "record_id": ids[1]},
    ]
    raw = store.read("ledger.jsonl").data.decode()
    assert [json.loads(line) for line in raw.splitlines()] == records


def test_append_with_a_known_record_id_is_idempotent(store):
    for _ in range(3):  # e.g. a job re-run after a crash records its spend once
        assert append_record(store, "ledger.jsonl", {"record_id": "job-7", "epsilon": 1.0}) == "job-7"
    append_record(store, "ledger.jsonl", {"record_id": "job-8", "epsilon": 1.0})
    assert [r["record_id"] for r in read_records(store, "ledger.jsonl")] == ["job-7", "job-8"]


def test_read_records_of_a_missing_log_is_empty(store):
    assert read_records(store, "ledger.jsonl") == []


def test_a_corrupt_log_is_refused_with_its_name(store):
    store.create("ledger.jsonl", b'{"ok": 1}\nnot json\n')
    with pytest.raises(CasError, match="ledger.jsonl.*line 2"):
        read_records(store, "ledger.jsonl")
    with pytest.raises(CasError, match="ledger.jsonl"):
        append_record(store, "ledger.jsonl", {"x": 1})


def test_append_record_refuses_what_json_cannot_hold(store):
    with pytest.raises(TypeError):
        append_record(store, "ledger.jsonl", {"x": object()})
    with pytest.raises(ValueError):
        append_record(store, "ledger.jsonl", {"x": float("nan")})
    assert store.read("ledger.jsonl") is None


def test_concurrent_appends_lose_no_record(process_context, spec, store):
    writers, per_writer = 4, 25
    collected = _run_processes(process_context, _appender, [(spec, w, per_writer) for w in range(writers)])
    assert sorted(_winners(collected)) == list(range(writers))
    records = read_records(store, "ledger/spend.jsonl")
    assert len(records) == writers * per_writer
    assert sorted((r["writer"], r["i"]) for r in records) == [
        (w, i) for w in range(writers) for i in range(per_writer)
    ]
    assert len({r["record_id"] for r in records}) == writers * per_writer
    for w in range(writers):  # each writer's records in its own order
        assert [r["i"] for r in records if r["writer"] == w] == list(range(per_writer))


def test_a_precondition_sees_the_records_and_can_refuse(store):
    seen = []
    append_record(store, "ledger.jsonl", {"record_id": "a"}, precondition=seen.append)
    append_record(store, "ledger.jsonl", {"record_id": "b"}, precondition=seen.append)
    assert [[r["record_id"] for r in records] for records in seen] == [[], ["a"]]

    def refuse(records):
        raise BudgetExhausted(len(records))

    with pytest.raises(BudgetExhausted):
        append_record(store, "ledger.jsonl", {"record_id": "c"}, precondition=refuse)
    append_record(store, "ledger.jsonl", {"record_id": "a"}, precondition=refuse)  # already in: no check
    assert [r["record_id"] for r in read_records(store, "ledger.jsonl")] == ["a", "b"]


def test_racing_appenders_cannot_overspend_a_budget(process_context, spec, store):
    # 4 writers try 6 appends each against a budget of 10 records: exactly 10 get in.
    collected = _run_processes(process_context, _budgeted_appender, [(spec, w, 6, 10) for w in range(4)])
    assert sum(_winners(collected)) == 10
    assert len(read_records(store, "ledger.jsonl")) == 10


# ---- retries: bounded, and safe when a write's response is lost -------------------------------


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


def test_append_gives_up_after_the_bounded_attempts(tmp_path):
    pauses = []
    with pytest.raises(ContentionError, match="5 times"):
        append_record(AlwaysContended(str(tmp_path)), "ledger.jsonl", {"x": 1}, max_attempts=5,
                      sleep=pauses.append)
    assert len(pauses) == 4 and all(0 <= p <= 0.5 for p in pauses)


def test_a_lost_response_does_not_duplicate_an_append(tmp_path):
    store = LostResponses(str(tmp_path))
    for job in ("a", "b"):
        append_record(store, "ledger.jsonl", {"job": job}, sleep=lambda s: None)
    assert [r["job"] for r in read_records(store, "ledger.jsonl")] == ["a", "b"]


def test_a_lost_response_still_acquires_renews_and_releases_the_lease(tmp_path):
    lease = Lease(LostResponses(str(tmp_path)), "LEASE")
    held = lease.acquire("job-a", ttl_seconds=60)
    assert lease.current().owner == "job-a"
    held = lease.renew(held, ttl_seconds=120)
    lease.release(held)
    assert lease.current().released


def test_lease_acquire_gives_up_after_the_bounded_attempts(tmp_path):
    with pytest.raises(ContentionError, match="3 attempts"):
        Lease(AlwaysContended(str(tmp_path)), "LEASE", max_attempts=3).acquire("a", ttl_seconds=1)


# ---- the local store's own guarantees ---------------------------------------------------------


def test_a_local_object_is_the_bytes_written_and_its_generation_their_sha256(tmp_path):
    generation = LocalCasStore(str(tmp_path)).create("MANIFEST.json", b"payload")
    assert (tmp_path / "MANIFEST.json").read_bytes() == b"payload"
    assert generation == hashlib.sha256(b"payload").hexdigest()
    assert LocalCasStore(str(tmp_path)).read("MANIFEST.json") == cas.Versioned(b"payload", generation)


def test_a_plain_local_file_is_an_object(tmp_path):
    # e.g. a manifest written before the store existed: readable, and replaced by CAS.
    (tmp_path / "MANIFEST.json").write_bytes(b'{"round": 1}')
    store = LocalCasStore(str(tmp_path))
    current = store.read("MANIFEST.json")
    assert current.data == b'{"round": 1}'
    store.replace("MANIFEST.json", b'{"round": 2}', current.generation)
    with pytest.raises(PreconditionFailed):
        store.replace("MANIFEST.json", b'{"round": 3}', current.generation)


def test_locally_equal_bytes_mean_an_equal_generation(tmp_path):
    # The documented difference from GCS: restoring earlier bytes restores their generation,
    # so an update computed from those bytes still applies.
    store = LocalCasStore(str(tmp_path))
    first = store.create("MANIFEST.json", b"A")
    second = store.replace("MANIFEST.json", b"B", first)
    assert store.replace("MANIFEST.json", b"A", second) == first
    store.replace("MANIFEST.json", b"C", first)


def test_a_local_writer_that_dies_before_the_rename_leaves_the_old_object(tmp_path, monkeypatch):
    store = LocalCasStore(str(tmp_path))
    generation = store.create("MANIFEST.json", b"round 1")

    def crash(*args):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(cas.os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        store.replace("MANIFEST.json", b"round 2", generation)
    monkeypatch.undo()
    assert store.read("MANIFEST.json") == cas.Versioned(b"round 1", generation)
    assert os.listdir(tmp_path / ".cas" / "tmp") == []
    assert store.replace("MANIFEST.json", b"round 2", generation)  # the lock was released


def test_cas_store_for_picks_the_store_from_the_path(tmp_path):
    local = cas_store_for(str(tmp_path / "state"))
    assert isinstance(local, LocalCasStore) and local.root == str(tmp_path / "state")
    gcs = cas_store_for("gs://bucket/jobs/a/state/")  # makes no request, needs no credentials
    assert isinstance(gcs, GcsCasStore)
    assert (gcs.bucket_name, gcs.prefix) == ("bucket", "jobs/a/state")
    assert gcs.location("MANIFEST.json") == "gs://bucket/jobs/a/state/MANIFEST.json"
    assert cas_store_for("gs://bucket").location("LEASE") == "gs://bucket/LEASE"
    with pytest.raises(ValueError, match="gs:// and local"):
        cas_store_for("s3://bucket/state")
    with pytest.raises(ValueError, match="bucket"):
        cas_store_for("gs:///state")


def test_fake_gcs_server_enforces_what_the_gcs_store_relies_on(fake_gcs_server, fake_gcs_bucket):
    # The emulator's behaviour, checked directly, so that a change of emulator cannot silently
    # turn the contract tests above into no-ops.
    from google.api_core import exceptions

    blob = fake_gcs_server.bucket(fake_gcs_bucket).blob("x")
    blob.upload_from_string(b"1", if_generation_match=0)
    with pytest.raises(exceptions.PreconditionFailed):
        fake_gcs_server.bucket(fake_gcs_bucket).blob("x").upload_from_string(b"2", if_generation_match=0)
    with pytest.raises(exceptions.PreconditionFailed):
        fake_gcs_server.bucket(fake_gcs_bucket).blob("x").upload_from_string(
            b"3", if_generation_match=blob.generation + 1
        )


def test_the_gcs_store_reads_from_a_server_that_sends_no_generation_header(gcs_emulator_client):
    # gcp-storage-emulator omits x-goog-generation on downloads: the store then asks for the
    # metadata and downloads exactly that generation.
    gcs_emulator_client.create_bucket("no-header")
    store = GcsCasStore("no-header", "p", client=gcs_emulator_client)
    generation = store.create("MANIFEST.json", b"round 1")
    assert store.read("MANIFEST.json") == cas.Versioned(b"round 1", generation)
