"""Composition: basic composition (one correctly rounded sum that privacy.compose, the ledger and
the planners share) and L rounds composed (docs/protocol.md §2, "Exact accounting"): basic, and the
PLD of the dominating pair against Kairouz, Oh and Viswanath's optimal composition theorem."""

import itertools
import math
import random
from fractions import Fraction

import pytest

from triehh_beam.protocol.accounting import privacy
from triehh_beam.protocol.accounting.composition import basic_composition, compose_rounds, round_epsilon


def _optimal(delta_round: float, rounds: int) -> float:
    """Kairouz et al.'s optimal composition of L (eps_r, delta_r)-DP mechanisms, read at
    eps = L eps_r (its i = 0 term): ``1 - (1 - delta_r)^L``."""
    return -math.expm1(rounds * math.log1p(-delta_round))


def test_one_round_is_the_round_itself():
    for eps_r, delta_r in [(1.0, 1e-8), (0.123456, 3e-7), (0.0, 0.5)]:
        c = compose_rounds(eps_r, delta_r, 1)
        assert (c.epsilon, c.basic_delta, c.pld_delta, c.delta, c.method) == (eps_r, delta_r, delta_r, delta_r, "basic")


@pytest.mark.parametrize("eps_r, delta_r, rounds", [(0.25, 4e-9, 4), (0.1, 1e-3, 20), (1 / 3, 1e-6, 3)])
def test_basic_is_l_times_delta(eps_r, delta_r, rounds):
    c = compose_rounds(eps_r, delta_r, rounds)
    assert c.basic_delta == pytest.approx(rounds * delta_r, rel=1e-15)
    assert c.epsilon == pytest.approx(rounds * eps_r, rel=1e-15)
    assert c.delta == min(c.basic_delta, c.pld_delta)
    assert c.method == ("pld" if c.pld_delta < c.basic_delta else "basic")


def test_pld_is_the_optimal_composition_theorem_at_l_eps_r():
    """The dominating pair's PLD, read at L eps_r, is Kairouz et al.'s ``1 - (1 - delta_r)^L``.

    Tolerance: the PLD is pessimistic, so it is never below the theorem beyond float rounding
    (1e-12 relative); above it by at most dp_accounting's truncated tail mass (1e-15 absolute,
    its ``tail_mass_truncation``) plus the same rounding. That 1e-15 is the one looseness left
    (0.1% at delta_r = 1e-12); the grid is exact because eps_r is a multiple of the step, which
    the off-grid values below (0.123456, 1/3, 0.0333) check."""
    for eps_r, delta_r, rounds in itertools.product([0.0, 0.0333, 0.1, 0.123456, 1 / 3, 0.5, 2.0],
                                                    [1e-12, 2.5e-9, 1e-6, 1e-3], [2, 3, 7, 25]):
        c = compose_rounds(eps_r, delta_r, rounds)
        want = _optimal(delta_r, rounds)
        assert want * (1 - 1e-12) <= c.pld_delta <= want * (1 + 1e-12) + 1e-15, (eps_r, delta_r, rounds)
        # The optimum is below L delta_r, so the PLD never loses to basic beyond its tolerance.
        assert c.pld_delta <= c.basic_delta * (1 + 1e-12) + 1e-15


def test_pld_saves_the_second_order_term():
    # 1 - (1 - d)^L = L d - C(L, 2) d^2 + ...: visible at delta_r = 1e-3, L = 20 (1.9%).
    c = compose_rounds(0.1, 1e-3, 20)
    assert c.method == "pld"
    assert c.basic_delta - c.pld_delta == pytest.approx(math.comb(20, 2) * 1e-6, rel=0.05)


@pytest.mark.parametrize("args, message", [
    ((-0.1, 1e-8, 2), "epsilon_round must be >= 0"),
    ((1.0, 1.5, 2), "delta_round must be in [0, 1]"),
    ((1.0, -1e-9, 2), "delta_round must be in [0, 1]"),
    ((1.0, 1e-8, 0), "rounds must be >= 1"),
    ((1.0, 1e-8, 2.0), "rounds must be an integer"),
    ((math.inf, 1e-8, 2), "epsilon_round must be finite"),
])
def test_arguments_out_of_range_are_refused(args, message):
    with pytest.raises(ValueError) as raised:
        compose_rounds(*args)
    assert message in str(raised.value)


# ---- basic composition: one sum for every accountant and the ledger ------------------------------

# Ten spends of 0.1 add up, exactly, to 1.0000000000000000555 (0.1 is a hair above 1/10), which
# rounds to 1.0; summed left to right in floats they give 0.9999999999999999.
TENTHS = [(0.1, 1e-9)] * 10


def _exact_sum(values) -> float:
    return float(sum(Fraction(v) for v in values))


def test_basic_composition_is_the_correctly_rounded_sum_in_any_order():
    spends = TENTHS + [(1e16, 0.0), (3.0, 2e-9), (1e-16, 1e-300)]
    want = (_exact_sum(e for e, _ in spends), _exact_sum(d for _, d in spends))
    assert basic_composition(spends) == want
    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(spends)
        assert basic_composition(spends) == want
    assert basic_composition(TENTHS)[0] == 1.0 and sum(e for e, _ in TENTHS) < 1.0
    assert basic_composition([]) == (0.0, 0.0)
    assert basic_composition([(1.0, 1e-9), (math.inf, math.inf)]) == (math.inf, math.inf)


def test_privacy_compose_and_compose_rounds_add_up_alike():
    # Both sum with basic_composition (the ledger too: tests/job/state/test_ledger.py): on the old code
    # privacy.compose summed left to right (0.9999999999999999), compose_rounds with math.fsum (1.0).
    want = basic_composition(TENTHS)
    assert tuple(privacy.compose(TENTHS)) == want
    rounds = compose_rounds(0.1, 1e-9, 10)
    assert (rounds.epsilon, rounds.basic_delta) == want


@pytest.mark.parametrize("epsilon, rounds", [(1.0, 10), (4.0, 3), (0.3, 7), (2.0, 49), (1e-3, 1), (7.1, 11)])
def test_round_epsilon_is_the_largest_whose_rounds_stay_within_epsilon(epsilon, rounds):
    eps_r = round_epsilon(epsilon, rounds)
    assert basic_composition([(eps_r, 0.0)] * rounds)[0] <= epsilon
    above = math.nextafter(eps_r, math.inf)
    assert basic_composition([(above, 0.0)] * rounds)[0] > epsilon or above > epsilon / rounds
    assert eps_r == pytest.approx(epsilon / rounds, rel=1e-15)
