"""The parameter rules: the authors' exact theta, Corollary 1, the batch size, THETACEIL."""

import math

import pytest

from triehh_beam.protocol.accounting.privacy import theorem1, theorem1_delta, theorem1_violations
from triehh_beam.protocol.planning.parameters import (MAX_POPULATION, RULES, PrivacyTarget,
                                                      batch_size_for, rule_theta, theta_ceiling)


def test_authors_rule_is_the_exact_smallest_theta():
    for delta in (0.5, 1e-3, 1e-6, 1e-8, 2.3e-12, 1e-30, 1e-300):
        theta = rule_theta("authors", 0.1, delta, 10)
        assert theorem1_delta(theta) <= delta
        if theta > 5:
            assert theorem1_delta(theta - 1) > delta


def test_corollary1_is_conservative():
    for delta in (0.9, 0.5, 1e-3, 1e-6, 1e-8, 2.3e-12, 1e-30, 1e-300):
        theta = rule_theta("corollary1", 0.1, delta, 10)
        assert theta >= 10
        assert theta >= rule_theta("authors", 0.1, delta, 10)
        assert theorem1_delta(theta) <= delta


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(
    "n, eps, delta, max_length",
    [(10**5, 4.0, 1e-10, 10), (659_000, 4.0, 2.3e-12, 10), (10**6, 1.0, 1e-12, 1),
     (10**4, 2.0, 1e-8, 10), (10**9, 0.5, 1e-15, 20), (10**7, 60.0, 1e-10, 10)],
)
def test_corollary1_substitution_returns_exactly_epsilon(rule, n, eps, delta, max_length):
    theta = rule_theta(rule, eps, delta, max_length)
    gamma = math.sqrt(n) * math.expm1(eps / max_length) / (theta * math.exp(eps / max_length))
    achieved, _ = theorem1(n, theta, max_length, gamma=gamma)
    assert achieved == pytest.approx(eps, rel=1e-12)



def test_batch_size_is_the_largest_within_epsilon():
    # n = 10^5, epsilon = 4, L = 10, theta = 14: m = floor(10^5 (1 - e^-0.4) / 14) = 2354.
    assert batch_size_for(100_000, 4.0, 10, 14) == 2354
    for n, eps, max_length, theta in [(100_000, 4.0, 10, 14), (10**4, 1.0, 10, 9),
                                      (659_000, 4.0, 10, 14), (10**9, 0.5, 20, 20)]:
        m = batch_size_for(n, eps, max_length, theta)
        assert m == math.floor(n * -math.expm1(-eps / max_length) / theta) or m == (
            math.floor(n * -math.expm1(-eps / max_length) / theta) - 1
        )
        assert -max_length * math.log1p(-m * theta / n) <= eps
        assert -max_length * math.log1p(-(m + 1) * theta / n) > eps


def test_theta_ceiling_is_where_gamma_reaches_one():
    # THETACEIL = sqrt(n) (1 - e^(-epsilon/L)); at n = 10^4, epsilon = 1, L = 10 it is 9.52.
    assert theta_ceiling(10**4, 1.0, 10) == pytest.approx(100 * (1 - math.exp(-0.1)), rel=1e-15)
    assert math.floor(theta_ceiling(10**4, 1.0, 10)) == 9
    # the rule's gamma at theta = THETACEIL is exactly 1
    theta = theta_ceiling(10**4, 1.0, 10)
    gamma = math.sqrt(10**4) * math.expm1(0.1) / (theta * math.exp(0.1))
    assert gamma == pytest.approx(1.0, rel=1e-12)
    m = batch_size_for(10**4, 1.0, 10, 9)
    assert not theorem1_violations(10**4, 9, batch_size=m)
    assert theorem1(10**4, 9, 10, batch_size=m).epsilon <= 1.0


@pytest.mark.parametrize(
    "args, match",
    [
        ((10**4, 0.0, 1e-8, 10), "epsilon must be > 0"),
        ((10**4, math.nan, 1e-8, 10), "epsilon must be finite"),
        ((10**4, 1.0, 1.0, 10), r"delta must be in \(0, 1\)"),
        ((0, 1.0, 1e-8, 10), "n .* must be >= 1"),
        ((MAX_POPULATION + 1, 1.0, 1e-8, 10), "must be <="),
        ((10**4, 1.0, 1e-8, 0), "L .* must be >= 1"),
        ((10**4, 8000.0, 1e-8, 10), "too large"),
    ],
)
def test_privacy_target_validation(args, match):
    with pytest.raises(ValueError, match=match):
        PrivacyTarget(*args)


def test_privacy_target_normalises_numbers():
    target = PrivacyTarget(10**4, 1, 1e-8, 10)
    assert isinstance(target.epsilon, float) and target.epsilon == 1.0
    assert (target.n, target.max_length) == (10**4, 10)


def test_rule_theta_rejects_unknown_rule_and_bad_targets():
    assert RULES == ("authors", "corollary1")
    with pytest.raises(ValueError, match="rule must be one of authors, corollary1"):
        rule_theta("paper", 1.0, 1e-8, 10)
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
        rule_theta("authors", 1.0, 0.0, 10)
