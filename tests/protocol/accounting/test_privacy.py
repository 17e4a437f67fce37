"""Theorem 1: the (epsilon, delta) of a run, its conditions, and composition."""

import dataclasses
import math

import pytest

from triehh_beam.protocol.accounting.privacy import (DPGuarantee, PrivacyConditionError, compose,
                                                     theorem1, theorem1_delta, theorem1_violations)


def _round_sig(x: float, digits: int) -> float:
    return float(f"{x:.{digits}g}")


def _sig_digits(printed: str) -> int:
    return len(printed.replace("0.", "", 1).lstrip("0").replace(".", ""))


# ---------------------------------------------------------------------------------------------
# Theorem 1 against the paper's numbers.

# Table 1 of the paper (docs/protocol.md): n = 10^k, theta = k, gamma = 1000; epsilon for L = 1, 10.
TABLE_1 = [
    (10, "0.105", "1.05"),
    (12, "0.012", "0.12"),
    (14, "0.0014", "0.014"),
    (16, "0.00016", "0.0016"),
]


@pytest.mark.parametrize("k, eps_l1, eps_l10", TABLE_1)
def test_table_1(k, eps_l1, eps_l10):
    # Compared at 3 significant digits, or at the digits the table prints when it prints fewer
    # (0.012 is 0.01207..., which the table shows rounded to 2 digits).
    for max_length, printed in ((1, eps_l1), (10, eps_l10)):
        eps, _ = theorem1(10**k, k, max_length, gamma=1000.0)
        digits = min(3, _sig_digits(printed))
        assert _round_sig(eps, digits) == float(printed), (k, max_length, eps)
        # The same through the integer batch size m = gamma * sqrt(n).
        eps_m, _ = theorem1(10**k, k, max_length, batch_size=1000 * 10 ** (k // 2))
        assert eps_m == pytest.approx(eps, rel=1e-12)


def test_delta_values_from_the_paper():
    assert _round_sig(theorem1_delta(9), 4) == 3.215e-6
    assert _round_sig(theorem1_delta(12), 3) == 2.32e-9
    assert theorem1_delta(9) == pytest.approx(7 / (6 * math.factorial(9)), rel=1e-15)


def test_delta_large_theta_uses_logs():
    small = theorem1_delta(1000)
    large = theorem1_delta(1001)
    assert 0.0 <= large <= small
    assert theorem1_delta(170) == pytest.approx(168 / (167 * math.factorial(170)), rel=1e-12)


def test_theorem1_unpacks_and_is_frozen():
    result = theorem1(10**6, 10, 10, batch_size=5000)
    eps, delta = result
    assert (eps, delta) == (result.epsilon, result.delta)
    assert eps == pytest.approx(-10 * math.log1p(-5000 * 10 / 10**6))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.epsilon = 0.0


@pytest.mark.parametrize(
    "kwargs, condition",
    [
        (dict(n=10**6, theta=3, batch_size=2000), "theta >= 4"),
        (dict(n=100, theta=11, batch_size=10), "theta <= sqrt(n)"),
        (dict(n=10**4, theta=12, batch_size=79), "gamma >= 1"),
        (dict(n=10**4, theta=12, batch_size=800), "gamma <= sqrt(n)/(theta+1)"),
        (dict(n=10**4, theta=12, gamma=0.5), "gamma >= 1"),
        (dict(n=10**4, theta=12, gamma=8.0), "gamma <= sqrt(n)/(theta+1)"),
    ],
)
def test_theorem1_conditions_name_the_failure(kwargs, condition):
    with pytest.raises(PrivacyConditionError) as err:
        theorem1(max_length=10, **kwargs)
    assert isinstance(err.value, ValueError)
    assert any(v.startswith(condition) for v in err.value.violations)
    assert condition in str(err.value)
    assert "\n" not in str(err.value)


def test_theorem1_condition_message_has_the_numbers():
    with pytest.raises(PrivacyConditionError, match=r"79/100 = 0\.79 < 1"):
        theorem1(10**4, 12, 10, batch_size=79)


def test_theorem1_condition_boundaries_are_inclusive():
    # gamma = 1 exactly (m = sqrt(n)) and gamma = sqrt(n)/(theta+1) exactly are allowed.
    assert not theorem1_violations(10**4, 9, batch_size=100)
    assert not theorem1_violations(100**2, 9, batch_size=1000)  # 1000 * 10 == 10^4
    # gamma = 1 = sqrt(n)/(theta+1): both at once (so theta <= sqrt(n) - 1 in practice)
    assert not theorem1_violations(25, 4, batch_size=5)
    assert theorem1_violations(16, 4, batch_size=4)  # theta = sqrt(n) leaves no room for gamma
    assert theorem1_violations(10**4, 9, batch_size=99)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n=0, theta=5, batch_size=1),
        dict(n=10.5, theta=5, batch_size=1),
        dict(n=True, theta=5, batch_size=1),
        dict(n=100, theta=5.0, batch_size=1),
        dict(n=100, theta=5, batch_size=-1),
        dict(n=100, theta=5),
        dict(n=100, theta=5, batch_size=10, gamma=1.0),
    ],
)
def test_theorem1_rejects_invalid_arguments(kwargs):
    with pytest.raises(ValueError) as err:
        theorem1(max_length=10, **kwargs)
    assert not isinstance(err.value, PrivacyConditionError)


def test_compose():
    total = compose([DPGuarantee(1.0, 1e-9), (0.5, 2e-9), theorem1(10**6, 10, 10, batch_size=5000)])
    third = theorem1(10**6, 10, 10, batch_size=5000)
    assert total.epsilon == pytest.approx(1.5 + third.epsilon)
    assert total.delta == pytest.approx(3e-9 + third.delta)
    assert compose([]) == DPGuarantee(0.0, 0.0)
    assert compose(iter([(1.0, 0.0)] * 3)) == DPGuarantee(3.0, 0.0)
    with pytest.raises(ValueError):
        compose([(-1.0, 0.0)])
    with pytest.raises(ValueError):
        DPGuarantee(1.0, math.nan)
