"""TestPipeline tests of the public round (``RunRound``) and the census, with their counters."""

import collections

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from tests.pipeline_factory import new_pipeline
from triehh_beam.beam import RunRound, transforms
from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness import sampling
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.counting import PrefixCounter
from triehh_beam.protocol.rounds.loop import RoundResult

SEED = bytes(range(32))


def _batch(rows):
    users, items, counts = zip(*rows) if rows else ((), (), ())
    return pa.record_batch(
        [
            pa.array([str(u).encode() for u in users], pa.binary()),
            pa.array(items, pa.string()),
            pa.array(counts, pa.int64()),
        ],
        names=["user_id", "item", "count"],
    )


def _batches(rows, size):
    return [_batch(rows[i : i + size]) for i in range(0, len(rows), size)]


def _run(build):
    """Runs a pipeline on the in-process runner; returns {counter name: value}."""
    pipeline = new_pipeline()
    build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    return {c.key.metric.name: c.committed for c in query["counters"]}


# ---- RunRound ----------------------------------------------------------------------------------


def test_rank_prefilter_bound_covers_the_mth_smallest_rank():
    # The m-th smallest of n uniform 64-bit ranks must fall below the bound; over 200 rounds
    # with a 1e-12 miss probability, a single miss would mean the bound is wrong.
    sampler = Sampler(SEED)
    n, m = 2000, 37
    bound = sampling.rank_prefilter_bound(n, m)
    users = [str(u) for u in range(n)]
    for round_index in range(1, 201):
        ranks = np.sort(sampler.ranks(round_index, users))
        assert ranks[m - 1] <= bound
    # ...and it is not vacuous: about m/n of the users (plus a few sigma) pass it.
    passing = np.mean([np.sum(sampler.ranks(r, users) <= bound) for r in range(1, 21)])
    assert m < passing < 4 * m
    assert sampling.rank_prefilter_bound(10, 10) == 2**64 - 1


def test_prefix_counter_merges_in_any_order():
    core = PrefixCounter(theta=2)
    rng = np.random.default_rng(7)
    votes = [(f"p{v}",) for v in rng.integers(0, 6, size=60)]
    parts = [votes[i::4] for i in range(4)]
    accumulators = []
    for part in parts:
        acc = core.create()
        for v in part:
            acc = core.add(acc, v)
        accumulators.append(acc)
    expected = core.extract_kept(core.merge(accumulators))
    for order in ([3, 1, 0, 2], [2, 3, 1, 0]):
        assert core.extract_kept(core.merge([accumulators[i] for i in order])) == expected
    truth = collections.Counter(votes)
    assert expected == sorted(p for p, c in truth.items() if c >= 2)


def test_run_round_one_of_three_users_with_threshold_one():
    sampler = Sampler(SEED)
    rows = [(1, "hello", 1), (2, "hey", 1), (3, "hi", 1)]

    def build(p):
        kept = p | beam.Create([_batch(rows)]) | RunRound(
            sampler, 2, theta=1, encoder=ItemEncoder(max_length=6), frontier=frozenset({("h",)}),
            sample_size=3, population=3,
        )
        assert_that(kept, equal_to([RoundResult(kept=(("h", "e"), ("h", "i")), users_sampled=3, users_required=3,
                                                  records_ranked=3)]))

    counters = _run(build)
    assert counters["round2.votes_cast"] == 3 and counters["round2.prefixes_kept"] == 2


def _round_on_50_users(population, expected):
    """Runs round 1 of 50 users (each its own word) for m = 5 and a stated population, checks
    its one result against ``expected``; returns the counters."""
    sampler = Sampler(SEED)
    rows = [(u, f"w{u}", 1) for u in range(50)]

    def build(p):
        result = p | beam.Create([_batch(rows)]) | RunRound(
            sampler, 1, theta=1, encoder=ItemEncoder(max_length=6), sample_size=5, population=population,
        )
        assert_that(result, equal_to([expected]))

    return _run(build)


def test_a_short_sample_is_a_value_with_nothing_kept():
    # A population of 10^9 stated for 50 users: the rank prefilter keeps fewer than m = 5 users.
    # The round still succeeds; its result says so, and nothing is computed from the short sample.
    sampler = Sampler(SEED)
    users = [str(u) for u in range(50)]
    passing = int(np.sum(sampler.ranks(1, users) <= sampling.rank_prefilter_bound(10**9, 5)))
    assert passing < 5
    counters = _round_on_50_users(10**9, RoundResult((), users_sampled=passing, users_required=5, records_ranked=50))
    assert counters.get("round1.votes_cast", 0) == 0 and counters.get("round1.users_sampled", 0) == 0
    assert RoundResult((), passing, 5).sample_short
    # Without the prefilter the same round draws its complete sample: five users, one vote each
    # (every word starts with "w").
    counters = _round_on_50_users(None, RoundResult((("w",),), users_sampled=5, users_required=None, records_ranked=50))
    assert counters["round1.votes_cast"] == 5


