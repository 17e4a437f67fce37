"""Interval estimates for evaluation results: a t-interval of the mean of per-run metrics
(``mean_ci``), the Wilson score interval of a discovery rate (``wilson_interval``), the exact
Clopper-Pearson interval of a binomial proportion (``clopper_pearson``), and from two of them
the lower confidence bound on epsilon that an event's frequencies on neighbouring populations
imply (``epsilon_lower_bound``: (epsilon, delta)-DP requires ``p1 <= e^epsilon p0 + delta``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence, Tuple

import numpy as np
from scipy import stats

__all__ = ["EpsilonBound", "clopper_pearson", "epsilon_lower_bound", "mean_ci", "wilson_interval"]


def mean_ci(values: Sequence[float], confidence: float = 0.95, bounds=(0.0, 1.0)) -> dict:
    """Mean, sample sd and a t-interval of the mean (clipped to ``bounds``; None for one value).

    The t-interval assumes the runs are independent (they are: each has its own seed) and the
    mean roughly normal; for a metric stuck at 0 or 1 it degenerates to a point.
    """
    x = np.asarray(list(values), dtype=float)
    if len(x) == 0:
        return {"mean": None, "sd": None, "ci": None, "n": 0}
    mean = float(x.mean())
    if len(x) == 1:
        return {"mean": mean, "sd": None, "ci": None, "n": 1}
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf((1 + confidence) / 2, len(x) - 1)) * sd / math.sqrt(len(x))
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(bounds[0], lo), min(bounds[1], hi)
    return {"mean": mean, "sd": sd, "ci": [lo, hi], "n": int(len(x))}


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> Tuple[float, float]:
    """The Wilson score interval of a binomial proportion (good at 0 and 1, unlike Wald's)."""
    if trials <= 0:
        return (0.0, 1.0)
    z = float(stats.norm.ppf((1 + confidence) / 2))
    phat = successes / trials
    denominator = 1 + z * z / trials
    centre = (phat + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(phat * (1 - phat) / trials + z * z / (4 * trials * trials)) / denominator
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= trials else min(1.0, centre + half)
    return (lo, hi)


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> Tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a binomial proportion.

    Each end is a one-sided bound at level ``1 - (1 - confidence) / 2`` (97.5% for 95%): the
    lower end is the ``(1 - confidence) / 2`` quantile of Beta(k, n - k + 1) (0 when k = 0), the
    upper end the ``1 - (1 - confidence) / 2`` quantile of Beta(k + 1, n - k) (1 when k = n).
    It covers the true proportion with probability at least ``confidence`` for every n and p.

    Raises:
      ValueError: trials < 1, successes outside [0, trials], or confidence outside (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    tail = (1 - confidence) / 2
    lo = 0.0 if successes == 0 else float(stats.beta.ppf(tail, successes, trials - successes + 1))
    hi = 1.0 if successes == trials else float(stats.beta.ppf(1 - tail, successes + 1, trials - successes))
    return lo, hi


@dataclasses.dataclass(frozen=True)
class EpsilonBound:
    """A lower confidence bound on epsilon from one event (``epsilon_lower_bound``).

    Attributes:
      epsilon: ``max(0, ln((p_numerator_lower - delta) / p_denominator_upper))``; 0 when the
        lower bound on the numerator's probability is not above delta.
      p_numerator_lower: the Clopper-Pearson lower end for the numerator population.
      p_denominator_upper: the Clopper-Pearson upper end for the denominator population.
    """

    epsilon: float
    p_numerator_lower: float
    p_denominator_upper: float


def epsilon_lower_bound(numerator: int, numerator_trials: int, denominator: int, denominator_trials: int,
                        delta: float, confidence: float = 0.95) -> EpsilonBound:
    """The epsilon that an event's frequencies on two neighbouring populations prove, at least.

    An (epsilon, delta)-DP mechanism gives every event S ``P[S | D] <= e^epsilon P[S | D'] +
    delta`` for neighbours D, D' (either way round), so ``epsilon >= ln((p - delta) / p')``.
    With ``p`` bounded below and ``p'`` above by Clopper-Pearson (each one-sided at level
    ``1 - (1 - confidence) / 2``, the ends of the two-sided intervals), both bounds hold
    together with probability at least ``confidence`` (union bound), and so does the result.

    Args:
      numerator, numerator_trials: runs on D in which S happened, and runs on D.
      denominator, denominator_trials: the same on D'.
      delta: the delta of the guarantee under test.
      confidence: the joint confidence (default 95%).
    """
    lo = clopper_pearson(numerator, numerator_trials, confidence)[0]
    hi = clopper_pearson(denominator, denominator_trials, confidence)[1]
    epsilon = math.log((lo - delta) / hi) if lo > delta else 0.0
    return EpsilonBound(max(0.0, epsilon), lo, hi)
