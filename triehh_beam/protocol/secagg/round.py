"""``SecureRound``: the server's side of one round's secure aggregation over the wire messages.
It splits the round's selected devices (ordered by their fresh tokens, which no device chooses)
into cohorts, issues each device's setup, labels every report it is given with exactly one of
``KINDS``, and at each phase's close feeds the reports to each live cohort's ``SecAggCohort`` and
issues the next phase's requests; a cohort that falls below its threshold is dropped whole and
counted. The sum over the unmasked cohorts is the round's count vector; only the kept
candidates (at least theta) leave it, never a count."""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from triehh_beam.protocol.federated.messages import FederatedFormatError
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.secagg.cohorts import CohortPolicy
from triehh_beam.protocol.secagg.crypto import CohortContext
from triehh_beam.protocol.secagg.messages import (Inbox, Keys, Masked, Roster, SecAggReport,
                                                  SecAggRequest, Setup, Shares, Survivors, Unmask)
from triehh_beam.protocol.secagg.server import CohortFailedError, Phase, SecAggCohort
from triehh_beam.protocol.secagg.vectors import CandidateSlots

__all__ = ["KINDS", "SecureRound"]

#: One label per report: ``counted`` (a device's first report of the phase being collected),
#: ``duplicate`` (a second report of one device for one exchange, whenever it comes),
#: ``out_of_phase`` (a first report of another exchange: too late or too early),
#: ``cohort_dropped`` (its cohort already failed), ``not_selected`` (a token the round did not
#: issue), ``late`` and ``unannounced`` (another round), ``other_job``, ``malformed``.
KINDS = ("counted", "duplicate", "out_of_phase", "cohort_dropped", "not_selected", "late", "unannounced",
         "other_job", "malformed")
_REPORT = {Phase.KEYS: Keys, Phase.SHARES: Shares, Phase.MASKED: Masked, Phase.UNMASK: Unmask}


@dataclasses.dataclass
class _Cohort:
    context: CohortContext
    tokens: Tuple[bytes, ...]  # index i + 1 is tokens[i]
    server: SecAggCohort
    failure: Optional[CohortFailedError] = None
    total: Optional[np.ndarray] = None


