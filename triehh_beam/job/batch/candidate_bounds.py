"""What a fresh discovery's one read keeps of each round before the census has counted n
(``beam.samples.candidates.CandidateBounds``), from what the plan will be for any n: TrieHH++'s exact
Bernoulli cut (its p_s does not depend on n); for a public ``--population`` N, the rank prefilter
of N (a smaller input is refused, a larger one only lowers the m-th rank); for a fixed m, each
bundle's m smallest; for a planned m, a bundle's smallest up to the m of ``SMALL_POPULATION``
users and the largest prefilter of any larger population on a fine grid. Whatever the bounds, the
cut to m checks that each round's candidates hold m users and the driver draws a short round again
from the records, so a bound only ever costs time, never changes a sample.
"""

from __future__ import annotations

import math

from triehh_beam.beam.samples.candidates import CandidateBounds
from triehh_beam.job.release.planning import plan_for
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness import sampling

__all__ = ["LARGEST_POPULATION", "SMALL_POPULATION", "candidate_bounds"]

#: Populations up to this are kept whole by each bundle's smallest ranks (the m they plan).
SMALL_POPULATION = 1 << 17
#: The grid of larger populations whose prefilters the rate bound covers reaches this.
LARGEST_POPULATION = 1 << 44
_STEPS_PER_DOUBLING = 16  # the grid's ratio, 2^(1/16): about 4% between two populations
_MARGIN = 1.1  # on the bundles' m, for a plan whose m is not monotone between grid points


def _grid(low: int, high: int):
    step = 2 ** (1 / _STEPS_PER_DOUBLING)
    n = float(low)
    while n <= high:
        yield int(n)
        n *= step


def _planned_m(config: DiscoveryConfig, n: int) -> int:
    plan = planner.plan(n, config.epsilon, config.delta, config.max_length, rule=config.rule,
                        with_alternatives=False)
    return plan.batch_size if plan.feasible else 0


def candidate_bounds(config: DiscoveryConfig) -> CandidateBounds:
    """The candidate bounds of a fresh discovery of ``config`` (TrieHH or TrieHH++)."""
    top = 2**64 - 1
    if config.protocol.samples_by_probability:
        p = plan_for(config, 1).sample_probability
        return CandidateBounds(sampling.bernoulli_threshold(p) - 1, 0)
    if config.population is not None:
        m = plan_for(config, config.population).batch_size
        return CandidateBounds(sampling.rank_prefilter_bound(config.population, m), 0)
    if config.theta is not None:  # a fixed m: whatever n, the bundles' m smallest hold it
        return CandidateBounds(-1, config.batch_size)
    small = max((_planned_m(config, n) for n in _grid(16, SMALL_POPULATION)), default=0)
    rate = -1
    for n in _grid(SMALL_POPULATION, LARGEST_POPULATION):
        m = _planned_m(config, n)
        if m:
            rate = max(rate, sampling.rank_prefilter_bound(n, m) if m < n else top)
    return CandidateBounds(min(rate, top), math.ceil(small * _MARGIN))
