"""The audit's hypothesis test: can an event's counts on two neighbouring populations refute an
(epsilon, delta) claim? (epsilon, delta)-DP promises ``P[E | A] <= e^epsilon P[E | B] + delta``
for every event E and neighbours A, B, either way round; the claim is refuted in one direction
when a Clopper-Pearson lower bound on ``P[E | A]`` exceeds ``e^epsilon`` times an upper bound on
``P[E | B]``, plus delta. Both directions are tested, so each direction gets half of ``1 -
confidence`` and each of its two bounds half of that (union bound): a claim that holds is
refuted with probability at most ``1 - confidence``. Nothing here runs a pipeline.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

from triehh_beam.protocol import search

__all__ = ["ClaimTest", "Direction", "runs_to_refute", "test_claim"]


def _lower(successes: int, trials: int, level: float) -> float:
    """One-sided Clopper-Pearson lower bound at ``level`` (0 when there is no success)."""
    from scipy import stats  # local: the command line imports this module to list its choices

    return 0.0 if successes == 0 else float(stats.beta.ppf(1 - level, successes, trials - successes + 1))


def _upper(successes: int, trials: int, level: float) -> float:
    """One-sided Clopper-Pearson upper bound at ``level`` (1 when every trial succeeded)."""
    from scipy import stats

    return 1.0 if successes == trials else float(stats.beta.ppf(level, successes + 1, trials - successes))


def _check(successes: int, trials: int) -> None:
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")


@dataclasses.dataclass(frozen=True)
class Direction:
    """One direction of the test: is ``P[E | numerator] <= e^epsilon P[E | denominator] + delta``
    refuted?

    Attributes:
      numerator, denominator: the populations' names (``D'`` and ``D``, or the reverse).
      hits_numerator, hits_denominator, runs_numerator, runs_denominator: the counts.
      p_numerator_lower, p_denominator_upper: the one-sided bounds, each at ``bound_level``.
      allowed: ``e^epsilon p_denominator_upper + delta``, the most the claim allows the numerator.
      refuted: ``p_numerator_lower > allowed``.
    """

    numerator: str
    denominator: str
    hits_numerator: int
    runs_numerator: int
    hits_denominator: int
    runs_denominator: int
    bound_level: float
    p_numerator_lower: float
    p_denominator_upper: float
    allowed: float
    refuted: bool


@dataclasses.dataclass(frozen=True)
class ClaimTest:
    """Both directions of the test of one (epsilon, delta) claim on one event."""

    epsilon: float
    delta: float
    confidence: float
    directions: Tuple[Direction, Direction]

    @property
    def violated(self) -> bool:
        """The claim is refuted, at ``confidence``, in at least one direction."""
        return any(d.refuted for d in self.directions)


def _direction(names: Tuple[str, str], hits: Tuple[int, int], runs: Tuple[int, int], epsilon: float,
               delta: float, level: float) -> Direction:
    lower, upper = _lower(hits[0], runs[0], level), _upper(hits[1], runs[1], level)
    allowed = math.exp(epsilon) * upper + delta
    return Direction(names[0], names[1], hits[0], runs[0], hits[1], runs[1], level, lower, upper, allowed,
                     lower > allowed)


def test_claim(hits_neighbour: int, runs_neighbour: int, hits_base: int, runs_base: int, epsilon: float,
               delta: float, confidence: float = 0.95) -> ClaimTest:
    """Tests an (epsilon, delta) claim on one event, both ways round.

    Args:
      hits_neighbour, runs_neighbour: runs on D' (D plus one user) in which the event happened,
        and runs on D'.
      hits_base, runs_base: the same on D.
      epsilon, delta: the claim.
      confidence: the probability that a true claim is not refuted (default 95%).

    Raises:
      ValueError: counts out of range, or confidence outside (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    _check(hits_neighbour, runs_neighbour)
    _check(hits_base, runs_base)
    level = 1 - (1 - confidence) / 4  # two directions, two bounds each
    forward = _direction(("D'", "D"), (hits_neighbour, hits_base), (runs_neighbour, runs_base), epsilon, delta,
                         level)
    backward = _direction(("D", "D'"), (hits_base, hits_neighbour), (runs_base, runs_neighbour), epsilon, delta,
                          level)
    return ClaimTest(epsilon, delta, confidence, (forward, backward))


test_claim.__test__ = False  # a library function, not a pytest test


def runs_to_refute(p_denominator: float, excess: float, epsilon: float, delta: float,
                   confidence: float = 0.95, most: int = 10_000_000) -> Optional[int]:
    """How many runs on each population would refute a violation of size ``excess``.

    The violation: the event's probability is ``p_denominator`` on one population and
    ``e^epsilon p_denominator + delta + excess`` on the other. The answer is the smallest number
    of runs per population at which the expected counts (rounded) refute the claim in that
    direction, at ``confidence`` as ``test_claim`` splits it: about half the time fewer would do,
    about half the time more are needed. None when the violation is impossible (its
    probability above 1) or needs more than ``most`` runs.
    """
    p_numerator = math.exp(epsilon) * p_denominator + delta + excess
    if p_numerator > 1 or excess <= 0:
        return None
    level = 1 - (1 - confidence) / 4

    def refutes(runs: int) -> bool:
        hits_numerator = min(runs, int(round(p_numerator * runs)))
        hits_denominator = min(runs, int(round(p_denominator * runs)))
        return (_lower(hits_numerator, runs, level)
                > math.exp(epsilon) * _upper(hits_denominator, runs, level) + delta)

    # Refutation gets easier with more runs (monotone); one run never refutes.
    return search.first_true_doubling(refutes, 1, 2, most)
