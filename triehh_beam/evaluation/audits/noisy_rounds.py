"""An empirical audit of one noisy prefix round's release (docs/protocol.md §8), the mechanism
itself rather than a ``triehh discover`` job (which does not run the protocol yet): D has
``count`` users voting for a target candidate, D' one more; every run is a fresh release (keys
derived from a fresh seed) of the round on each, and the event is "the target released with a
noisy count of at least ``at_least``". ``audit_stats.test_claim`` then tests the round's claim,
(eps_r, 0)-DP, on the two hit counts, as ``triehh audit`` tests a job's. ``sampling_plan`` plants
a bug: the noise drawn from another plan (say, eps_r doubled: the scale halved) while the claim
stays the plan's. A measurement on synthetic votes, not a release."""

from __future__ import annotations

from typing import Optional

from triehh_beam.protocol.central.noisy_release import NoisyRoundKeys, candidate_units, release_round
from triehh_beam.protocol.central.noisy_rounds import NoisyRoundsPlan
from triehh_beam.reference.audit_stats import ClaimTest, test_claim

__all__ = ["audit_round_release"]

_FRONTIER = (("tri",), ("hea",))
_TARGET = ("tri", "e")


def audit_round_release(plan: NoisyRoundsPlan, count: int, at_least: int, runs: int,
                        sampling_plan: Optional[NoisyRoundsPlan] = None, confidence: float = 0.95) -> ClaimTest:
    """Tests the round's (eps_r, 0) claim on D (``count`` votes for the target) and D' (one more).

    Args:
      plan: the release's plan, whose ``round_epsilon`` is the claim.
      count: the target's votes on D (>= 0).
      at_least: the event's noisy count.
      runs: releases per population, each with fresh keys.
      sampling_plan: the plan the noise is really drawn from (None: ``plan``; a planted bug).

    Raises:
      ValueError: count < 0, runs < 1.
    """
    if count < 0 or runs < 1:
        raise ValueError(f"need count >= 0 and runs >= 1, got {count} and {runs}")
    drawn = sampling_plan or plan
    units = candidate_units("aeirt", 2)
    hits = {}
    for name, votes in (("D", count), ("D'", count + 1)):
        hits[name] = 0
        for run in range(runs):
            keys = NoisyRoundKeys.derive(run.to_bytes(32, "big"), b"noisy-rounds audit " + name.encode())
            tally = {_TARGET: votes} if votes else {}
            released = release_round(tally, _FRONTIER, units, 2, drawn, keys)
            hits[name] += released.get(_TARGET, -1) >= at_least
    return test_claim(hits["D'"], runs, hits["D"], runs, plan.round_epsilon, 0.0, confidence)
