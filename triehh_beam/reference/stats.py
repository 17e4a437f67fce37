"""Interval estimates for evaluation results: a t-interval of the mean of per-run metrics
(``mean_ci``), the Wilson score interval of a discovery rate (``wilson_interval``) and the exact
Clopper-Pearson interval of a binomial proportion (``clopper_pearson``). The audit's test of an
(epsilon, delta) claim is ``audit_stats``."""

from __future__ import annotations

import math
from typing import Sequence, Tuple

import numpy as np
from scipy import stats

__all__ = ["clopper_pearson", "mean_ci", "wilson_interval"]


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
