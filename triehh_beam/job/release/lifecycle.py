"""The lifecycle of a release (everything a job publishes under one ledger charge: a discovery, a
whole-item release, a window, a federated job), the only owner of its keys and its charge, in one
order for every mode: the caller plans and ``check_locations`` refuses what could not be written;
``Release.fresh`` draws a nonce (a window's is ``derived_nonce`` of its stream's committed one)
from which, with the seed and the identity, every key derives (no two releases share randomness);
the plan, nonce and ledger record id are committed to the state; ``ensure_charged`` charges once,
then the state is committed marked charged (``commit_then_charge`` does all three), before anything
is sampled or published; a charged release whose ledger lacks its record is refused in one line.
Nothing here runs in a step a runner may retry: the driver calls it. Only a resume reuses keys
(``Release.of_state``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Optional, Tuple

from triehh_beam.job.settings import paths
from triehh_beam.job.state import ledger as ledger_lib
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.sampling import Sampler

__all__ = ["LedgerMismatchError", "LocationError", "NONCE_BYTES", "Release", "charge_committed", "check_charged",
           "check_locations", "check_target", "commit_then_charge", "derived_nonce", "ensure_charged", "fresh_nonce",
           "open_ledger", "record_id_of"]

NONCE_BYTES = 16


class LedgerMismatchError(ValueError):
    """A resumed release's state names a charge its ledger does not hold."""


class LocationError(ValueError):
    """An output or state location the release could not write, found before anything is charged."""


@dataclasses.dataclass(frozen=True)
class Release:
    """The keys of one release.

    Attributes:
      seed: the secret seed (private state; never in a graph, an output or a log).
      identity: the settings' identity (``DiscoveryConfig.sampling_identity``), canonical JSON.
      nonce: ``NONCE_BYTES`` random bytes drawn when the release was planned.
    """

    seed: bytes = dataclasses.field(repr=False)
    identity: bytes
    nonce: bytes

    def __post_init__(self):
        if not isinstance(self.identity, bytes) or not isinstance(self.nonce, bytes):
            raise TypeError("a release's identity and nonce are bytes")
        if len(self.nonce) != NONCE_BYTES:
            raise ValueError(f"a release nonce is {NONCE_BYTES} bytes, got {len(self.nonce)}")
        keyed_hash.derive_key(self.seed, b"check")  # validates the seed's length

    @classmethod
    def fresh(cls, seed: bytes, identity: bytes) -> "Release":
        """A new release: a nonce from the operating system's randomness."""
        return cls(seed, identity, fresh_nonce())

    @classmethod
    def of_state(cls, state) -> "Release":
        """The release a committed ``state_pb2.JobState`` holds (a resume's keys)."""
        return cls(state.secret_seed, state.sampling_identity.encode("ascii"), state.release_nonce)

    @property
    def keyed_identity(self) -> bytes:
        """What every key is derived under: the identity and, unambiguously after it, the nonce.

        A nonce changes every key derived from the seed (sampling, item choice, census
        fingerprints, estimate noise, window keys): ``keyed_hash.derive_key`` encodes the
        identity with its length, so no (identity, nonce) pair collides with another identity.
        """
        return self.identity + b"\x00release=" + self.nonce.hex().encode("ascii")

    def sampler(self) -> Sampler:
        """The ``Sampler`` of every random decision of this release."""
        return Sampler(self.seed, self.keyed_identity)

    def record_id(self, name: str) -> str:
        """The ledger record id of this release of the job named ``name`` (a job id, a stream's
        window): unique to the release, since it names the nonce."""
        return record_id_of(name, self.nonce)

    def record(self, state, record_id: str) -> None:
        """Writes the seed, the release's identity, nonce and ledger record id into ``state`` (a
        new ``JobState`` the caller commits before the charge, ``ensure_charged``)."""
        state.secret_seed = self.seed
        state.sampling_identity = self.identity.decode("ascii")
        state.release_nonce = self.nonce
        state.ledger_record = record_id


def fresh_nonce() -> bytes:
    """A new release nonce, from the operating system's randomness, drawn by the driver (never in
    a step a runner may retry)."""
    return os.urandom(NONCE_BYTES)


def derived_nonce(base: bytes, name: str) -> bytes:
    """The nonce of the release named ``name`` (a stream's window) of a job whose ``base`` nonce
    (``fresh_nonce``, committed once by the job) is given: SHA-256 of both, so each name has its
    own, and a retry or a restart of the job finds the same one without drawing anything.

    Raises:
      ValueError: a base nonce that is not ``NONCE_BYTES`` bytes.
    """
    if not isinstance(base, bytes) or len(base) != NONCE_BYTES:
        raise ValueError(f"a base nonce is {NONCE_BYTES} bytes")
    digest = hashlib.sha256(b"triehh-release-nonce\x00" + base + name.encode("utf-8")).digest()
    return digest[:NONCE_BYTES]


def record_id_of(name: str, nonce: bytes) -> str:
    """The ledger record id of the release with ``nonce`` of the job (or window) named ``name``:
    ``Release.record_id``'s, for a release whose keys derive where the seed is not."""
    return f"{name}/release={nonce.hex()}"


