"""The candidate bounds of a fresh discovery (``job/batch/candidate_bounds.py``) cover the plan the
census will lead to, for populations they were not computed at: TrieHH's planned m at most the
bundles' keep below ``SMALL_POPULATION`` users, and the rank prefilter of every larger population
at most the rate bound; a public population's prefilter; a fixed m kept whole by each bundle;
TrieHH++'s Bernoulli cut exactly. (A bound that missed would only cost a second read: the cut
counts its users, tests/job/batch/test_driver.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from triehh_beam.job.batch.candidate_bounds import SMALL_POPULATION, candidate_bounds
from triehh_beam.job.release.planning import plan_for
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness import sampling


def _config(**fields) -> DiscoveryConfig:
    values = dict(input_pattern="in.parquet", output_dir="/tmp/candidate-bounds-out", epsilon=4.0, delta=1e-8,
                  max_length=10)
    values.update(fields)
    return DiscoveryConfig(**{"protocol": "triehh", **values})


@pytest.mark.parametrize("epsilon, delta, max_length", [(4.0, 1e-8, 10), (1.0, 1e-6, 6), (8.0, 1e-12, 12)])
def test_planned_m_is_covered_off_the_grid(epsilon, delta, max_length):
    config = _config(epsilon=epsilon, delta=delta, max_length=max_length)
    bounds = candidate_bounds(config)
    rng = np.random.default_rng(int(epsilon * 100 + max_length))
    # Populations drawn off the bounds' grid, log-uniform, small and large.
    for n in sorted(set(np.exp(rng.uniform(np.log(50), np.log(10**10), 60)).astype(np.int64).tolist())):
        plan = planner.plan(n, epsilon, delta, max_length, with_alternatives=False)
        if not plan.feasible:
            continue
        if n < SMALL_POPULATION:
            assert plan.batch_size <= bounds.bundle_keep, n
        else:
            assert sampling.rank_prefilter_bound(n, plan.batch_size) <= bounds.rate_bound, n
    # Not loose: the rate bound is about the sampling rate, a few percent over it.
    rate = planner.plan(10**7, epsilon, delta, max_length, with_alternatives=False).batch_size / 10**7
    assert rate < bounds.rate_bound / 2**64 < 1.2 * rate


def test_a_public_population_is_its_own_prefilter():
    config = _config(population=50_000)
    m = plan_for(config, 50_000).batch_size
    assert candidate_bounds(config) == (sampling.rank_prefilter_bound(50_000, m), 0)


def test_a_fixed_m_is_kept_whole_by_each_bundle():
    config = _config(theta=12, batch_size=777, allow_no_guarantee=True)
    assert candidate_bounds(config) == (-1, 777)


def test_triehh_plus_plus_keeps_exactly_its_bernoulli_sample():
    config = _config(protocol="triehh++", epsilon=4.0, delta=1e-6, max_length=6)
    p = plan_for(config, 1).sample_probability
    assert candidate_bounds(config) == (sampling.bernoulli_threshold(p) - 1, 0)
