"""The lease: exclusive until it expires, renewed and released by its holder only, taken over
by exactly one of several racing processes, and safe when a write's response is lost."""

from __future__ import annotations

import dataclasses

import pytest

from tests.gcs_emulators import (  # noqa: F401 (fixtures)
    fake_gcs_bucket,
    fake_gcs_server,
)
from tests.job.cas_harness import (  # noqa: F401 (fixtures)
    process_context,
    spec,
    store,
    AlwaysContended,
    FakeClock,
    LostResponses,
    lease_taker,
    run_processes,
)
from triehh_beam.job.state.cas import CasError, ContentionError
from triehh_beam.job.state.lease import Lease, LeaseHeld, LeaseLost


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
        collected = run_processes(process_context, lease_taker, [(spec, f"taker-{race}-{i}") for i in range(2)])
        outcomes = sorted(value for _, value in collected)
        assert [status for status, _ in collected] == ["ok", "ok"], collected
        assert [o[0] for o in outcomes] == ["held", "won"], outcomes
        winner = outcomes[1][1]
        assert outcomes[0][1] == winner  # the loser was told who holds it
        assert Lease(store, "state/LEASE").current().owner == winner


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
