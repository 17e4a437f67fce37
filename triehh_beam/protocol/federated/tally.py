"""One federated round's count (docs/protocol.md §1, "Federated rounds"): ``RoundTally`` classifies
every message that reached the server while the round was open with exactly one of ``KINDS``,
counts the first report of each issued token whose prefix extends the frontier, and keeps the
prefixes with at least theta votes, never a count (``counting.PrefixCounter``).
``EstimateTally`` is the estimate round's, whose exact per-target counts leave only through
``release``, with the noise added once."""

from __future__ import annotations

import collections
from typing import Collection, Dict, FrozenSet, List

from google.protobuf import message

from triehh_beam.proto import federated_pb2
from triehh_beam.protocol.estimates.frequency_estimates import (EstimateKeys, EstimateTargets,
                                                                FrequencyEstimates, release)
from triehh_beam.protocol.federated.messages import FederatedFormatError, VoteReport
from triehh_beam.protocol.items.encoding import ItemEncoder, Units
from triehh_beam.protocol.rounds.counting import PrefixCounter

__all__ = ["ESTIMATE_KINDS", "ESTIMATE_REPORTED", "KINDS", "REPORTED", "EstimateTally", "RoundTally"]

#: A vote round's labels, one per message read: ``voted`` (a selected device's first report, its
#: prefix extending the frontier: counted), ``abstained`` (a first report, an explicit
#: abstention), ``off_frontier`` (a first report whose prefix the frontier does not allow),
#: ``duplicate`` (a token that already reported), ``not_selected`` (a token the round did not
#: issue), ``late`` (a report for a round that has closed), ``unannounced`` (for a round not yet
#: announced), ``other_job`` (a well-formed report of another job), ``malformed`` (not a report
#: of this job's encoding). Their counts are private, for the operator report only.
KINDS = ("voted", "abstained", "off_frontier", "duplicate", "not_selected", "late", "unannounced",
         "other_job", "malformed")
#: The kinds that are a selected device's one report this round (what the report goal counts).
REPORTED = ("voted", "abstained", "off_frontier")
#: The estimate round's labels, and those that are an invited device's one report.
ESTIMATE_KINDS = ("counted", "abstained", "off_target", "duplicate", "not_selected", "late", "unannounced",
                  "other_job", "malformed")
ESTIMATE_REPORTED = ("counted", "abstained", "off_target")


class _Tally:
    """What both tallies share: one label per message, the issued tokens, and the first report of
    each (what the report goal counts). A subclass labels a report of its round (``_label``) and
    names its labels (``_KINDS``)."""

    _KINDS: tuple = ()

    def __init__(self, job_id: str, round_index: int, encoder: ItemEncoder, tokens: FrozenSet[bytes]):
        self.job_id = job_id
        self.round_index = round_index
        self._encoder = encoder
        self._tokens = frozenset(tokens)
        self._seen: set = set()
        self.kinds: collections.Counter = collections.Counter()

    @property
    def reported(self) -> int:
        """Devices that have reported this round (what the report goal counts)."""
        return len(self._seen)

    def add(self, data: bytes) -> str:
        """Classifies (and if it counts, counts) one message body; returns its label."""
        report = _read(data, self.job_id, self._encoder)
        kind = report if isinstance(report, str) else self._label(report)
        self.kinds[kind] += 1
        return kind

    def _first(self, report: VoteReport) -> str:
        """The empty string for the first report of a token this round issued, else its label."""
        if report.token not in self._tokens:
            return "not_selected"
        if report.token in self._seen:
            return "duplicate"
        self._seen.add(report.token)
        return ""

    def _label(self, report: VoteReport) -> str:
        raise NotImplementedError

    def label_counts(self) -> Dict[str, int]:
        """Every label's count (private), zeros included."""
        return {kind: self.kinds.get(kind, 0) for kind in self._KINDS}