def test_type_hints_refuse_a_wrong_element_type_when_the_graph_is_built():
    pipeline = new_pipeline()
    with pytest.raises(Exception, match="type hint violation"):
        pipeline | beam.Create([1, 2, 3]) | RunRound(Sampler(SEED), 1, 1, ItemEncoder(max_length=3), sample_size=1)


def test_count_distinct_users_counts_users_not_records():
    sampler = Sampler(SEED)
    rows = [(u, "x", 1) for u in range(3000)] + [(u, "y", 1) for u in range(0, 3000, 3)]

    def build(p):
        n = p | beam.Create(_batches(rows, 700)) | transforms.CountDistinctUsers(sampler)
        assert_that(n, equal_to([3000]))

    _run(build)


def _unpacked(blob: bytes) -> bytes:
    import base64
    import bz2

    return bz2.decompress(base64.b64decode(blob))


def test_no_job_graph_carries_the_secret_seed():
    # Job graphs are pickled (and staged by managed runners): they must hold only the derived
    # keys of their own round. Every DoFn and CombineFn of a census and a round is pickled here
    # as Beam pickles it (compressed), decompressed, and searched for the seed.
    from apache_beam.internal import pickler
    from apache_beam.pipeline import PipelineVisitor

    seed = b"SEED-MUST-NOT-LEAK-0123456789abcdef"
    sampler = Sampler(seed)
    pipeline = new_pipeline()
    batches = pipeline | beam.Create([_batch([(1, "a", 1)])])
    batches | transforms.CountDistinctUsers(sampler)
    batches | RunRound(sampler, 2, 2, ItemEncoder(max_length=4), frozenset({("a",)}), sample_size=5, population=1)

    pickled = []

    class Collect(PipelineVisitor):
        def visit_transform(self, node):
            transform = node.transform
            if transform is None:
                return
            for attribute in ("fn", "_fn", "combine_fn"):
                if hasattr(transform, attribute):
                    pickled.append(_unpacked(pickler.dumps(getattr(transform, attribute))))
            pickled.append(_unpacked(pickler.dumps(transform.__dict__.get("_keys"))))

        def enter_composite_transform(self, node):
            self.visit_transform(node)

    pipeline.visit(Collect())
    assert len(pickled) > 10
    assert not any(seed in blob for blob in pickled)
    # ...while the derived keys do travel (the search would pass vacuously if nothing was pickled).
    assert any(b"PassKeys" in blob for blob in pickled)
    assert any(b"CensusKey" in blob for blob in pickled)


def test_run_round_counts_a_heavy_user_once_and_samples_the_bottom_m():
    # 50 users with one record each, and the user ranked first with 999 more: m = 5 users are
    # sampled (the heavy one among them, counted once), each voting for its own one-letter word.
    sampler = Sampler(SEED)
    heavy = sampler.sample(1, range(50), 1)[0]
    rows = [(u, chr(97 + u % 26), 1) for u in range(50)]
    rows += [(heavy.decode(), "zz", 1)] * 999
    sampled = sampler.sample(1, range(50), 5)
    words = {str(u).encode(): w for u, w, _ in rows[:50]}
    expected_votes = {(words[u],) for u in sampled if u != heavy}

    def build(p):
        result = p | beam.Create(_batches(rows, 100)) | RunRound(
            sampler, 1, theta=1, encoder=ItemEncoder(max_length=3), sample_size=5, population=50)
        assert_that(result | beam.Map(lambda r: (r.users_sampled, r.records_ranked, r.users_required)),
                    equal_to([(5, 1049, 5)]), label="sizes")
        assert_that(result | beam.Map(lambda r: set(r.kept) >= expected_votes), equal_to([True]), label="kept")

    counters = _run(build)
    assert counters["round1.users_sampled"] == 5 and counters["round1.votes_cast"] == 5


# ---- CountRows -----------------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [(3, 0, 5, 700), ()])
def test_count_rows_adds_every_batchs_rows_and_is_zero_for_no_batch(sizes):
    # An empty batch counts 0, and no batch at all still gives one element (0): the driver reads
    # it as a side input beside the census, so a job that read nothing must not lose it.
    batches = [_batch([(f"u{size}-{i}", "a", 1) for i in range(size)]) for size in sizes]
    with new_pipeline(test=True) as p:
        counted = (p | beam.Create(batches, reshuffle=False).with_output_types(pa.RecordBatch)
                   | transforms.CountRows())
        assert_that(counted, equal_to([sum(sizes)]))
