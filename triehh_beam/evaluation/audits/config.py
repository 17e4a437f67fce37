"""What ``triehh audit`` audits (``AuditConfig``), checked before anything runs, and the events
its verdict can read."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Optional

from triehh_beam.protocol.protocols import Protocol

__all__ = ["AT_LEAST", "AuditConfig", "AuditError", "DIFFERS", "EVENTS", "NOTHING", "PUBLISHED"]

PUBLISHED, AT_LEAST, DIFFERS, NOTHING = "published", "estimate-at-least", "differs", "nothing-published"
EVENTS = (PUBLISHED, AT_LEAST, DIFFERS, NOTHING)


class AuditError(ValueError):
    """The audit cannot run as asked; the message says why."""


@dataclasses.dataclass(frozen=True)
class AuditConfig:
    """What to audit.

    Attributes:
      protocol, epsilon, delta, max_length, estimate_frequencies: the job audited, as
        ``discover``'s flags.
      runs: releases (pairs of releases with ``releases=2``) on D and on D', each.
      target: the item the extra user of D' holds; None: a one-unit item no user of D holds
        (one release), the most held item of D (two releases).
      target_holders: F: D gets F more users (``triehh-audit-holder-<i>``) holding only the
        target, so that D' has F + 1 holders (0: D as given).
      event: ``published``, ``estimate-at-least`` (with ``at_least``) or ``differs`` (two
        releases); None: ``differs`` with two releases, else ``published``.
      at_least: t of the event "the target's published estimate (or count) is at least t".
      releases: 1, or 2 for the reuse audit (the same paths released twice).
      window: audit ``discover --window``: ``runs`` windows of one replay per population (one
        Beam job each), instead of ``runs`` batch jobs.
      seed: the public seed of the audit's seed file (the secret seed of every release).
      confidence: of the verdict; violation: the excess probability whose runs are reported.
      selection_share: ``--protocol partition-selection``'s share of epsilon for the selection
        (None: its default); refused with another protocol.
      theta, batch_size: TrieHH's fixed theta and m (both or neither), run with
        ``--allow-no-guarantee``; the claim tested is Theorem 1's for them at D's n over the rounds
        the event observes (``nothing-published``: round 1, L = 1; else max_length).

    Raises:
      AuditError: a value out of range or a combination the audit cannot run.
    """

    protocol: Protocol = Protocol.TRIEHH
    epsilon: float = 4.0
    delta: float = 1e-3
    max_length: int = 3
    estimate_frequencies: Optional[float] = None
    runs: int = 20
    target: Optional[str] = None
    target_holders: int = 0
    event: Optional[str] = None
    at_least: Optional[float] = None
    releases: int = 1
    window: bool = False
    seed: int = 0
    confidence: float = 0.95
    violation: float = 0.1
    selection_share: Optional[float] = None
    theta: Optional[int] = None
    batch_size: Optional[int] = None

    def __post_init__(self):
        try:
            object.__setattr__(self, "protocol", Protocol.parse(self.protocol))
        except ValueError as e:
            raise AuditError(str(e)) from None
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1:
            raise AuditError(f"runs must be an integer >= 1, got {self.runs!r}")
        if (isinstance(self.target_holders, bool) or not isinstance(self.target_holders, int)
                or self.target_holders < 0):
            raise AuditError(f"target_holders must be an integer >= 0, got {self.target_holders!r}")
        if self.target_holders and self.releases == 2:
            raise AuditError("--target-holders gives D holders of the target of one release: use it with --releases 1")
        if self.releases not in (1, 2):
            raise AuditError(f"releases must be 1 or 2, got {self.releases!r}")
        if self.event is not None and self.event not in EVENTS:
            raise AuditError(f"event must be one of {', '.join(EVENTS)}, got {self.event!r}")
        if (self.resolved_event == DIFFERS) != (self.releases == 2):
            raise AuditError("the event 'differs' compares two releases: use it with --releases 2, and only then")
        if (self.resolved_event == AT_LEAST) != (self.at_least is not None):
            raise AuditError("--at-least T goes with the event estimate-at-least, and it needs one")
        if self.resolved_event == AT_LEAST and not (self.estimate_frequencies or not self.protocol.grows_trie):
            raise AuditError("estimate-at-least needs published numbers: --estimate-frequencies, or "
                             "--protocol sample-threshold (its counts)")
        if self.selection_share is not None and not self.protocol.selects_partitions:
            raise AuditError("--selection-share is --protocol partition-selection's")
        if self.window and not self.protocol.grows_trie:
            raise AuditError("--window runs a trie per window: use --protocol triehh or triehh++")
        if not 0 < self.confidence < 1:
            raise AuditError(f"confidence must be in (0, 1), got {self.confidence}")
        if not 0 < self.violation <= 1:
            raise AuditError(f"violation must be in (0, 1], got {self.violation}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise AuditError(f"seed must be an integer >= 0, got {self.seed!r}")
        if (self.theta is None) != (self.batch_size is None):
            raise AuditError("--theta and --batch-size fix TrieHH's plan together: give both or neither")
        if self.theta is not None and (self.protocol is not Protocol.TRIEHH or self.window):
            raise AuditError("--theta and --batch-size are TrieHH's, batch releases only: use --protocol triehh "
                             "without --window")

    @property
    def resolved_event(self) -> str:
        if self.event is not None:
            return self.event
        return DIFFERS if self.releases == 2 else PUBLISHED

    @property
    def secret_seed(self) -> bytes:
        """The audit's seed file: one for every release, as one operator's jobs share one."""
        return hashlib.blake2b(f"triehh-beam/audit/{self.seed}".encode(), digest_size=32).digest()
