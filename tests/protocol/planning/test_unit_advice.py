"""Unit-size advice: every figure of a row against the planner functions it composes (never a
hard-coded result), L against the item encoder, the recommendation rule on constructed rows, the
infeasible rows with their planners' reasons, and discover's advice (its decision re-derived
from the rows, and its public line free of n)."""

import math

import pytest

from triehh_beam.protocol.accounting import sample_threshold
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.planning import planner, utility
from triehh_beam.protocol.planning import unit_advice as ua
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold


@pytest.mark.parametrize("characters", [1, 2, 3, 7, 9, 12])
@pytest.mark.parametrize("unit_size", [1, 2, 3, 4])
def test_max_length_is_what_the_encoder_makes_of_the_longest_item(characters, unit_size):
    encoder = ItemEncoder(kind=ItemKind.TEXT, unit_size=unit_size, max_length=characters + 1)
    assert ua.max_length_for(characters, unit_size) == len(encoder.encode("x" * characters))


@pytest.mark.parametrize("unit_size", [1, 3, 9])
@pytest.mark.parametrize("n, epsilon, delta, share", [(100_000, 4, 1e-8, 1.0),
                                                      (1_000_000, 2, 1e-12, 0.5)])
def test_a_triehh_row_is_the_planner_and_proposition_1(unit_size, n, epsilon, delta, share):
    row = ua.option("triehh", unit_size, 9, epsilon, delta, n, share=share)
    length = math.ceil(9 / unit_size) + 1
    plan = planner.plan(n, epsilon, delta, length)
    assert plan.feasible and row.feasible and row.reason is None
    assert (row.max_length, row.unit_size, row.reveals) == (length, unit_size, unit_size)
    assert row.whole_item == (unit_size == 9)
    assert (row.threshold, row.batch_size, row.sampling_rate) == (plan.theta, plan.batch_size,
                                                                 plan.batch_size / n)
    assert (row.epsilon, row.delta) == (plan.epsilon, plan.delta)
    for p in ua.PROBABILITIES:
        need = utility.min_frequency(p, n, plan.batch_size, plan.theta, length, share)
        assert row.holders_for(p) == need.count
        assert row.fraction_for(p) == need.count / n
    assert row.holders_for(0.5) < row.holders_for(0.9) < row.holders_for(0.99)


@pytest.mark.parametrize("unit_size", [2, 4])
def test_a_triehh_plus_plus_row_is_its_planner_and_min_holders(unit_size):
    row = ua.option("triehh++", unit_size, 9, 4, 1e-8, 100_000)
    length = math.ceil(9 / unit_size) + 1
    plan = plan_sample_threshold(4, 1e-8, length, objective=0.9)
    assert row.feasible and plan.feasible
    assert (row.max_length, row.threshold, row.sampling_rate, row.batch_size) == (
        length, plan.tau, plan.sampling_probability, None)
    assert (row.epsilon, row.delta) == (plan.epsilon, plan.delta)
    for p in ua.PROBABILITIES:
        assert row.holders_for(p) == sample_threshold.min_holders(
            p, plan.sampling_probability, plan.tau, length)
    # The planner minimises the 90% holders: the row's 90% is the planner's own figure.
    assert row.holders_for(0.9) == plan.holders


def test_without_n_triehh_plus_plus_gives_holders_and_triehh_says_why_not():
    advice = ua.compare_units(4, 1e-8, 9, None)
    for row in advice.options:
        if row.protocol == "triehh":
            assert not row.feasible and "depends on the population" in row.reason
        elif row.feasible:
            assert row.holders_for(0.9) is not None and row.fraction_for(0.9) is None
    assert advice.recommendation("triehh").option is None
    assert advice.recommendation("triehh++").option is not None
    with pytest.raises(ValueError, match="needs the population"):
        ua.compare_units(4, 1e-8, 9, None, find_frequency=0.01)