class RoundTally(_Tally):
    """The count of round ``round_index`` of job ``job_id``.

    Args:
      job_id: the job's public id, as its announcements carry it.
      round_index: the round; messages for other rounds are labelled late or unannounced.
        A tally after the last round (``tokens`` empty, ``round_index`` = last + 1) labels every
        report of the job late.
      encoder: the job's item encoding (to read prefixes).
      frontier: the prefixes the round announced (length ``round_index - 1``).
      tokens: the tokens the round issued.
      theta: the threshold.
    """

    _KINDS = KINDS

    def __init__(self, job_id: str, round_index: int, encoder: ItemEncoder, frontier: Collection[Units],
                 tokens: FrozenSet[bytes], theta: int):
        super().__init__(job_id, round_index, encoder, tokens)
        self._frontier = frozenset(frontier)
        self._counter = PrefixCounter(theta)
        self._counts: Dict[Units, int] = self._counter.create()

    def _label(self, report: VoteReport) -> str:
        if report.estimate:  # the estimate round comes after every vote round
            return "late" if report.round_index < self.round_index else "unannounced"
        if report.round_index < self.round_index:
            return "late"
        if report.round_index > self.round_index:
            return "unannounced"
        first = self._first(report)
        if first:
            return first
        prefix = report.prefix
        if prefix is None:
            return "abstained"
        if not _extends(prefix, self._frontier, self.round_index):
            return "off_frontier"
        self._counter.add(self._counts, tuple(prefix))
        return "voted"

    def kept(self) -> List[Units]:
        """The prefixes with at least theta votes, sorted; no counts."""
        return self._counter.extract_kept(self._counts)


class EstimateTally(_Tally):
    """The count of the estimate round ``round_index`` of job ``job_id``: per target, the
    number of invited devices whose first report names it (private until ``release``).

    Args:
      job_id, round_index, encoder: as ``RoundTally``'s.
      targets: the announced targets.
      tokens: the tokens the estimate round issued (one per enrolled device).
    """

    _KINDS = ESTIMATE_KINDS

    def __init__(self, job_id: str, round_index: int, encoder: ItemEncoder, targets: EstimateTargets,
                 tokens: FrozenSet[bytes]):
        super().__init__(job_id, round_index, encoder, tokens)
        self._targets = targets
        self._counts = [0] * len(targets)

    def _label(self, report: VoteReport) -> str:
        if not report.estimate or report.round_index < self.round_index:
            # A vote report (every vote round has closed), or an earlier estimate round's.
            return "late" if report.estimate or report.round_index < self.round_index else "unannounced"
        if report.round_index > self.round_index:
            return "unannounced"
        first = self._first(report)
        if first:
            return first
        if report.prefix is None:
            return "abstained"
        i = self._targets.index_of(report.prefix)
        if i < 0 or self._targets.sequences[i] != tuple(report.prefix):
            return "off_target"
        self._counts[i] += 1
        return "counted"

    def release(self, epsilon: float, keys: EstimateKeys) -> FrequencyEstimates:
        """The released estimates: each target's count plus its keyed noise (the central
        estimate's ``release``, the same keys: equal counts give equal estimates)."""
        return release(self._counts, self._targets, epsilon, keys)


def _read(data: bytes, job_id: str, encoder: ItemEncoder):
    """The report in ``data``, or the label of a message that is not one of this job's."""
    # The job first (a well-formed report of a job with another encoding is another job's,
    # not malformed), then the whole report against this job's encoding.
    header = federated_pb2.VoteReport()
    try:
        header.ParseFromString(data)
    except message.DecodeError:
        return "malformed"
    if not header.job_id:
        return "malformed"  # every report names its job
    if header.job_id != job_id:
        return "other_job"
    try:
        return VoteReport.from_bytes(data, encoder)
    except FederatedFormatError:
        return "malformed"


def _extends(prefix: Units, frontier: FrozenSet[Units], round_index: int) -> bool:
    return len(prefix) == round_index and tuple(prefix[: round_index - 1]) in frontier
