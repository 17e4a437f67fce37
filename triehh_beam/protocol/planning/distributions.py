"""The hypergeometric and binomial tails Proposition 1 needs (``utility``), without importing
``scipy.stats``, which takes 0.5-0.9 s to import and is otherwise not needed by a discovery: the
same Boost-based ufuncs ``scipy.stats.hypergeom`` and ``scipy.stats.binom`` evaluate (from
``scipy.special``, which the sampling code imports anyway), with ``scipy.stats``'s handling of
arguments outside the support, so every value is bit for bit what ``scipy.stats`` gives
(tests/protocol/planning/test_distributions.py checks it on a grid). Where a SciPy release no longer has
those ufuncs, ``scipy.stats`` itself is used.
"""

from __future__ import annotations

import numpy as np

__all__ = ["binom_sf", "hypergeom_pmf", "hypergeom_sf"]

try:  # SciPy >= 1.10: what scipy.stats.hypergeom / binom call for these methods
    from scipy.special._ufuncs import _binom_sf, _hypergeom_pmf, _hypergeom_sf
except ImportError:  # pragma: no cover - older or newer SciPy without them
    _binom_sf = _hypergeom_pmf = _hypergeom_sf = None


def hypergeom_sf(k: int, population: int, successes: int, draws: int) -> float:
    """``P(X > k)`` for X ~ Hypergeometric(population, successes, draws): scipy.stats's
    ``hypergeom.sf(k, population, successes, draws)`` (integers, 0 <= successes, draws <= population)."""
    if _hypergeom_sf is None:  # pragma: no cover
        from scipy.stats import hypergeom

        return float(hypergeom.sf(k, population, successes, draws))
    low, high = max(0, draws - (population - successes)), min(successes, draws)
    if k < low:
        return 1.0
    if k >= high:
        return 0.0
    return float(np.clip(_hypergeom_sf(k, successes, draws, population), 0.0, 1.0))  # as scipy.stats


def hypergeom_pmf(k: np.ndarray, population: int, successes: int, draws: int) -> np.ndarray:
    """``P(X = k)`` elementwise: scipy.stats's ``hypergeom.pmf(k, population, successes, draws)``
    for integer ``k`` (0 outside the support)."""
    k = np.asarray(k)
    if _hypergeom_pmf is None:  # pragma: no cover
        from scipy.stats import hypergeom

        return hypergeom.pmf(k, population, successes, draws)
    low, high = max(0, draws - (population - successes)), min(successes, draws)
    inside = (k >= low) & (k <= high)
    out = np.zeros(k.shape, dtype=np.float64)
    out[inside] = np.clip(_hypergeom_pmf(k[inside], successes, draws, population), 0.0, 1.0)
    return out


def binom_sf(k: int, trials: np.ndarray, p: float) -> np.ndarray:
    """``P(Y > k)`` for Y ~ Binomial(trials, p), elementwise over integer ``trials`` >= 0 and
    0 < p <= 1: scipy.stats's ``binom.sf(k, trials, p)``."""
    trials = np.asarray(trials)
    if _binom_sf is None:  # pragma: no cover
        from scipy.stats import binom

        return binom.sf(k, trials, p)
    out = np.zeros(trials.shape, dtype=np.float64)
    if k < 0:
        out[...] = 1.0
        return out
    inside = k < trials
    out[inside] = np.clip(_binom_sf(np.floor(k), trials[inside], p), 0.0, 1.0)
    return out
