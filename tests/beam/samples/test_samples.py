"""The sample artefact's format round-trips exactly, and the bottom-m of the pass is the m smallest
distinct (rank, user) pairs (ties between users broken by their id bytes) in any merge order."""

import itertools

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to

from tests.pipeline_factory import new_pipeline
from triehh_beam.beam.samples import sample_pass, sample_tables, samples
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind

SEQUENCES = {
    True: [("a", "é", ""), ("日本",), ("$",), ("a", "b")],  # text units, terminated or not
    False: [(b"\x00", b""), (b"\x01\x02", b"\x00\x00"), (b"0", b"1", b""), (b"",)],
}


@pytest.mark.parametrize("text_units", [True, False])
def test_sequences_round_trip_through_their_stored_bytes(text_units):
    stored = [samples.sequence_to_bytes(s) for s in SEQUENCES[text_units]]
    assert len(set(stored)) == len(stored)
    assert samples.sequences_from_bytes(stored, text_units) == SEQUENCES[text_units]


def _table(text_units, round_index=2, shard=3):
    sequences = sorted(SEQUENCES[text_units][:3])
    stored = pa.array([samples.sequence_to_bytes(s) for s in sequences], pa.binary())
    # users: [s0 x2, s2 x5], [] (nothing encodable), [s1 x1]
    return samples.sample_table(
        np.array([0.25, 0.5, 0.999]), np.array([0, 2, 2, 3]), stored.take(pa.array([0, 2, 1])),
        np.array([2, 5, 1]), text_units, round_index, shard,
    ), sequences


@pytest.mark.parametrize("text_units", [True, False])
def test_a_sample_table_round_trips_through_a_file_and_reads_as_a_sequence_table(tmp_path, text_units):
    table, sequences = _table(text_units)
    path = samples.part_path(str(tmp_path), 2, 3)
    samples.write_sample_table(path, table)
    assert path.endswith("round-0002/part-00003.parquet")
    back = samples.read_sample_table(path)
    assert back.equals(table) and back.schema.metadata == table.schema.metadata
    assert samples.table_round_and_shard(back) == (2, 3)
    users, uniforms = samples.sequence_table(back)
    assert uniforms.tolist() == [0.25, 0.5, 0.999]
    assert users.weighted(0) == ((sequences[0], 2), (sequences[2], 5))
    assert users.weighted(1) == ()
    assert users.weighted(2) == ((sequences[1], 1),)


def test_read_refuses_a_file_that_is_not_a_sample_table(tmp_path):
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"choice": [0.5]}), other)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet")
    for path in (other, garbage):
        with pytest.raises(samples.SampleFormatError, match=str(path)):
            samples.read_sample_table(str(path))


def test_write_and_read_sample_tables_in_pipelines(tmp_path):
    tables = [_table(True, round_index=1, shard=s)[0] for s in range(3)] + [_table(True, round_index=2, shard=0)[0]]
    with new_pipeline() as p:
        written = p | beam.Create([(samples.table_round_and_shard(t)[0], t) for t in tables]) | samples.WriteSampleTables(str(tmp_path))
        assert_that(written | beam.Keys(), equal_to([1, 1, 1, 2]))
    with new_pipeline() as p:
        read = p | samples.ReadSampleTables(str(tmp_path), 1) | beam.Map(samples.table_round_and_shard)
        assert_that(read, equal_to([(1, 0), (1, 1), (1, 2)]))


# ---- the bottom-m of the pass ------------------------------------------------------------------


def _pairs_batch(ranks, users):
    return pa.record_batch([pa.array(ranks, pa.uint64()), pa.array(users, pa.binary())], names=["rank", "user_id"])


def test_the_bottom_m_combine_is_the_m_smallest_distinct_pairs_in_any_merge_order():
    rng = np.random.default_rng(3)
    # Few distinct ranks: many users share one (the 2**-64 event made common), and every user
    # repeats its rank (many records).
    users = [f"user{i}".encode() for i in range(200)]
    rank_of = {u: int(rng.integers(0, 40)) * (2**58) for u in users}
    records = [users[i] for i in rng.integers(0, 200, size=1500)]
    ranks = [rank_of[u] for u in records]
    for m in (1, 7, 50, 199, 200, 500):
        expected = sorted(set(zip(ranks, records)))[:m]  # the rule, written out
        combine = sample_pass.BottomMCombineFn(m)
        parts = []
        for i in range(0, 1500, 400):
            accumulator = combine.create_accumulator()
            accumulator = combine.add_input(accumulator, _pairs_batch(ranks[i : i + 400], records[i : i + 400]))
            parts.append(accumulator)
        for order in itertools.permutations(parts):
            largest, count = combine.extract_output(combine.merge_accumulators(list(order)))
            assert count == len(expected)
            assert largest == expected[-1]


def test_keep_sampled_keeps_exactly_the_pairs_at_or_below_the_threshold():
    rank = 5 * 2**60
    batch = pa.record_batch(
        [pa.array([b"a", b"b", b"c", b"b", b"z"], pa.binary()), pa.array(["x"] * 5), pa.array([1] * 5, pa.int64()),
         pa.array([rank - 1, rank, rank, rank, rank + 1], pa.uint64())],
        names=["user_id", "item", "count", "rank"],
    )
    threshold = ((rank, b"b"), 3)
    kept = list(sample_pass.sampled_shards((4, batch), threshold, required=None, shards=2))
    users = sorted(u for _, part in kept for u in part.column("user_id").to_pylist())
    assert users == [b"a", b"b", b"b"]  # c ties b's rank but sorts after it; z ranks above
    assert {key[0] for key, _ in kept} == {4}
    assert list(sample_pass.sampled_shards((3, batch), (None, 0), None, 2)) == []  # no threshold: nothing
    assert list(sample_pass.sampled_shards((4, batch), threshold, required=4, shards=2)) == []  # short: nothing


def test_items_encode_once_per_distinct_item_with_the_per_record_counters():
    encoder = ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=4, tokenize=True)
    sequences, too_long, unencodable = sample_tables.encode_distinct(
        ["ab ab", "abcdefg", "", "a toolong"], encoder, truncate=False
    )
    assert sequences == [[("a", "b", ""), ("a", "b", "")], [], [], [("a", "")]]
    assert too_long.tolist() == [0, 1, 0, 1]
    assert unencodable.tolist() == [0, 0, 1, 0]
