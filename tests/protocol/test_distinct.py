"""``protocol.distinct``: the sort-based stand-ins for ``np.unique`` give exactly its results, on
integers of every width with many repeats, on sorted runs (a combiner's concatenated parts) and on
empty arrays."""

from __future__ import annotations

import numpy as np
import pytest

from triehh_beam.protocol.distinct import distinct, distinct_counts, union
from triehh_beam.protocol.randomness.bottom_m import PackedIds


@pytest.mark.parametrize("dtype", [np.uint64, np.int64, np.int32, np.uint8])
def test_distinct_and_counts_equal_numpy_unique(dtype):
    rng = np.random.default_rng(3)
    high = min(np.iinfo(dtype).max, 2**40)
    for values in (rng.integers(0, high, 5000, dtype=np.int64).astype(dtype),
                   rng.integers(0, 50, 5000).astype(dtype),
                   np.zeros(0, dtype=dtype)):
        assert np.array_equal(distinct(values), np.unique(values))
        got, counts = distinct_counts(values)
        want, want_counts = np.unique(values, return_counts=True)
        assert np.array_equal(got, want) and np.array_equal(counts, want_counts)


def test_union_of_sorted_runs_equals_union1d():
    rng = np.random.default_rng(4)
    a = np.unique(rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64))
    b = np.unique(np.concatenate([a[::3], rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64)]))
    assert np.array_equal(union(a, b), np.union1d(a, b))


def test_packed_ids_take_and_join_keep_every_id():
    ids = [b"", b"a", b"\x00\xff", b"user-42", "\u00e9t\u00e9".encode()]
    packed = PackedIds.of(ids)
    assert packed.to_list() == ids and len(packed) == 5
    rows = np.array([4, 0, 2, 2], dtype=np.int64)
    assert packed.take(rows).to_list() == [ids[i] for i in rows]
    tail = packed.take(np.array([1, 3]))
    assert PackedIds.join([packed, tail]).to_list() == ids + [ids[1], ids[3]]
    assert PackedIds.join([tail, packed.take(np.array([4]))]).take(np.array([2, 0])).to_list() == [ids[4], ids[1]]


def test_in_place_gives_the_same_values_sorting_the_array_given():
    values = np.random.default_rng(3).integers(0, 50, size=400).astype(np.uint64)
    expected = np.unique(values)
    given = values.copy()
    assert np.array_equal(distinct(given, in_place=True), expected)
    assert np.array_equal(given, np.sort(values))  # sorted where it stood, no copy made