def test_infeasible_rows_carry_their_planners_reasons():
    # n = 10,000 at epsilon = 1, delta = 1e-8: Theorem 1 refuses L = 10 (theta > THETACEIL).
    triehh = ua.option("triehh", 1, 9, 1, 1e-8, 10_000)
    assert not triehh.feasible and triehh.holders_for(0.9) is None
    assert triehh.reason == planner.plan(10_000, 1, 1e-8, 10).reason
    # epsilon = 4 over the whole item's L = 2 rounds is eps_r = 2 > 1: outside the paper's bound,
    # accounted exactly (the default) it is a plan.
    whole = ua.option("triehh++", 9, 9, 4, 1e-8, 100_000)
    assert whole.whole_item and whole.max_length == 2 and whole.feasible
    assert whole.threshold == plan_sample_threshold(4, 1e-8, 2).tau


def test_the_candidates_are_units_below_the_item_then_the_whole_item():
    rows = ua.compare_units(4, 1e-8, 9, 100_000, protocols=("triehh",)).options
    assert [(r.unit_size, r.max_length, r.whole_item) for r in rows] == [
        (1, 10, False), (2, 6, False), (3, 4, False), (4, 4, False), (9, 2, True)]
    # Items of 3 characters: unit 3 and unit 4 are the whole item; it is listed once.
    rows = ua.compare_units(4, 1e-8, 3, 100_000, protocols=("triehh",)).options
    assert [(r.unit_size, r.max_length, r.reveals, r.whole_item) for r in rows] == [
        (1, 4, 1, False), (2, 3, 2, False), (3, 2, 3, True)]


def _row(unit_size, holders90, *, n=10_000, feasible=True, protocol="triehh", whole=False):
    if not feasible:
        return ua.UnitOption(protocol, unit_size, whole, 2, unit_size, False, reason="refused", n=n)
    return ua.UnitOption(protocol, unit_size, whole, 2, unit_size, True, threshold=10,
                         holders=(None, holders90, None), n=n)


def test_the_rule_picks_the_smallest_unit_that_finds_the_target():
    rows = [_row(1, 900), _row(2, 500), _row(3, 300), _row(9, 200, whole=True)]
    # ceil(0.05 * 10,000) = 500: units 2, 3 and the whole item find it; 2 reveals least.
    chosen = ua.recommend(rows, "triehh", 0.05)
    assert chosen.option.unit_size == 2 and chosen.target_count == 500
    assert "smallest unit size" in chosen.explanation and "500" in chosen.explanation
    # 4.99% of 10,000 is 499 holders: unit 2 needs 500, so only 3 and the whole item qualify.
    assert ua.recommend(rows, "triehh", 0.0499).option.unit_size == 3
    assert ua.recommend(rows, "triehh", 0.09).option.unit_size == 1
    # Without a frequency: the fewest holders.
    assert ua.recommend(rows, "triehh").option.unit_size == 9


def test_nothing_qualifies_names_the_closest():
    rows = [_row(1, 900), _row(3, 300), _row(9, 250, whole=True)]
    result = ua.recommend(rows, "triehh", 0.01)  # 100 holders
    assert result.option is None and result.closest.unit_size == 9
    assert "no unit size finds it" in result.explanation and "250" in result.explanation


def test_the_rule_skips_infeasible_and_unreachable_rows_and_other_protocols():
    rows = [_row(1, None, feasible=False), _row(2, None), _row(3, 400),
            _row(4, 100, protocol="triehh++")]
    assert ua.recommend(rows, "triehh", 0.5).option.unit_size == 3
    assert ua.recommend(rows, "triehh").option.unit_size == 3
    assert ua.recommend([_row(1, None, feasible=False)], "triehh").option is None
    # A tie goes to the smaller unit.
    assert ua.recommend([_row(4, 300), _row(3, 300)], "triehh").option.unit_size == 3


@pytest.mark.parametrize("bad", [0, -0.1, 1.5])
def test_a_frequency_outside_0_1_is_refused(bad):
    with pytest.raises(ValueError, match="find_frequency"):
        ua.recommend([_row(1, 900)], "triehh", bad)


def test_the_recommendation_is_re_derived_from_the_rows():
    advice = ua.compare_units(4, 1e-8, 9, 100_000, find_frequency=0.003)
    for rec in advice.recommendations:
        rows = [o for o in advice.options if o.protocol == rec.protocol]
        qualifying = [o.unit_size for o in rows
                      if o.feasible and o.holders_for(0.9) is not None and o.holders_for(0.9) <= 300]
        assert rec.target_count == 300
        assert rec.option.unit_size == min(qualifying)


