"""95% intervals for what a released count estimates, the weighted users ``f = sum over users of
p_u`` (docs/protocol.md §2 and §5 derive them): ``noisy_count_intervals`` for a count plus
two-sided geometric noise (``--estimate-frequencies``), ``sampled_count_interval`` for a count
thresholded after a Bernoulli sample (whole items). Each inverts the tails of Poisson(f), which
bounds the sum of independent Bernoulli(p_u) whatever the private p_u are."""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import numpy as np

__all__ = ["LEVEL", "noisy_count_intervals", "sampled_count_interval"]

#: The confidence level of the published intervals.
LEVEL = 0.95
#: Noise values beyond +-K are left out of the sums: their mass (at most this on each side) is
#: counted on the side that widens the interval.
_NEGLECTED_NOISE = 1e-9
#: Poisson values beyond mean +- (10 sqrt(mean) + 40) are left out of the sums the same way.
_POISSON_SPREAD, _POISSON_MARGIN = 10.0, 40.0
#: Terms summed per estimate at most; beyond, the union bound (wider, and as certain).
_MAX_TERMS = 1 << 15
#: The union bound's share of the miss probability given to the noise.
_NOISE_SHARE = 0.5
#: The bisection stops when every bracket is this narrow (then rounded outward to integers).
_PRECISION = 1e-3
#: Matrix entries evaluated at once (estimates x terms).
_CHUNK = 1 << 20


def _check_level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"the level must be in (0, 1), got {level!r}")
    return (1 - level) / 2


