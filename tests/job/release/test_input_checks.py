"""The checks a census must pass before a job spends budget (job/release/input_checks.py): bad rows
against ``--max-bad-fraction`` (default 0.05) and users without a usable item against
``--max-unusable-fraction`` (default 0.5), with fixes planned by the planner. Hand-made censuses;
the plans quoted are compared with ``protocol.planning.planner`` at the same settings."""

import pytest

from triehh_beam.beam.census import NEVER, Census
from triehh_beam.job.release.input_checks import (BadInputError, UnusableItemsError, check_census,
                                                  unusable_fixes)
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.protocol.planning import planner


def _config(**overrides) -> DiscoveryConfig:
    fields = dict(input_pattern="records.jsonl", output_dir="out", epsilon=4.0, delta=1e-6, max_length=10)
    fields.update(overrides)
    return DiscoveryConfig(**{"protocol": "triehh", **fields})


def _counters(read, bad=0):
    return {"records_read": read, "records_malformed": bad}


FINE = Census(20_000, 20_000, {})


def test_a_job_refuses_more_than_five_percent_bad_rows_by_default():
    assert _config().max_bad_fraction == 0.05
    check_census(_config(), _counters(10_000, 500), FINE, 20_000)  # 5%: allowed
    with pytest.raises(BadInputError, match=r"5\.01% of the records are bad, more than --max-bad-fraction 0\.05"):
        check_census(_config(), _counters(10_000, 501), FINE, 20_000)
    # Overridable, and 1 disables it.
    check_census(_config(max_bad_fraction=0.5), _counters(10_000, 4_000), FINE, 20_000)
    check_census(_config(max_bad_fraction=1), _counters(10_000, 10_000), FINE, 20_000)


def test_the_bad_row_refusal_says_nothing_was_spent_and_how_to_see_or_pass_the_rows():
    with pytest.raises(BadInputError) as refused:
        check_census(_config(), _counters(30_000, 12_000), FINE, 20_000)
    message = str(refused.value)
    assert "no budget was spent" in message and "--dead-letter" in message and "--max-bad-fraction 1" in message


def test_users_without_a_usable_item_are_refused_past_the_threshold():
    assert _config().max_unusable_fraction == 0.5
    half = Census(20_000, 10_000, {30: 10_000})
    check_census(_config(), _counters(20_000), half, 20_000)  # exactly half: allowed
    one_more = Census(20_000, 9_999, {30: 10_001})
    with pytest.raises(UnusableItemsError, match=r"10,001 of 20,000 users \(50\.0%\) hold no usable item"):
        check_census(_config(), _counters(20_000), one_more, 20_000)
    check_census(_config(max_unusable_fraction=1), _counters(20_000), Census(20_000, 0, {30: 20_000}), 20_000)
    assert issubclass(UnusableItemsError, BadInputError)  # refused like bad input (exit code 2)


def _plan_phrase(n, max_length):
    plan = planner.plan(n, 4.0, 1e-6, max_length)
    return f"feasible: theta={plan.theta}, m={plan.batch_size:,} per round"


def test_the_fixes_are_the_smallest_settings_that_leave_at_most_5_percent_and_their_plans():
    # 20,000 users, none usable at L = 10 (9 characters): 15,000 have a shortest item of 12
    # characters, 4,000 of 20, 1,000 of 40. At most 5% (1,000) may stay unusable: 20 characters
    # must fit, so L = 21, or at L = 10 units of ceil(20 / 9) = 3 characters.
    census = Census(20_000, 0, {12: 15_000, 20: 4_000, 40: 1_000})
    fixes = unusable_fixes(_config(), census, 20_000)
    assert len(fixes) == 3
    truncate, longer, wider = fixes
    assert truncate.startswith("--truncate-long-items (") and "leaves none of the users" in truncate
    assert f"the plan is unchanged, {_plan_phrase(20_000, 10)}" in truncate
    assert longer.startswith("--max-length 21 (items of up to 20 characters; leaves 5.0% of the users")
    at_21 = planner.plan(20_000, 4.0, 1e-6, 21)
    assert (f"theta={at_21.theta}, m={at_21.batch_size:,}" in longer) == at_21.feasible
    assert wider.startswith("--unit-size 3 (units of 3 characters: items of up to 27 characters at L=10")
    assert _plan_phrase(20_000, 10) in wider


def test_an_infeasible_longer_length_is_said_so_with_the_epsilon_it_would_need():
    census = Census(20_000, 0, {78: 20_000})
    longer = [fix for fix in unusable_fixes(_config(), census, 20_000) if fix.startswith("--max-length")][0]
    assert longer.startswith("--max-length 79 ")
    alternative = [a for a in planner.plan(20_000, 4.0, 1e-6, 79).alternatives if a.kind == "raise_epsilon"][0]
    assert "infeasible at epsilon=4, delta=1e-06, L=79 for this population" in longer
    assert f"({alternative.description.split(' (')[0]})" in longer  # "raise epsilon to 5.82"


def test_items_that_cannot_be_encoded_have_no_length_fix():
    census = Census(1_000, 100, {NEVER: 900})
    with pytest.raises(UnusableItemsError, match="No length or unit setting makes their items usable"):
        check_census(_config(), _counters(1_000), census, 1_000)
    # With truncation on, only unencodable items are left to count.
    assert unusable_fixes(_config(truncate_long_items=True), census, 1_000) == []


def test_the_refusal_message_names_every_fix_and_what_nothing_was_spent():
    census = Census(20_000, 0, {60: 20_000})
    with pytest.raises(UnusableItemsError) as refused:
        check_census(_config(), _counters(20_000), census, 20_000)
    message = str(refused.value)
    for phrase in ("no round was run and no budget was spent", "--truncate-long-items", "--max-length 61",
                   "--unit-size 7", "--max-unusable-fraction 1 runs anyway", "20,000 hold only items longer than 9 characters"):
        assert phrase in message, phrase


def test_integer_items_get_no_unit_size_that_the_encoder_refuses():
    # 32-bit integers in units of 8 bits are 4 units: L = 3 fits none. L = 5 fits all.
    config = _config(item_kind="int", int_bits=32, unit_size=8, max_length=3)
    fixes = unusable_fixes(config, Census(100, 0, {32: 100}), 100)
    assert [fix.split(" (")[0] for fix in fixes] == ["--truncate-long-items", "--max-length 5", "--unit-size 16"]
