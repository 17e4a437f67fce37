"""The pure count-and-prune core: merges in any order, keeps exactly the prefixes with at least
theta votes, and lets no count out."""

import collections
import itertools
import random

import pytest

from triehh_beam.protocol.rounds.counting import PrefixCounter


def _accumulate(core, votes):
    acc = core.create()
    for vote in votes:
        acc = core.add(acc, vote)
    return acc


def test_merge_order_and_grouping_do_not_change_what_is_kept():
    rng = random.Random(11)
    votes = [(rng.choice("abcde"), rng.choice("xyz")) for _ in range(200)]
    core = PrefixCounter(theta=9)
    parts = [votes[i::5] for i in range(5)]
    accumulators = [_accumulate(core, part) for part in parts]
    expected = core.extract_kept(_accumulate(core, votes))
    truth = collections.Counter(votes)
    assert expected == sorted(p for p, c in truth.items() if c >= 9)
    assert 0 < len(expected) < len(truth)  # the threshold both keeps and drops here
    for order in itertools.permutations(range(5)):
        assert core.extract_kept(core.merge([accumulators[i] for i in order])) == expected
    # merging merged accumulators (a combiner tree) gives the same
    left = core.merge(accumulators[:2])
    right = core.merge(accumulators[2:])
    assert core.extract_kept(core.merge([right, left])) == expected


def test_threshold_is_inclusive_and_output_has_no_counts():
    core = PrefixCounter(theta=3)
    acc = _accumulate(core, [("a",)] * 3 + [("b",)] * 2 + [("c",)] * 7)
    assert core.extract_kept(acc) == [("a",), ("c",)]
    assert all(isinstance(p, tuple) and all(isinstance(u, str) for u in p) for p in core.extract_kept(acc))


def test_merge_does_not_modify_its_inputs_and_handles_empty():
    core = PrefixCounter(theta=1)
    first = _accumulate(core, [("a",)])
    second = _accumulate(core, [("a",), ("b",)])
    merged = core.merge([first, second])
    assert merged == {("a",): 2, ("b",): 1}
    assert first == {("a",): 1}
    assert core.merge([]) == {}
    assert core.extract_kept(core.create()) == []


@pytest.mark.parametrize("theta", [0, -1, 2.0, True, "3", None])
def test_theta_must_be_a_positive_integer(theta):
    with pytest.raises(ValueError, match="theta must be an integer >= 1"):
        PrefixCounter(theta)
