"""A round's combine per prefix (``prefix_combine.PruneByPrefix``): tables' partial votes split into
groups by a hash of the prefix that every process computes alike, each group merged and pruned on
its own, give exactly the prefixes whose votes over all tables reach theta (an independent sum
over every partial), whatever the number of groups, with the users once; each merge holds one
group's prefixes (``largest_rows_held.prefix_merge``), so a round with more distinct prefixes than
the worker budget still runs within it; no input gives nothing kept (and no merge reports rows held),
and votes for no prefix a merge that reports holding none."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from tests.pipeline_factory import new_pipeline
from triehh_beam.beam.rounds import prefix_combine
from triehh_beam.beam.rounds.prefix_combine import (PruneByPrefix, prefix_group, prefix_groups,
                                                    split_by_prefix)

THETA = 5
PREFIXES = [tuple(f"w{i}") for i in range(600)]
BYTE_PREFIXES = [(bytes([i % 256]), bytes([i // 256])) for i in range(300)]


def _partials(seed: int, tables: int = 20):
    """``tables`` partial votes over PREFIXES: few votes each, so most prefixes reach theta only
    summed over tables; (partials, an independent per-prefix total, users)."""
    rng = np.random.default_rng(seed)
    partials, total, users = [], collections.Counter(), 0
    for _ in range(tables):
        chosen = rng.choice(len(PREFIXES), size=int(rng.integers(50, 200)), replace=False)
        counts = {PREFIXES[i]: int(rng.integers(1, THETA)) for i in chosen}  # below theta in any one table
        table_users = sum(counts.values()) + int(rng.integers(0, 10))  # some users vote for nothing
        partials.append((counts, table_users))
        total.update(counts)
        users += table_users
    return partials, total, users


def _prune(partials, groups, expected):
    """Prunes ``partials`` in ``groups`` groups; asserts inside the job that it gives exactly
    ``[expected]``; returns the most rows each kind of step held."""
    pipeline = new_pipeline()
    kept = (
        pipeline
        | beam.Create(partials, reshuffle=False)
        | beam.FlatMap(split_by_prefix, groups=groups)
        | PruneByPrefix(THETA, groups)
    )
    assert_that(kept, equal_to([expected]))
    result = pipeline.run()
    result.wait_until_finish()
    query = result.metrics().query(MetricsFilter().with_namespace("triehh"))
    return {d.key.metric.name: d.committed.max for d in query["distributions"] if d.committed is not None}


def test_a_prefix_has_the_same_group_in_every_process():
    groups = 7
    here = [prefix_group(p, groups) for p in PREFIXES + BYTE_PREFIXES]
    code = ("import sys; from tests.beam.rounds.test_prefix_combine import PREFIXES, BYTE_PREFIXES; "
            "from triehh_beam.beam.rounds.prefix_combine import prefix_group; "
            "print(','.join(str(prefix_group(p, 7)) for p in PREFIXES + BYTE_PREFIXES))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # hash() of str and bytes differs from ours
    there = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert [int(g) for g in there.stdout.strip().split(",")] == here
    # Spread: 900 prefixes over 7 groups, each Binomial(900, 1/7) (mean 128.6, sd 10.5): within 4 sd.
    sizes = collections.Counter(here)
    assert sorted(sizes) == list(range(groups)) and all(86 <= n <= 171 for n in sizes.values())
    assert all(prefix_group(p, 1) == 0 for p in PREFIXES)


def test_split_by_prefix_partitions_a_tables_votes_and_carries_its_users_once():
    [(counts, users)], _, _ = _partials(1, tables=1)
    split = list(split_by_prefix((counts, users), 5))
    assert [g for g, _ in split].count(0) == 1 and len({g for g, _ in split}) == len(split)
    merged = {}
    for group, (group_counts, group_users) in split:
        assert all(prefix_group(p, 5) == group for p in group_counts)
        assert group_users == (users if group == 0 else 0)
        merged.update(group_counts)
    assert merged == counts
    # A table without votes still carries its users in group 0.
    assert list(split_by_prefix(({}, 9), 5)) == [(0, ({}, 9))]


@pytest.mark.parametrize("users, budget, expected", [
    (0, 64, 1), (16, 64, 1), (17, 64, 2), (190, 64, 12), (190, 256, 3), (1_735_157, 1 << 22, 2),
    (149_854_524, 1 << 22, 143),
])
def test_groups_keep_a_groups_votes_within_a_quarter_of_the_budget(users, budget, expected):
    assert prefix_groups(users, budget) == expected
    assert users / expected <= budget // 4 or users <= budget // 4


@pytest.mark.parametrize("groups", [1, 4, 13])
def test_the_kept_prefixes_are_those_whose_summed_votes_reach_theta(groups):
    partials, total, users = _partials(37)
    expected = sorted(p for p, votes in total.items() if votes >= THETA)
    assert 0 < len(expected) < len(total)  # some prefixes pruned, some kept
    held = _prune(partials, groups, (expected, users))
    # Each merge held one group's prefixes: the largest group's distinct prefixes at most.
    largest_group = max(collections.Counter(prefix_group(p, groups) for p in total).values())
    assert held["rows_held.prefix_merge"] <= largest_group
    if groups == 1:
        assert held["rows_held.prefix_merge"] == len(total)
    else:  # a budget of a quarter of the round's prefixes is kept by splitting
        assert held["rows_held.prefix_merge"] < len(total) / (groups / 2)


def test_more_distinct_prefixes_than_the_budget_still_run_within_it():
    partials, total, users = _partials(38, tables=40)
    budget = 200
    assert len(total) > budget  # the round's distinct prefixes pass the budget
    groups = prefix_groups(sum(sum(c.values()) for c, _ in partials), budget)
    held = _prune(partials, groups, (sorted(p for p, votes in total.items() if votes >= THETA), users))
    assert held["rows_held.prefix_merge"] <= budget


@pytest.mark.parametrize("groups", [1, 3])
def test_no_votes_keep_nothing_and_no_merge_reports_rows_held(groups):
    assert "rows_held.prefix_merge" not in _prune([], groups, ([], 0))


@pytest.mark.parametrize("groups", [1, 3])
def test_a_merge_of_votes_for_no_prefix_reports_that_it_held_none(groups):
    # Tables whose every vote the frontier filtered (a round after one that kept nothing, as a
    # sampling pass's rounds after a short round 1): the merge ran and held no prefix, so it
    # reports 0 held, where no input at all reports nothing (above).
    held = _prune([({}, 30), ({}, 25)], groups, ([], 55))
    assert held["rows_held.prefix_merge"] == 0


def test_the_merge_is_the_same_in_any_order():
    partials, total, users = _partials(39, tables=6)
    fn = prefix_combine.MergeAndPruneCombineFn(THETA)
    one = fn.extract_output(fn.merge_accumulators(
        [fn.add_input(fn.create_accumulator(), p) for p in partials[::-1]]))
    accumulator = fn.create_accumulator()
    for p in partials:
        accumulator = fn.add_input(accumulator, p)
    assert fn.extract_output(accumulator) == one == (sorted(p for p, v in total.items() if v >= THETA), users)