class SecureRound:
    """One round's secure aggregation, server side.

    Args:
      job_id, round_index: the round's.
      tokens: the selected devices' invitation tokens.
      policy: the cohorts' sizes and thresholds.
      slots: the round's vote slots.
      alphabet: the unit bytes the setup announces (empty in the estimate round).

    Raises:
      TooFewDevicesError: fewer selected devices than one cohort's minimum.
    """

    def __init__(self, job_id: str, round_index: int, tokens: Sequence[bytes], policy: CohortPolicy,
                 slots: CandidateSlots, alphabet: Tuple[bytes, ...] = ()):
        self.job_id, self.round_index, self.slots, self.alphabet = job_id, round_index, slots, tuple(alphabet)
        self.policy = policy
        self.cohorts: List[_Cohort] = []
        self._where: Dict[bytes, Tuple[int, int]] = {}
        for c, members in enumerate(policy.split(sorted(tokens))):
            context = CohortContext(job_id, round_index, c)
            server = SecAggCohort(context, len(members), policy.threshold(len(members)), slots.length)
            self.cohorts.append(_Cohort(context, members, server))
            self._where.update({t: (c, i + 1) for i, t in enumerate(members)})
        self.phase: Optional[Phase] = Phase.KEYS  # the phase whose reports are collected; None when done
        self._reports: Dict[bytes, object] = {}  # the phase being collected: token -> its report's payload
        self._seen: set = set()  # (token, report type) of every well-formed report of the round
        self.kinds: collections.Counter = collections.Counter()

    def _request(self, token: bytes, phase) -> Tuple[bytes, bytes]:
        return token, SecAggRequest(self.job_id, self.round_index, token, phase).to_bytes()

    def setups(self, invitations: Mapping[bytes, bytes]) -> List[Tuple[bytes, bytes]]:
        """(token, request bytes): every selected device's setup, carrying its serialized
        invitation (``invitations``: token -> bytes)."""
        out = []
        for c, cohort in enumerate(self.cohorts):
            for i, token in enumerate(cohort.tokens):
                out.append(self._request(token, Setup(c, i + 1, len(cohort.tokens), cohort.server.threshold,
                                                      self.alphabet, self.slots.length, invitations[token])))
        return out

    def add(self, data: bytes) -> str:
        """Labels one message that reached the server while the phase was open (``KINDS``)."""
        label = self._label(data)
        self.kinds[label] += 1
        return label

    def _label(self, data: bytes) -> str:
        try:
            report = SecAggReport.from_bytes(data)
        except FederatedFormatError:
            return "malformed"
        if report.job_id != self.job_id:
            return "other_job"
        if report.round_index != self.round_index:
            return "late" if report.round_index < self.round_index else "unannounced"
        where = self._where.get(report.token)
        if where is None:
            return "not_selected"
        seen = (report.token, type(report.phase))
        if seen in self._seen:
            return "duplicate"
        self._seen.add(seen)
        if self.phase is None or not isinstance(report.phase, _REPORT[self.phase]):
            return "out_of_phase"
        if self.cohorts[where[0]].failure is not None:
            return "cohort_dropped"
        self._reports[report.token] = report.phase
        return "counted"

    def close_phase(self) -> List[Tuple[bytes, bytes]]:
        """Closes the phase being collected: each live cohort takes what its devices sent (a
        cohort below its threshold fails, whole), and the next phase's requests are returned as
        (token, request bytes); none after the unmasking phase, which unmasks the sums."""
        phase, reports = self.phase, self._reports
        self._reports = {}
        self.phase = None if phase is Phase.UNMASK else Phase(phase + 1)
        requests = []
        for cohort in self.cohorts:
            if cohort.failure is not None:
                continue
            got = {i + 1: reports[t] for i, t in enumerate(cohort.tokens) if t in reports}
            try:
                requests.extend(self._step(cohort, phase, got))
            except CohortFailedError as failure:
                cohort.failure = failure
        return requests

    def _step(self, cohort: _Cohort, phase: Phase, got: dict) -> List[Tuple[bytes, bytes]]:
        server, tokens = cohort.server, cohort.tokens
        if phase is Phase.KEYS:
            roster = server.keys({i: (r.cipher_public_key, r.mask_public_key) for i, r in got.items()})
            message = Roster(tuple((i, c, m) for i, (c, m) in roster.items()))
            return [self._request(tokens[i - 1], message) for i in roster]
        if phase is Phase.SHARES:
            inbox = server.shares({i: dict(r.shares) for i, r in got.items()})
            return [self._request(tokens[i - 1], Inbox(tuple(sent.items()))) for i, sent in inbox.items()]
        if phase is Phase.MASKED:
            survivors = server.masked({i: r.values for i, r in got.items()})
            return [self._request(tokens[i - 1], Survivors(survivors)) for i in survivors]
        cohort.total = server.unmask({i: {o: (k, s) for o, k, s in r.shares} for i, r in got.items()})
        return []

    def total(self) -> np.ndarray:
        """The count vector: the sum over the cohorts that were unmasked (private).

        Raises:
          RuntimeError: the unmasking phase has not closed.
        """
        if self.phase is not None:
            raise RuntimeError("the round's sums are known only once its unmasking phase has closed")
        total = np.zeros(self.slots.length, dtype=np.int64)
        for cohort in self.cohorts:
            if cohort.total is not None:
                total += cohort.total.astype(np.int64)
        return total

    def kept(self, theta: int) -> List[Units]:
        """The candidates with at least ``theta`` votes over the unmasked cohorts, sorted; no
        counts (``other`` and ``abstain`` are never candidates)."""
        return sorted(c for c, n in self.slots.counts(self.total()).items() if n >= theta)

    def summary(self) -> dict:
        """What the operator report says of the round's cohorts (private: sizes are counts)."""
        failed = collections.Counter(c.failure.phase.name.lower() for c in self.cohorts if c.failure)
        lost = sum(len(c.tokens) for c in self.cohorts if c.failure)
        return {"cohorts": len(self.cohorts), "unmasked": sum(c.total is not None for c in self.cohorts),
                "dropped_by_phase": dict(sorted(failed.items())), "devices_in_dropped_cohorts": lost,
                "devices_summed": sum(len(c.server.survivors) for c in self.cohorts if c.total is not None),
                "labels": {k: self.kinds.get(k, 0) for k in KINDS}}
