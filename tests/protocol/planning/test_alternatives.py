"""The alternatives of an infeasible target: each certified by Theorem 1 and tight."""

import math

import pytest

from triehh_beam.protocol.accounting.privacy import theorem1, theorem1_delta, theorem1_violations
from triehh_beam.protocol.planning.alternatives import ALTERNATIVE_KINDS, Alternative, alternatives_for
from triehh_beam.protocol.planning.parameters import RULES, batch_size_for, rule_theta
from triehh_beam.protocol.planning.planner import plan


def _round_sig(x: float, digits: int) -> float:
    return float(f"{x:.{digits}g}")


def _sig_digits(printed: str) -> int:
    return len(printed.replace("0.", "", 1).lstrip("0").replace(".", ""))


def test_worked_example():
    # n = 10^4, eps = 1, L = 10, delta = 1e-8: theta = 12, m = 79 violates gamma >= 1;
    # lowering theta to 9 gives gamma = 1.057, m = 105, delta = 3.215e-6.
    for rule in RULES:
        result = plan(10**4, 1.0, 1e-8, 10, rule)
        assert not result.feasible
        assert (result.theta, result.batch_size) == (12, 79)
        assert result.epsilon is None and result.delta is None
        assert "gamma >= 1" in result.reason and "THETACEIL" in result.reason
        lower = [a for a in result.alternatives if a.kind == "lower_theta"]
        assert len(lower) == 1
        alt = lower[0]
        assert alt.theta == 9 == math.floor(result.theta_ceiling)
        assert alt.batch_size == 105
        assert round(alt.gamma, 3) == 1.057
        assert _round_sig(alt.delta, 4) == 3.215e-6
        assert alt.epsilon <= 1.0
        assert alt.n == 10**4 and alt.target_epsilon == 1.0


INFEASIBLE = [
    ("authors", 10**4, 1.0, 1e-8, 10),
    ("corollary1", 10**4, 1.0, 1e-8, 10),
    ("authors", 5_000, 1.0, 4e-8, 10),
    ("authors", 1_000, 1.0, 1e-6, 10),
    ("corollary1", 2_000, 1.0, 1e-8, 10),
    ("authors", 10**6, 0.05, 1e-12, 10),
    ("corollary1", 10**9, 0.001, 1e-12, 10),
    ("authors", 20_000, 2.0, 1e-9, 30),
    ("authors", 1, 1.0, 0.5, 1),
    # epsilon/L so large that theta >= e^(epsilon/L) - 1 = 403 > sqrt(n): a smaller epsilon works
    ("authors", 10**5, 60.0, 1e-10, 10),
    ("corollary1", 10**5, 60.0, 1e-10, 10),
]


@pytest.mark.parametrize("rule, n, eps, delta, max_length", INFEASIBLE)
def test_alternatives_are_certified_and_tight(rule, n, eps, delta, max_length):
    result = plan(n, eps, delta, max_length, rule)
    assert not result.feasible
    assert result.reason and "\n" not in result.reason
    kinds = {a.kind: a for a in result.alternatives}
    for alt in result.alternatives:
        # every alternative's numbers are Theorem 1's at its own parameters
        direct = theorem1(alt.n, alt.theta, max_length, batch_size=alt.batch_size)
        assert (alt.epsilon, alt.delta) == tuple(direct)
        assert alt.epsilon <= alt.target_epsilon and alt.delta <= alt.target_delta

    ceiling = result.theta_ceiling
    if "lower_theta" in kinds:
        alt = kinds["lower_theta"]
        assert alt.n == n and alt.target_epsilon == eps
        assert 4 <= alt.theta <= math.floor(ceiling) and alt.theta < result.theta
        assert alt.target_delta == max(delta, theorem1_delta(alt.theta))
        # one step more is not certified at this epsilon (or is the rule's own theta)
        if alt.theta + 1 < result.theta:
            m_up = batch_size_for(n, eps, max_length, alt.theta + 1)
            assert theorem1_violations(n, alt.theta + 1, batch_size=m_up)
    else:
        assert math.floor(ceiling) < 4 or any("lowering theta" in note for note in result.notes)

    if "raise_epsilon" in kinds:
        alt = kinds["raise_epsilon"]
        assert alt.n == n and alt.target_delta == delta and alt.target_epsilon > eps
        assert plan(n, alt.target_epsilon, delta, max_length, rule).feasible
        less = alt.target_epsilon - alt.step
        assert less <= 0 or not plan(n, less, delta, max_length, rule).feasible
        assert alt.step <= alt.target_epsilon * 0.01 + 1e-15  # 3 significant digits or finer

    if "lower_epsilon" in kinds:
        # the target epsilon is beyond L ln(1 + theta_delta): a smaller epsilon is feasible
        alt = kinds["lower_epsilon"]
        assert "raise_epsilon" not in kinds
        assert alt.target_epsilon < eps and alt.target_delta == delta
        assert plan(n, alt.target_epsilon, delta, max_length, rule).feasible
        assert alt.theta == rule_theta(rule, alt.target_epsilon, delta, max_length)

    alt = kinds["raise_population"]
    assert alt.n > n and alt.step == 1
    assert alt.target_epsilon == eps and alt.target_delta == delta
    assert plan(alt.n, eps, delta, max_length, rule).feasible
    assert not plan(alt.n - 1, eps, delta, max_length, rule).feasible
    # ... and every larger population works (checked over a window past the flicker)
    for bigger in range(alt.n, alt.n + 3000):
        assert plan(bigger, eps, delta, max_length, rule, with_alternatives=False).feasible


def test_raise_epsilon_missing_when_no_epsilon_works():
    # theta = 5 needs n >= 36 whatever epsilon is: one user cannot be protected.
    result = plan(1, 1.0, 0.5, 1)
    assert "raise_epsilon" not in {a.kind for a in result.alternatives}
    assert any("raising epsilon cannot help" in note for note in result.notes)
    assert any("lowering theta cannot help" in note for note in result.notes)


def test_raise_epsilon_example_numbers():
    result = plan(10**4, 1.0, 1e-8, 10)
    alt = {a.kind: a for a in result.alternatives}["raise_epsilon"]
    # 1.28 (theta = 12, m = 100) meets Theorem 1's conditions, but the crowding guard refuses
    # it (delta >= 1.28e-9 at n = 10^4, above 0.1 * delta(12) / 10 = 2.3e-11): 1.3 (m = 101) is the first.
    assert alt.target_epsilon == 1.3 and alt.step == pytest.approx(0.01)
    assert "crowding guard fails" in plan(10**4, 1.28, 1e-8, 10).reason
    assert (alt.theta, alt.batch_size) == (12, 101)



def test_alternatives_for_is_what_plan_offers():
    found, notes = alternatives_for("authors", 10**4, 1.0, 1e-8, 10)
    result = plan(10**4, 1.0, 1e-8, 10)
    assert found == result.alternatives
    assert set(notes) <= set(result.notes)
    assert [a.kind for a in found] == ["lower_theta", "raise_epsilon", "raise_population"]


def test_alternative_rejects_unknown_kind():
    assert ALTERNATIVE_KINDS == ("lower_theta", "raise_epsilon", "lower_epsilon", "raise_population")
    with pytest.raises(ValueError, match="kind must be one of"):
        Alternative("shrug", "", 1, 1.0, 0.5, 5, 1.0, 1, 1.0, 0.5)