def open_ledger(config) -> ledger_lib.Ledger:
    """The population's ledger of ``config`` (a ``DiscoveryConfig``), with its lifetime budget."""
    return ledger_lib.Ledger(config.resolved_ledger_dir, config.budget)


def check_target(ledger: ledger_lib.Ledger, config) -> None:
    """Refuses, before any record is read, a target (epsilon + epsilon_est, delta) that does not
    fit what is left of the budget (``BudgetExceededError``)."""
    ledger.check(ledger_lib.Spend(config.epsilon + (config.estimate_frequencies or 0.0), config.delta))


def check_charged(ledger: ledger_lib.Ledger, state) -> None:
    """Refuses to resume a release committed after its charge whose record ``ledger`` does not
    hold.

    Raises:
      LedgerMismatchError: one line naming the record and the ledger.
    """
    if not any(r.get("record_id") == state.ledger_record for r in ledger.records()):
        raise LedgerMismatchError(
            f"the ledger {ledger.path} holds no charge {state.ledger_record} for the release this state "
            "resumes: resume it with the ledger it was charged to (--ledger), or start a new release "
            "(another state directory)")


def ensure_charged(ledger: ledger_lib.Ledger, state, details: dict,
                   interval: Optional[Tuple[int, int]] = None) -> bool:
    """Charges the release committed in ``state`` unless its state says it was charged; returns
    True when the caller must mark it charged (``release_charged``) in its next commit.

    A release marked charged is checked: its record must be in the ledger. ``interval`` is the
    event-time interval ``[start, end)`` (microseconds) of what it releases, for a rolling
    budget (``Ledger.charge``; default: the instant of the charge).

    Raises:
      BudgetExceededError: the spend does not fit (another job took the budget).
      LedgerMismatchError: a charged release's record is not in the ledger (one line).
    """
    if not state.release_charged:
        ledger.charge_plan(state.ledger_record, state.plan, details, interval)
        return True
    check_charged(ledger, state)
    return False


def charge_committed(store, state, ledger: ledger_lib.Ledger, details: dict,
                     interval: Optional[Tuple[int, int]] = None):
    """Charges the release committed in ``store`` as ``state`` once (``ensure_charged``), then
    commits it marked charged; returns the state now committed.

    Raises:
      BudgetExceededError, LedgerMismatchError: as ``ensure_charged`` (nothing more committed).
    """
    if not ensure_charged(ledger, state, details, interval):
        return state
    marked = type(state)()
    marked.CopyFrom(state)
    marked.release_charged = True
    store.commit(marked)
    return marked


def commit_then_charge(store, state, ledger: ledger_lib.Ledger, details: dict,
                       interval: Optional[Tuple[int, int]] = None):
    """The whole start of a new release, in the one order: commits ``state`` (its plan, and the
    nonce and record id ``Release.record`` wrote) to ``store`` (a ``StateStore``), charges it,
    commits it marked charged. A crash after the first commit resumes the release (the same
    nonce) and charges it once; a refused charge leaves it committed and uncharged.

    Raises:
      BudgetExceededError: the spend does not fit; StateError: another run committed first.
    """
    store.commit(state)
    return charge_committed(store, state, ledger, details, interval)


def check_locations(output_dir: str, state_dir: str, options=None) -> None:
    """Refuses, before anything is charged, an output or state location that the release could
    not write: one that exists and is not a directory, one inside the other, (on a local disk) a
    directory that cannot be created or written, or, given the jobs' pipeline ``options``, a
    local state directory that their workers cannot reach (``runners.local_state_reachable``:
    Dataflow, ``DOCKER`` workers...), since workers write into it (the census spill, each
    round's tables, the windows' state).

    Raises:
      LocationError: one line naming the location and what would work.
    """
    from triehh_beam.job.state import cas  # local: cas imports google-cloud-storage lazily too

    if paths.is_inside(output_dir, state_dir) or paths.is_inside(state_dir, output_dir):
        raise LocationError(
            f"the output {output_dir} and the state directory {state_dir} must not be inside each other "
            "(the state holds the secret seed; the output is published): give --state-dir elsewhere")
    if options is not None and cas.is_local(state_dir):
        from apache_beam.options.pipeline_options import StandardOptions

        from triehh_beam.beam import runners  # local: Beam is imported only by what runs jobs

        if not runners.local_state_reachable(options):
            raise LocationError(
                f"the state directory {state_dir} is on this machine, which the workers of "
                f"--runner={options.view_as(StandardOptions).runner} cannot reach (they write the census spill and "
                "each round's tables there): give a shared one, --state-dir gs://bucket/path")
    for what, path in (("--output", output_dir), ("the state directory", state_dir)):
        if not cas.is_local(path):
            continue
        if os.path.exists(path) and not os.path.isdir(path):
            raise LocationError(f"{what} {path} exists and is not a directory: name a directory "
                                "(it is created if missing)")
        parent = path
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent.rstrip("/"))
        if parent and not (os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)):
            raise LocationError(f"{what} {path} cannot be written ({parent} is not a writable directory)")

