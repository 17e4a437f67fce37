"""The crowding guard of TrieHH's planner: plans whose crowding lower bound on one round's delta
exceeds a tenth of Theorem 1's delta per round are refused (the privacy review's three plans,
each published before with a delta below the bound), typical plans are not, and every
alternative offered passes the guard."""

import pytest

from triehh_beam.protocol.accounting.crowding import neighbours_bound
from triehh_beam.protocol.accounting.privacy import THEOREM1_STATUS, theorem1
from triehh_beam.protocol.planning.parameters import CROWDING_SHARE, crowding_violation
from triehh_beam.protocol.planning.planner import plan


@pytest.mark.parametrize("n, epsilon, delta, max_length, theta, m, at_least", [
    (100, 4.0, 1e-4, 2, 8, 10, 7.2e-4),
    (250, 8.0, 1.6e-5, 3, 14, 16, 2.15e-4),
    (9999, 8.0, 1e-8, 2, 54, 181, 6.6e-42),
])
def test_the_reviews_plans_are_refused(n, epsilon, delta, max_length, theta, m, at_least):
    # Before the guard these were published with Theorem 1's delta, below the crowding bound.
    assert theorem1(n, theta, max_length, batch_size=m).delta < at_least
    result = plan(n, epsilon, delta, max_length)
    assert not result.feasible and (result.theta, result.batch_size) == (theta, m)
    assert "crowding guard fails" in result.reason and "--protocol triehh++" in result.reason
    assert "\n" not in result.reason
    assert result.crowding_delta == pytest.approx(neighbours_bound(n, theta, m).delta)
    assert result.crowding_delta >= at_least * 0.99
    for alt in result.alternatives:
        crowding, refused = crowding_violation(alt.n, alt.theta, alt.batch_size, max_length, alt.delta)
        assert refused is None and crowding.delta <= CROWDING_SHARE * alt.delta / max_length


@pytest.mark.parametrize("n, epsilon, delta, max_length", [
    (10**4, 2.0, 1e-8, 10), (10**5, 2.0, 1e-8, 4), (10**6, 1.0, 1e-12, 10), (10**7, 8.0, 1e-14, 4),
])
def test_typical_plans_pass_the_guard(n, epsilon, delta, max_length):
    result = plan(n, epsilon, delta, max_length)
    assert result.feasible
    assert result.crowding_delta <= CROWDING_SHARE * result.delta / max_length
    assert result.to_dict()["theorem1"] == THEOREM1_STATUS


def test_the_guard_compares_in_logs_where_deltas_underflow():
    # theta = 400: Theorem 1's delta, about 1e-870, is 0.0 as a float. The guard compares ln's:
    # a population whose bound also underflows is judged by its logarithm, neither waved through
    # as 0 <= 0 nor refused as "anything > 0".
    import math

    from triehh_beam.protocol.accounting.privacy import log_theorem1_delta, theorem1_delta

    assert theorem1_delta(400) == 0.0
    threshold = math.log(CROWDING_SHARE) + log_theorem1_delta(400) - math.log(10)
    refused_seen = passed_seen = False
    for n, m in ((10**7, 40_000), (10**8, 100_000), (10**8, 400_000)):
        bound, refused = crowding_violation(n, 400, m, 10, 0.0)
        assert bound.delta == 0.0 and math.isfinite(bound.log_delta)
        assert (refused is not None) == (bound.log_delta > threshold)
        refused_seen |= refused is not None
        passed_seen |= refused is None
    assert refused_seen and passed_seen
