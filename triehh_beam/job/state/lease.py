"""An exclusive, expiring lease in one compare-and-swap object, so that two runs never advance the
same state: ``Lease.acquire`` takes a missing, released or expired lease by compare-and-swap (of
simultaneous takers exactly one wins; the others see ``LeaseHeld`` naming it), ``renew`` and
``release`` keep and end it, and a hold ended behind its holder's back surfaces as ``LeaseLost``.
``StateLease`` is how a discovery holds its state directory: renewed after every round, a lease
left by a killed process of this machine taken over at once.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
import time
import uuid
from typing import Callable, Optional

from triehh_beam.job.state.cas import (CasError, CasStore, ContentionError, Generation,
                                       PreconditionFailed, Versioned, check_name, cas_store_for,
                                       encode_line)

__all__ = ["HeldLease", "LEASE_NAME", "Lease", "LeaseHeld", "LeaseLost", "LeaseRecord", "StateLease", "holder_is_dead"]


def _timestamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """What a lease object says: its holder, until when, and whether it was released."""

    owner: str
    lease_id: str
    acquired_at: float
    expires_at: float
    released: bool

    def free_at(self, now: float) -> bool:
        return self.released or self.expires_at <= now

    def to_bytes(self) -> bytes:
        return encode_line(dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class HeldLease:
    """Proof of holding a lease: pass it to ``Lease.renew`` and ``Lease.release``."""

    owner: str
    lease_id: str
    acquired_at: float
    expires_at: float
    generation: Generation


class LeaseHeld(CasError):
    """Someone else holds the lease and it has not expired."""

    def __init__(self, location: str, owner: str, expires_at: float):
        self.owner = owner
        self.expires_at = expires_at
        super().__init__(f"{location} is held by {owner!r} until {_timestamp(expires_at)}")


class LeaseLost(CasError):
    """The lease is no longer the caller's: it expired and was taken over, or was released."""