def _poisson_cdf(k: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``P(Poisson(mean) <= k)``, 0 for k < 0."""
    from scipy import special  # local: scipy is slow to import, and only publishing needs it

    return np.where(k >= 0, special.pdtr(np.maximum(k, 0), mean), 0.0)


def _poisson_sf(k: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``P(Poisson(mean) >= k)``, 1 for k <= 0."""
    from scipy import special

    return np.where(k >= 1, special.pdtrc(np.maximum(k - 1, 0), mean), 1.0)


def _bisect(below, low: np.ndarray, high: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per element, a bracket ``[low, high]`` no wider than ``_PRECISION`` of the boundary of the
    monotone predicate ``below(mean)`` (True below the boundary, False above), given True at
    ``low`` and False at ``high``."""
    while np.any(high - low > _PRECISION):
        middle = (low + high) / 2
        under = below(middle)
        low, high = np.where(under, middle, low), np.where(under, high, middle)
    return low, high


def _expand(below, start: np.ndarray) -> np.ndarray:
    """Per element, a mean at or above ``start`` where ``below`` is False (doubling)."""
    high = start.copy()
    while True:  # ends: a Poisson tail vanishes as its mean grows
        still = below(high)
        if not still.any():
            return high
        high = np.where(still, 2 * high + 1, high)


def _boundary(below, low_guess: np.ndarray, high_guess: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per element, a bracket no wider than ``_PRECISION`` of the boundary of ``below`` (True
    below it) at or above 0, from guesses on either side (0 where the low guess is not below)."""
    low = np.where(below(low_guess), low_guess, 0.0)
    return _bisect(below, low, _expand(below, np.maximum(high_guess, low)))


class _Noise:
    """The two-sided geometric noise Z of parameter ``a = e^-epsilon``: its CDF, and K with
    ``P(Z > K) = a^(K+1) / (1 + a) <= _NEGLECTED_NOISE``."""

    def __init__(self, epsilon: float):
        self.epsilon = epsilon
        self.a = math.exp(-epsilon)
        self.terms = max(0, math.ceil(math.log(_NEGLECTED_NOISE * (1 + self.a)) / -epsilon) - 1)
        self.variance = 2 * self.a / (1 - self.a) ** 2

    def cdf(self, t: np.ndarray) -> np.ndarray:
        """``P(Z <= t)``: ``1 - a^(t+1)/(1+a)`` for t >= 0, ``a^-t/(1+a)`` for t < 0."""
        scaled = np.exp(-self.epsilon * np.where(t >= 0, t + 1, -t)) / (1 + self.a)
        return np.where(t >= 0, 1 - scaled, scaled)


def _noisy_poisson_cdf(x: np.ndarray, mean: np.ndarray, noise: _Noise) -> Tuple[np.ndarray, np.ndarray]:
    """Bounds ``(below, above)`` on ``P(Poisson(mean) + Z <= x)`` per element, at most about
    2e-9 apart: ``sum_n P(N = n) P(Z <= x - n)`` over n within both the Poisson's bulk and
    x +- K, the rest bounded by the Poisson's exact tail masses and the noise's CDF."""
    from scipy import special

    mean = np.maximum(mean, 1e-300)  # mean 0: the pmf is 1 at 0 (0 * log of it is 0)
    reach = _POISSON_SPREAD * np.sqrt(mean) + _POISSON_MARGIN
    low = np.maximum.reduce([np.zeros_like(x), np.ceil(mean - reach), x - noise.terms])
    high = np.minimum(np.floor(mean + reach), x + noise.terms)
    high = np.maximum(high, low - 1)  # an empty window still splits n into n < low and n > high
    width = int(np.max(high - low)) + 1
    n = low[:, None] + np.arange(max(width, 1), dtype=np.float64)[None, :]
    inside = n <= high[:, None]
    exponent = np.where(inside, n * np.log(mean)[:, None] - mean[:, None] - special.gammaln(n + 1), -np.inf)
    with np.errstate(under="ignore"):
        within = np.sum(np.exp(exponent) * noise.cdf(x[:, None] - n), axis=1)
    before, after = _poisson_cdf(low - 1, mean), _poisson_sf(high + 1, mean)
    # n < low: P(Z <= x - n) is between P(Z <= x - low + 1) and 1; n > high: between 0 and P(Z <= x - high - 1)
    return (within + before * noise.cdf(x - low + 1),
            within + before + after * noise.cdf(x - high - 1))


def _summed_width(e: np.ndarray, noise: _Noise) -> np.ndarray:
    """About how many terms ``_noisy_poisson_cdf`` sums for an estimate e."""
    bulk = 2 * (_POISSON_SPREAD * np.sqrt(np.maximum(e, 0) + 4 * math.sqrt(noise.variance) + 1) + _POISSON_MARGIN)
    return np.minimum(bulk, 2 * noise.terms) + 1


def _exact_noisy(e: np.ndarray, noise: _Noise, tail: float) -> Tuple[np.ndarray, np.ndarray]:
    """The equal-tailed bounds of ``noisy_count_intervals``, by bisection on the sums."""

    def under_high(mean):  # P(Y <= e) may exceed the tail: the mean is below high
        return _noisy_poisson_cdf(e, mean, noise)[1] > tail

    def under_low(mean):  # P(Y >= e) = 1 - P(Y <= e - 1) is surely within the tail: at most low
        return 1 - _noisy_poisson_cdf(e - 1, mean, noise)[0] <= tail

    zero = np.zeros(len(e))
    positive = np.maximum(e, 0)
    spread = 3 * np.sqrt(positive + noise.variance) + 1
    upper = _boundary(under_high, positive, positive + spread)
    lower = _boundary(under_low, np.maximum(positive - spread, 0), np.maximum(e, 1.0))
    return np.where(under_low(zero), lower[0], 0.0), np.where(under_high(zero), upper[1], 0.0)


def _union_noisy(e: np.ndarray, noise: _Noise, tail: float) -> Tuple[np.ndarray, np.ndarray]:
    """Bounds that contain ``_exact_noisy``'s, for estimates too wide to sum over: |Z| <= k but
    with probability ``2 tail _NOISE_SHARE`` (the noise's exact quantile), and Garwood's exact
    Poisson bounds with the rest of the miss probability, taken at e - k and e + k."""
    from scipy import special

    from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric

    k = TwoSidedGeometric(float(noise.epsilon)).half_width(1 - 2 * tail * _NOISE_SHARE)
    rest = tail * (1 - _NOISE_SHARE)
    low_count, high_count = np.maximum(e - k, 0), np.maximum(e + k, 0)
    lower = np.where(low_count > 0, special.gammaincinv(np.maximum(low_count, 1), rest), 0.0)
    upper = special.gammainccinv(high_count + 1, rest)
    return lower, upper


def noisy_count_intervals(estimates: Sequence[int], epsilon: float, level: float = LEVEL) -> List[Tuple[int, int]]:
    """Per released estimate ``e = c + Z`` (``c`` a sum of independent Bernoulli(p_u), ``Z``
    two-sided geometric of parameter ``a = e^-epsilon``), an integer interval ``[low, high]``
    that holds ``f = sum p_u`` with probability at least ``level``.

    ``high`` is the smallest f with ``P(Poisson(f) + Z <= e) <= (1 - level)/2`` (0 if none)
    and ``low`` the largest with ``P(Poisson(f) + Z >= e) <= (1 - level)/2`` (0 if none),
    rounded outward: the equal-tailed interval of the worst-case Bernoulli sum plus the noise,
    the probabilities summed to within 2e-9 and the bound taken on the widening side. When
    that sum would have more than 32,768 terms (epsilon below about 0.0013 and estimates in the
    millions) the bounds are the union bound, which contains them: |Z| <= k but with
    probability (1 - level)/2, and Garwood's exact Poisson bounds at the same miss probability
    at e - k and e + k.

    Raises:
      ValueError: epsilon not positive and finite, or a level outside (0, 1).
    """
    tail = _check_level(level)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not (
            math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    e = np.asarray([int(x) for x in estimates], dtype=np.float64)
    noise = _Noise(float(epsilon))
    order = np.argsort(e, kind="stable")  # neighbours sum over similar widths
    widths = _summed_width(e[order], noise)
    lower, upper = np.zeros(len(e)), np.zeros(len(e))
    start = 0
    while start < len(e):
        if widths[start] > _MAX_TERMS:
            rows = order[start:]
            lower[rows], upper[rows] = _union_noisy(e[rows], noise, tail)
            break
        stop = start + 1
        while stop < len(e) and widths[stop] <= _MAX_TERMS and (stop + 1 - start) * widths[stop] <= _CHUNK:
            stop += 1
        rows = order[start:stop]
        lower[rows], upper[rows] = _exact_noisy(e[rows], noise, tail)
        start = stop
    return [(int(math.floor(lo)), int(math.ceil(hi))) for lo, hi in zip(lower.tolist(), upper.tolist())]


def sampled_count_interval(count: int, sample_probability: float, tau: int = 0,
                           level: float = LEVEL) -> Tuple[int, int]:
    """An integer interval for ``f = sum p_u`` from a released ``count``: each user is kept with
    probability ``sample_probability`` and then reports the item with probability ``p_u``, and
    the count was released because it reached ``tau``. With ``tau > 0`` the interval holds f
    with probability at least ``level`` given the release (``count >= tau``); with ``tau = 0``
    unconditionally.

    On the mean ``mu = p_s f`` of the count: ``high`` is the smallest mu with
    ``P(X <= count | X >= tau) <= (1 - level)/2`` and ``low`` the largest with
    ``P(X >= count | X >= tau) <= (1 - level)/2`` (0 when count = tau: a count at the threshold
    comes from arbitrarily rare items), X ~ Poisson(mu); both divided by p_s and rounded outward.
    With tau = 0 this is Garwood's exact Poisson interval.

    Raises:
      ValueError: a count below tau or negative, a bad tau, a probability outside (0, 1] or a
        level outside (0, 1).
    """
    tail = _check_level(level)
    if isinstance(tau, bool) or not isinstance(tau, int) or tau < 0:
        raise ValueError(f"tau must be an integer >= 0, got {tau!r}")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < tau:
        raise ValueError(f"count must be an integer >= tau = {tau}, got {count!r}")
    if not 0.0 < sample_probability <= 1.0:
        raise ValueError(f"sample_probability must be in (0, 1], got {sample_probability!r}")
    c, threshold = np.array([float(count)]), np.array([float(tau)])

    def under_high(mean):  # P(X <= c | X >= tau) > tail: the mean is below high
        released = _poisson_sf(threshold, mean)
        with np.errstate(invalid="ignore", divide="ignore"):
            # each form where it does not cancel: the lower tails above c, the upper below
            ratio = np.where(mean > c, (_poisson_cdf(c, mean) - _poisson_cdf(threshold - 1, mean)) / released,
                             1 - _poisson_sf(c + 1, mean) / released)
        return np.where(released > 0, ratio, 1.0) > tail  # a release too rare to compute: at tau

    def under_low(mean):  # P(X >= c | X >= tau) <= tail: the mean is at most low
        released = _poisson_sf(threshold, mean)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = _poisson_sf(c, mean) / released
        return np.where(released > 0, ratio, 0.0) <= tail

    spread = 3 * np.sqrt(c) + 1
    _, upper = _boundary(under_high, c, c + spread)
    if count == tau:  # P(X >= c | X >= tau) = 1 for every mean: no lower bound but 0
        lower = np.zeros(1)
    else:
        lower, _ = _boundary(under_low, np.maximum(c - spread, 0), np.maximum(c, 1.0))
    p = float(sample_probability)
    return int(math.floor(float(lower[0]) / p)), int(math.ceil(float(upper[0]) / p))
