"""The audit's test of an (epsilon, delta) claim (``audit_stats``): refuted only when the bounds
say so, in either direction, with the confidence split over both; and how many runs would
refute a violation of a given size, checked against the test itself."""

import math

import pytest

from triehh_beam.reference.audit_stats import runs_to_refute, test_claim


def test_an_event_always_on_d_prime_and_never_on_d_refutes_a_small_claim():
    result = test_claim(40, 40, 0, 40, epsilon=0.5, delta=1e-3)
    forward, backward = result.directions
    assert result.violated and forward.refuted and not backward.refuted
    assert (forward.numerator, forward.denominator) == ("D'", "D")
    # Each bound one-sided at 1 - 0.05 / 4: Clopper-Pearson's ends for k = n and k = 0.
    assert forward.bound_level == pytest.approx(0.9875)
    assert forward.p_numerator_lower == pytest.approx(0.0125 ** (1 / 40))
    assert forward.p_denominator_upper == pytest.approx(1 - 0.0125 ** (1 / 40))
    assert forward.allowed == pytest.approx(math.exp(0.5) * forward.p_denominator_upper + 1e-3)


def test_the_same_counts_refute_nothing_when_the_claim_allows_them():
    assert not test_claim(40, 40, 0, 40, epsilon=5.0, delta=1e-3).violated
    assert not test_claim(10, 40, 10, 40, epsilon=0.01, delta=0.0).violated
    assert not test_claim(0, 40, 0, 40, epsilon=0.0, delta=0.0).violated


def test_the_reverse_direction_is_tested_too():
    result = test_claim(0, 60, 60, 60, epsilon=0.5, delta=1e-3)
    assert result.violated and result.directions[1].refuted and not result.directions[0].refuted


def test_delta_alone_can_be_refuted():
    # P[E|D] = 0 observed: the claim allows e^eps * (a small upper bound) + delta.
    assert test_claim(30, 200, 0, 200, epsilon=0.1, delta=0.01).violated
    assert not test_claim(30, 200, 0, 200, epsilon=0.1, delta=0.2).violated


def test_runs_to_refute_is_the_first_count_whose_expected_hits_refute():
    runs = runs_to_refute(0.0, 0.999, epsilon=0.6, delta=1e-3)
    assert test_claim(runs, runs, 0, runs, 0.6, 1e-3).violated
    assert not test_claim(runs - 1, runs - 1, 0, runs - 1, 0.6, 1e-3).violated
    small = runs_to_refute(0.0, 0.1, epsilon=1.0, delta=1e-3)
    assert 100 < small < 400 and small > runs
    assert runs_to_refute(0.5, 0.1, epsilon=1.0, delta=1e-3) is None  # e * 0.5 + 0.1 > 1: impossible


def test_bad_counts_and_confidence_are_refused():
    with pytest.raises(ValueError):
        test_claim(5, 4, 0, 4, 1.0, 0.0)
    with pytest.raises(ValueError):
        test_claim(0, 0, 0, 4, 1.0, 0.0)
    with pytest.raises(ValueError):
        test_claim(1, 4, 0, 4, 1.0, 0.0, confidence=1.0)