def _advice_by_hand(n, epsilon, delta, unit_size, max_length):
    """discover's rule written out: the smallest unit whose 90% holders are at most the user's
    divided by FAR, if it is not the user's."""
    c = (max_length - 1) * unit_size
    mine = ua.option("triehh", unit_size, c, epsilon, delta, n)
    sizes = sorted({k for k in ua.UNIT_SIZES if k < c} | {c, unit_size})
    for k in sizes:
        row = ua.option("triehh", k, c, epsilon, delta, n)
        if row.feasible and row.holders_for(0.9) is not None and (
                ua.FAR * row.holders_for(0.9) <= mine.holders_for(0.9)):
            return None if k == unit_size else row
    return None


@pytest.mark.parametrize("n, epsilon, delta, unit_size, max_length", [
    (100_000, 4, 1e-8, 1, 10), (100_000, 4, 1e-8, 3, 4), (200_000, 4, 1e-10, 1, 10),
    (1_000_000, 1, 1e-12, 2, 6), (100_000, 4, 1e-8, 9, 2),
])
def test_discover_advises_exactly_when_the_rule_finds_a_unit_far_better(n, epsilon, delta,
                                                                        unit_size, max_length):
    advice = ua.discover_advice(n, epsilon, delta, unit_size, max_length)
    expected = _advice_by_hand(n, epsilon, delta, unit_size, max_length)
    if expected is None:
        assert advice is None
        return
    assert advice.recommended == expected
    assert advice.yours.unit_size == unit_size and advice.yours.max_length == max_length
    assert expected.holders_for(0.9) * ua.FAR <= advice.yours.holders_for(0.9)
    assert advice.figures()["holders"] == expected.holders_for(0.9)
    line = advice.line(with_figures=True)
    assert line.startswith(f"advice: {expected.flags} finds items held by "
                           f"{ua.percent(expected.fraction_for(0.9))} of users at 90%")
    assert ua.percent(advice.yours.fraction_for(0.9)) in line


def test_the_default_unit_is_advised_against_at_the_issues_setting():
    # The issue's setting (100,000 users, epsilon = 4, delta = 1e-8, items of 9 characters):
    # unit 1 needs more than twice the holders of unit 3.
    advice = ua.discover_advice(100_000, 4, 1e-8, 1, 10)
    assert advice is not None and advice.recommended.unit_size == 3
    assert advice.recommended.holders_for(0.9) * 2 <= advice.yours.holders_for(0.9)


def test_the_public_line_does_not_depend_on_n():
    lines = {ua.discover_advice(n, 4, 1e-10, 1, 10).line(with_figures=False)
             for n in (100_000, 1_000_000, 10_000_000)}
    assert len(lines) == 1 and "held by" not in lines.pop()


def test_an_infeasible_choice_is_far_from_a_feasible_one():
    # n = 1,000, epsilon = 4, delta = 1e-10: L = 10 is infeasible, the whole item (L = 2) is not.
    advice = ua.discover_advice(1_000, 4, 1e-10, 1, 10)
    assert not advice.yours.feasible
    assert advice.recommended.feasible
    assert "infeasible" in advice.line(with_figures=True)


def test_no_advice_for_what_the_planners_do_not_plan():
    assert ua.discover_advice(100_000, 4, 1e-8, 1, 10, rule="fixed") is None
    assert ua.discover_advice(100_000, 4, 1e-8, 1, 10, protocol="pem") is None


def test_advice_for_whole_items_says_so():
    # n = 1,000, epsilon = 4, delta = 1e-10: the advice is the whole item (--unit-size 9, the
    # items' 9 characters, --max-length 2); the flags alone would not say that means whole items.
    advice = ua.discover_advice(1_000, 4, 1e-10, 1, 10)
    assert advice.recommended.whole_item
    for with_figures in (False, True):
        line = advice.line(with_figures=with_figures)
        assert f"--max-length {advice.recommended.max_length} (one unit per item: whole items)" in line, line
