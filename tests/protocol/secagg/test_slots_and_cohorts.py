"""The vote vector's slots (candidates sorted by their bytes, then other, then abstain) and the
cohort split (balanced sizes within the bounds, the threshold's floor, refusals)."""

import numpy as np
import pytest

from triehh_beam.protocol.secagg.cohorts import CohortPolicy, TooFewDevicesError
from triehh_beam.protocol.secagg.vectors import CandidateSlots, round_candidates


def test_slots_order_one_hot_and_counts():
    slots = CandidateSlots((("b",), ("a",), ("é",)))
    assert slots.candidates == (("a",), ("b",), ("é",))
    assert (slots.slot(("b",)), slots.slot(("z",)), slots.slot(None)) == (1, 3, 4)
    assert slots.one_hot(("é",)).tolist() == [0, 0, 1, 0, 0]
    assert slots.counts(np.array([3, 0, 1, 7, 2], dtype=np.uint32)) == {("a",): 3, ("é",): 1}
    with pytest.raises(ValueError, match="5"):
        slots.counts(np.zeros(4))


def test_round_candidates_extend_the_frontier_by_each_unit_and_the_end():
    slots = round_candidates([(b"0",), (b"1",)], [b"0", b"1"], b"")
    assert slots.candidates == ((b"0", b""), (b"0", b"0"), (b"0", b"1"), (b"1", b""), (b"1", b"0"), (b"1", b"1"))
    assert slots.length == 8


@pytest.mark.parametrize("candidates", [(), (("a",), ("a",))])
def test_bad_slots_are_refused(candidates):
    with pytest.raises(ValueError):
        CandidateSlots(candidates)


@pytest.mark.parametrize("total", [10, 11, 499, 500, 501, 999, 1000, 1001, 2345])
def test_split_is_balanced_and_within_bounds(total):
    policy = CohortPolicy(max_size=500, min_size=10)
    cohorts = policy.split(list(range(total)))
    sizes = [len(c) for c in cohorts]
    assert sum(sizes) == total and [m for c in cohorts for m in c] == list(range(total))
    assert len(cohorts) == -(-total // 500) and max(sizes) - min(sizes) <= 1
    assert all(10 <= s <= 500 for s in sizes)


def test_threshold_is_a_majority_with_a_floor():
    policy = CohortPolicy(max_size=100, min_size=10, fraction=2 / 3)
    assert [policy.threshold(n) for n in (10, 12, 15, 30, 99, 100)] == [10, 10, 10, 20, 66, 67]
    assert policy.majority and not CohortPolicy(fraction=0.5).majority
    assert CohortPolicy(max_size=100, min_size=10, fraction=0.4).threshold(60) == 24


def test_too_few_devices_and_bad_policies_are_refused():
    with pytest.raises(TooFewDevicesError, match="9 selected devices"):
        CohortPolicy(max_size=100, min_size=10).split(list(range(9)))
    for kwargs in [dict(min_size=1), dict(max_size=10, min_size=6), dict(fraction=0), dict(fraction=1.1)]:
        with pytest.raises(ValueError):
            CohortPolicy(**kwargs)
