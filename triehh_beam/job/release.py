"""The lifecycle of a release (everything a job publishes under one ledger charge: a discovery, a
whole-item release, a window, a federated job), the only owner of its keys and its charge: the
caller plans and ``check_locations`` refuses what could not be written; ``Release.fresh`` draws a
nonce from which, with the seed and the identity, every key derives (no two releases share
randomness); the caller commits the plan, nonce and ledger record id; ``ensure_charged`` charges
once, before anything is sampled or published, and refuses in one line a charged release whose
ledger lacks its record. Only a resume reuses keys (``Release.of_state``).
"""

from __future__ import annotations

import dataclasses
import os
from triehh_beam.job import ledger as ledger_lib
from triehh_beam.job import paths
from triehh_beam.protocol import keyed_hash
from triehh_beam.protocol.sampling import Sampler

__all__ = ["LedgerMismatchError", "LocationError", "NONCE_BYTES", "Release", "charge", "check_charged",
           "check_locations", "check_target", "ensure_charged", "fresh_nonce", "open_ledger", "record_id_of"]

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
    """A new release nonce, from the operating system's randomness. A windowed job draws each
    window's where the window is planned, in its graph, which carries derived keys, never the
    seed (``sampling.WindowKeys`` takes the nonce)."""
    return os.urandom(NONCE_BYTES)


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


def charge(ledger: ledger_lib.Ledger, record_id: str, plan, details: dict) -> None:
    """Charges one release's plan under ``record_id`` (``Ledger.charge_plan``), atomically with
    the budget check; a record id the ledger already holds is not charged twice (a resume). For
    a caller that charges before it commits (a window's, a federated job's state).

    Raises:
      BudgetExceededError: the spend does not fit the population's budget.
    """
    ledger.charge_plan(record_id, plan, details)


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


def ensure_charged(ledger: ledger_lib.Ledger, state, details: dict) -> bool:
    """Charges the release committed in ``state`` unless its state says it was charged; returns
    True when the caller must mark it charged (``release_charged``) in its next commit.

    A release marked charged is checked: its record must be in the ledger.

    Raises:
      BudgetExceededError: the spend does not fit (another job took the budget).
      LedgerMismatchError: a charged release's record is not in the ledger (one line).
    """
    if not state.release_charged:
        ledger.charge_plan(state.ledger_record, state.plan, details)
        return True
    check_charged(ledger, state)
    return False


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
    from triehh_beam.job import cas  # local: cas imports google-cloud-storage lazily too

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

