"""L rounds composed (docs/protocol.md §2, "Exact accounting"): basic composition, and the PLD of
the dominating pair against Kairouz, Oh and Viswanath's optimal composition theorem."""

import itertools
import math

import pytest

from triehh_beam.protocol.composition import compose_rounds


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
