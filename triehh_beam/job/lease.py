"""The lease a discovery holds on its state directory for the whole run: one run at a time, a
lease renewed after every round, and a lease left by a killed process of this machine taken
over at once (any other holder's lease must expire first)."""

from __future__ import annotations

import json
import os
import socket
import uuid

from triehh_beam.job import cas

__all__ = ["LEASE_NAME", "StateLease", "holder_is_dead"]

LEASE_NAME = "LEASE"


def holder_is_dead(record: cas.LeaseRecord) -> bool:
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
      cas.LeaseHeld: another live run holds the lease.
    """

    def __init__(self, state_dir: str, lease_seconds: float):
        self._lease = cas.Lease(cas.cas_store_for(state_dir), LEASE_NAME)
        self._seconds = lease_seconds
        self._held = None

    def __enter__(self) -> "StateLease":
        owner = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "run": uuid.uuid4().hex})
        self._held = self._lease.acquire(owner, self._seconds, take_over=holder_is_dead)
        return self

    def renew(self) -> None:
        """Extends the lease by its duration; raises ``cas.LeaseLost`` if it was taken."""
        self._held = self._lease.renew(self._held, self._seconds)

    def __exit__(self, *exc_info) -> None:
        try:
            self._lease.release(self._held)
        except cas.LeaseLost:
            pass  # it had expired and been taken: nothing of ours to release
