"""A TrieHH window's guarantee holds for every n up to m^2 (phantoms below the declared N; from N to
m^2 Theorem 1 at the window's n, with a smaller epsilon); a window with more users has none, and
every window's published document says so alike, whatever its n: what is published never
depends on which side of m^2 a window fell. The private report says which it was. (Before: a
window of 4,500 users for a plan of N = 1,000, m = 39 was published claiming (3.954, 3.15e-7);
that plan is now refused outright by the crowding guard, and this test uses N = 600, m = 64.)"""

import json

import numpy as np

from tests.windowed_jobs import HOUR, T0, hour_batches, run_windows, windowed_config
from triehh_beam.beam.windows.windows import rfc3339
from triehh_beam.job.release.planning import InfeasiblePlanError, plan_for_census, window_coverage
from triehh_beam.job.windows import windowed
from triehh_beam.protocol.planning import planner


def _one_letter_population(users: int, prefix: str) -> dict:
    rng = np.random.default_rng(users)
    letters = rng.choice(list("abcde"), size=users, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    return {f"{prefix}{i}": [str(letter)] for i, letter in enumerate(letters)}


def test_the_issues_window_plan_is_refused_by_the_crowding_guard(tmp_path):
    config = windowed_config(tmp_path, population=1000, epsilon=4.0, delta=1e-6, max_length=8)
    try:
        windowed.WindowedJob.check(config)
    except InfeasiblePlanError as refused:
        assert "crowding guard fails" in str(refused)
    else:
        raise AssertionError("N = 1,000, theta = 10, m = 39 was planned")


def test_a_window_above_m_squared_is_published_alike_and_claims_nothing_it_lacks(tmp_path):
    config = windowed_config(tmp_path, population=600, epsilon=4.0, delta=1e-4, max_length=2)
    plan = plan_for_census(config, 600)
    assert (plan.theta, plan.batch_size) == (8, 64) and window_coverage(plan) == 4096
    assert planner.plan(600, 4.0, 1e-4, 2).feasible
    rng = np.random.default_rng(38)
    small, large = _one_letter_population(600, "s"), _one_letter_population(4500, "l")
    job = run_windows(config, hour_batches(small, T0, rng) + hour_batches(large, T0 + HOUR, rng))
    documents = [json.loads((tmp_path / "out" / windowed.window_dir_name(s) / "heavy_hitters.json").read_text())
                 for s in (T0, T0 + HOUR)]
    # What a window publishes about its guarantee is the same on both sides of m^2 ...
    assert documents[0]["privacy"] == documents[1]["privacy"]
    assert documents[0]["window"]["planned"] == documents[1]["window"]["planned"]
    # ... and says where it holds and that above it there is none.
    planned = documents[0]["window"]["planned"]
    assert "at most 4,096 users" in planned and "a window with more has none" in planned
    reports = {r["window_start"]: r for r in windowed.read_window_reports(job)}
    flags = [reports[w].get("above_guaranteed_users") for w in sorted(reports)]
    assert flags == [False, True]  # private: the operator's report only
    assert "above_guaranteed_users" not in json.dumps(documents)
    # created_at is the window's close in event time, not the wall time after its census.
    assert [d["created_at"] for d in documents] == [rfc3339(job.windows.closes_at(s)) for s in (T0, T0 + HOUR)]