class Lease:
    """An exclusive, expiring lease stored in one compare-and-swap object.

    ``acquire`` succeeds when the object is missing, released or expired, and writes a new lease
    by compare-and-swap from the generation it read, so of any number of simultaneous takers
    exactly one wins; the others see ``LeaseHeld`` naming the winner. A holder renews before
    ``expires_at`` and releases when done (a released lease is marked, not deleted, so that a
    takeover is always a compare-and-swap). Expiry is judged on the taker's clock: choose a ttl
    far above the clock skew between machines, and still guard the writes the lease protects
    with their own compare-and-swap.

    Args:
      store: where the lease object lives.
      name: the lease object's name.
      clock: seconds since the epoch (``time.time``), injectable for tests.
      max_attempts: bound on the read-and-swap loop of ``acquire``.
    """

    def __init__(self, store: CasStore, name: str = "LEASE", *, clock: Callable[[], float] = time.time,
                 max_attempts: int = 10):
        self.store = store
        self.name = check_name(name)
        self.clock = clock
        self.max_attempts = max_attempts

    @property
    def location(self) -> str:
        return self.store.location(self.name)

    def _record(self, current: Versioned) -> LeaseRecord:
        try:
            document = json.loads(current.data.decode("utf-8"))
            return LeaseRecord(
                owner=str(document["owner"]),
                lease_id=str(document["lease_id"]),
                acquired_at=float(document["acquired_at"]),
                expires_at=float(document["expires_at"]),
                released=bool(document["released"]),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CasError(f"{self.location}: not a lease object ({e})") from None

    def current(self) -> Optional[LeaseRecord]:
        """What the lease object says now, or None if there is none."""
        current = self.store.read(self.name)
        return None if current is None else self._record(current)

    def acquire(
        self, owner: str, ttl_seconds: float, *, take_over: Optional[Callable[[LeaseRecord], bool]] = None
    ) -> HeldLease:
        """Takes the lease for ``ttl_seconds`` if it is free, released or expired.

        Args:
          owner: who takes it (stored in the lease object, shown to others in ``LeaseHeld``).
          ttl_seconds: how long the lease lasts unless renewed.
          take_over: called with an unexpired holder's record; True means the holder is known
            to be gone (e.g. a process of this machine that no longer exists) and its lease is
            taken over at once, still by compare-and-swap, so of several takers one wins.

        Raises:
          LeaseHeld: another holder's lease (or the same owner's, from another process) has
            not expired.
          ContentionError: the object kept changing for ``max_attempts`` reads.
        """
        if not ttl_seconds > 0:
            raise ValueError(f"ttl_seconds must be > 0, got {ttl_seconds}")
        if not owner:
            raise ValueError("an owner is required")
        ours: Optional[LeaseRecord] = None
        for _ in range(self.max_attempts):
            current = self.store.read(self.name)
            if current is not None and ours is not None and current.data == ours.to_bytes():
                return self._held(ours, current.generation)  # our write landed; its response was lost
            now = self.clock()
            if current is not None:
                record = self._record(current)
                if not record.free_at(now) and not (take_over is not None and take_over(record)):
                    raise LeaseHeld(self.location, record.owner, record.expires_at)
            ours = LeaseRecord(owner, uuid.uuid4().hex, now, now + ttl_seconds, released=False)
            try:
                if current is None:
                    generation = self.store.create(self.name, ours.to_bytes())
                else:
                    generation = self.store.replace(self.name, ours.to_bytes(), current.generation)
            except PreconditionFailed:
                continue  # someone else wrote first: read again
            return self._held(ours, generation)
        raise ContentionError(f"{self.location}: gave up acquiring after {self.max_attempts} attempts")

    def _held(self, record: LeaseRecord, generation: Generation) -> HeldLease:
        return HeldLease(record.owner, record.lease_id, record.acquired_at, record.expires_at, generation)

    def _swap(self, held: HeldLease, record: LeaseRecord, what: str) -> Generation:
        data = record.to_bytes()
        try:
            return self.store.replace(self.name, data, held.generation)
        except PreconditionFailed:
            current = self.store.read(self.name)
            if current is not None and current.data == data:
                return current.generation  # our write landed; its response was lost
            now_holder = "nobody" if current is None else repr(self._record(current).owner)
            raise LeaseLost(
                f"{self.location}: cannot {what} the lease of {held.owner!r}: it changed since "
                f"(now held by {now_holder}); it expired and was taken over, or was released"
            ) from None

    def renew(self, held: HeldLease, ttl_seconds: float) -> HeldLease:
        """Extends a held lease to ``ttl_seconds`` from now; returns the new proof (the old one
        is stale).

        Raises:
          LeaseLost: the lease changed since ``held`` (taken over after expiry, or released).
        """
        if not ttl_seconds > 0:
            raise ValueError(f"ttl_seconds must be > 0, got {ttl_seconds}")
        record = LeaseRecord(held.owner, held.lease_id, held.acquired_at, self.clock() + ttl_seconds, False)
        return self._held(record, self._swap(held, record, "renew"))

    def release(self, held: HeldLease) -> None:
        """Marks the lease released, so that the next ``acquire`` need not wait for expiry.

        Raises:
          LeaseLost: the lease changed since ``held``: the caller's hold had already ended.
        """
        record = LeaseRecord(held.owner, held.lease_id, held.acquired_at, self.clock(), released=True)
        self._swap(held, record, "release")


LEASE_NAME = "LEASE"


def holder_is_dead(record: LeaseRecord) -> bool:
    """True for a lease held by a process of this machine that no longer exists."""
    try:
        owner = json.loads(record.owner)
        if owner.get("host") != socket.gethostname():
            return False
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return True
    except (ValueError, KeyError, TypeError, PermissionError, OSError):
        return False
    return False


class StateLease:
    """Holds the lease on ``state_dir`` (a context manager); ``renew()`` after each round.

    Raises (on entering):
      LeaseHeld: another live run holds the lease.
    """

    def __init__(self, state_dir: str, lease_seconds: float):
        self._lease = Lease(cas_store_for(state_dir), LEASE_NAME)
        self._seconds = lease_seconds
        self._held = None
        self._existed = True  # whether a lease object was there before this run

    def __enter__(self) -> "StateLease":
        owner = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "run": uuid.uuid4().hex})
        self._existed = self._lease.current() is not None
        self._held = self._lease.acquire(owner, self._seconds, take_over=holder_is_dead)
        return self

    def discard(self) -> bool:
        """After the run (the lease released): True if the lease object is still this run's
        released record, so no other run took the state directory since; it is then deleted
        (by compare-and-swap) if there was none before this run, for a run that leaves nothing
        behind. False otherwise, or if the delete lost a race (the lease then stays)."""
        if self._held is None:
            return False
        current = self._lease.store.read(self._lease.name)
        if current is None:
            return not self._existed
        record = self._lease._record(current)
        if record.lease_id != self._held.lease_id or not record.released:
            return False
        if not self._existed:
            try:
                self._lease.store.delete(self._lease.name, current.generation)
            except PreconditionFailed:
                return False
        return True

    def renew(self) -> None:
        """Extends the lease by its duration; raises ``LeaseLost`` if it was taken."""
        self._held = self._lease.renew(self._held, self._seconds)

    def __exit__(self, *exc_info) -> None:
        try:
            self._lease.release(self._held)
        except LeaseLost:
            pass  # it had expired and been taken: nothing of ours to release
