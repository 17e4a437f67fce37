"""One cohort's secure aggregation run in memory, devices and server together, with the devices
that drop at each phase given: what tests, benchmarks and the simulated fleet's offline checks
use to drive ``SecAggDevice`` and ``SecAggCohort`` through every phase without a transport."""

from __future__ import annotations

import dataclasses
from typing import Callable, Collection, Dict, Mapping, Optional, Sequence

import numpy as np

from triehh_beam.protocol.secagg.crypto import CohortContext
from triehh_beam.protocol.secagg.device import SecAggDevice
from triehh_beam.protocol.secagg.server import CohortFailedError, Phase, SecAggCohort

__all__ = ["CohortOutcome", "run_cohort"]


@dataclasses.dataclass(frozen=True)
class CohortOutcome:
    """What a cohort's run gave the server.

    Attributes:
      total: the survivors' sum (uint32), or None when the cohort failed.
      survivors: the devices whose inputs are in ``total`` (empty on failure).
      failure: the ``CohortFailedError`` that dropped the cohort, or None.
    """

    total: Optional[np.ndarray]
    survivors: tuple
    failure: Optional[CohortFailedError] = None


def run_cohort(context: CohortContext, vectors: Sequence[np.ndarray], threshold: int,
               random_bytes: Callable[[int], bytes],
               dropped: Optional[Mapping[Phase, Collection[int]]] = None) -> CohortOutcome:
    """Runs the cohort of ``len(vectors)`` devices (device i + 1 holds ``vectors[i]``); the
    devices in ``dropped[phase]`` send nothing from ``phase`` on (indices from 1).

    Returns the outcome; a cohort below its threshold at some phase has ``failure`` set.
    """
    dropped = dropped or {}
    size = len(vectors)
    devices = {i + 1: SecAggDevice(context, i + 1, size, threshold, v, random_bytes) for i, v in enumerate(vectors)}
    server = SecAggCohort(context, size, threshold, len(vectors[0]))
    gone: set = set()

    def alive(phase: Phase) -> Dict[int, SecAggDevice]:
        gone.update(dropped.get(phase, ()))
        return {i: d for i, d in devices.items() if i not in gone}

    try:
        roster = server.keys({i: d.advertise() for i, d in alive(Phase.KEYS).items()})
        sent = {i: d.share(roster) for i, d in alive(Phase.SHARES).items() if i in roster}
        inbox = server.shares(sent)
        inputs = {i: d.mask(inbox[i]) for i, d in alive(Phase.MASKED).items() if i in inbox}
        survivors = server.masked(inputs)
        responses = {i: d.unmask(survivors) for i, d in alive(Phase.UNMASK).items() if i in survivors}
        total = server.unmask(responses)
    except CohortFailedError as failure:
        return CohortOutcome(None, (), failure)
    return CohortOutcome(total, survivors)
