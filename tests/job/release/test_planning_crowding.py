"""The job's TrieHH plans go through the crowding guard: fixed --theta/--batch-size that
crowding refutes are refused (or, with --allow-no-guarantee, run with no guarantee), and a plan
for a public --population is refused before any record is read."""

import pytest

from triehh_beam.job.release.planning import InfeasiblePlanError, check_before_census, plan_for
from triehh_beam.job.settings.config import DiscoveryConfig


def _config(tmp_path, **fields):
    values = dict(input_pattern=str(tmp_path / "nothing-here-*.jsonl"), output_dir=str(tmp_path / "out"),
                  epsilon=4.0, delta=0.02, max_length=2, protocol="triehh")
    values.update(fields)
    return DiscoveryConfig(**values)


def test_fixed_values_that_crowding_refutes_are_refused(tmp_path):
    # n = 36, theta = 5, m = 6: Theorem 1's conditions hold and it claims (3.58, 0.0125) for L = 2,
    # within the target; one more user empties round 1 with probability 0.0225.
    config = _config(tmp_path, theta=5, batch_size=6)
    with pytest.raises(InfeasiblePlanError, match="crowding guard fails.*--protocol triehh\\+\\+"):
        plan_for(config, 36)
    plan = plan_for(_config(tmp_path, theta=5, batch_size=6, allow_no_guarantee=True), 36)
    assert plan.no_guarantee and (plan.theta, plan.batch_size) == (5, 6)


def test_fixed_values_far_from_crowding_keep_theorem1(tmp_path):
    plan = plan_for(_config(tmp_path, theta=12, batch_size=3000, epsilon=4.0, delta=1e-8, max_length=4), 100_000)
    assert not plan.no_guarantee and plan.delta == pytest.approx(2.32e-9, rel=1e-3)


def test_a_public_population_is_planned_before_any_record_is_read(tmp_path):
    # The review's first plan: n = 100, epsilon = 4, delta = 1e-4, L = 2 (theta = 8, m = 10).
    config = _config(tmp_path, population=100, delta=1e-4)
    with pytest.raises(InfeasiblePlanError, match="crowding guard fails"):
        check_before_census(config)  # the input pattern matches no file: nothing is read
    check_before_census(_config(tmp_path, population=100_000, delta=1e-8))
