"""TestPipeline tests of each PTransform of a round, with their counters."""

import collections

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to

from triehh_beam.protocol import sampling
from triehh_beam.beam import transforms
from triehh_beam.protocol.counting import PrefixCounter
from triehh_beam.protocol.encoding import ItemEncoder
from triehh_beam.protocol.rounds import RoundResult
from triehh_beam.protocol.sampling import Sampler
from triehh_beam.protocol.vote import client_vote

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
    pipeline = beam.Pipeline(runner=FnApiRunner())
    build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    query = result.metrics().query(MetricsFilter().with_namespace(transforms.METRICS_NAMESPACE))
    return {c.key.metric.name: c.committed for c in query["counters"]}


# ---- SampleUsers ------------------------------------------------------------------------------


def _population(users, records_per_user):
    return [(u, f"w{u % 7}", 1) for u in range(users) for _ in range(records_per_user)]


@pytest.mark.parametrize("population_known", [True, False])
def test_sample_users_is_exactly_the_bottom_m_of_the_keyed_ranks(population_known):
    sampler = Sampler(SEED)
    rows = _population(users=500, records_per_user=3)
    expected_users = sampler.sample(4, range(500), 40)
    expected = [(u, f"w{int(u) % 7}", 1) for u in expected_users for _ in range(3)]

    def build(p):
        sampled = (
            p
            | beam.Create(_batches(rows, 128))
            | transforms.SampleUsers(sampler, 4, 40, population=500 if population_known else None)
        )
        assert_that(sampled, equal_to(expected))

    counters = _run(build)
    assert counters["records_ranked"] == 1500


def test_sample_users_keeps_every_record_of_a_heavy_user_and_counts_it_once():
    sampler = Sampler(SEED)
    heavy = sampler.sample(1, range(50), 1)[0]  # the user that ranks first in round 1
    rows = [(u, "x", 1) for u in range(50)] + [(heavy.decode(), "y", 1)] * 999

    def build(p):
        sampled = p | beam.Create(_batches(rows, 100)) | transforms.SampleUsers(sampler, 1, 5, population=50)
        users = sampled | beam.Map(lambda r: r[0]) | beam.Distinct()
        assert_that(users | "CountUsers" >> beam.combiners.Count.Globally(), equal_to([5]), label="users")
        heavy_records = sampled | beam.Filter(lambda r: r[0] == heavy) | beam.combiners.Count.Globally()
        assert_that(heavy_records, equal_to([1000]), label="heavy")

    _run(build)


def test_sample_users_with_fewer_users_than_m_takes_everyone():
    sampler = Sampler(SEED)
    rows = [(u, "a", 1) for u in range(5)]

    def build(p):
        sampled = p | beam.Create([_batch(rows)]) | transforms.SampleUsers(sampler, 1, 10, population=5)
        assert_that(sampled, equal_to([(str(u).encode(), "a", 1) for u in range(5)]))

    _run(build)


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


# ---- GroupByUser -------------------------------------------------------------------------------


def test_group_by_user_sums_counts_and_drops_long_items():
    encoder = ItemEncoder(max_length=4)
    records = [
        (b"u1", "ab", 2),
        (b"u1", "ab", 3),
        (b"u1", "abc", 1),
        (b"u1", "toolong", 1),
        (b"u2", "toolong", 4),
    ]

    def build(p):
        grouped = p | beam.Create(records) | transforms.GroupByUser(encoder)
        assert_that(
            grouped,
            equal_to([(b"u1", {("a", "b", ""): 5, ("a", "b", "c", ""): 1}), (b"u2", {})]),
        )

    counters = _run(build)
    assert counters["items_too_long"] == 2


def test_group_by_user_truncates_when_asked():
    encoder = ItemEncoder(max_length=3)

    def build(p):
        grouped = p | beam.Create([(b"u", "hello", 1)]) | transforms.GroupByUser(encoder, truncate=True)
        assert_that(grouped, equal_to([(b"u", {("h", "e", "l"): 1})]))

    _run(build)


# ---- MapToPrefixVotes --------------------------------------------------------------------------


def test_map_to_prefix_votes_matches_the_client_vote_and_counts():
    sampler = Sampler(SEED)
    users = {
        b"a": {("h", "i", ""): 1},
        b"b": {("h", "e", "y", ""): 3, ("y", "o", ""): 1},
        b"c": {("x", ""): 1},
        b"d": {},
    }
    frontier = frozenset({("h",), ("y",)})
    expected = []
    for user, weighted in users.items():
        if weighted:
            vote = client_vote(weighted, frontier, 2, sampler.choice_uniform(2, user))
            if vote is not None:
                expected.append(vote)

    def build(p):
        front = p | "Frontier" >> beam.Create([frontier])
        votes = p | beam.Create(list(users.items())) | transforms.MapToPrefixVotes(sampler, 2, front)
        assert_that(votes, equal_to(expected))

    counters = _run(build)
    assert counters["users_sampled"] == 4
    assert counters["users_without_items"] == 1
    assert counters["votes_cast"] == len(expected)
    assert counters["votes_filtered_by_frontier"] == 3 - len(expected)
    assert counters["votes_filtered_by_frontier"] >= 1  # user c's "x" is never on the frontier


# ---- CountAndPrune -----------------------------------------------------------------------------


def test_count_and_prune_keeps_only_prefixes_at_or_above_theta():
    votes = [("a",)] * 3 + [("b",)] * 2 + [("c",)] * 1

    def build(p):
        kept = p | beam.Create(votes) | transforms.CountAndPrune(2)
        assert_that(kept, equal_to([[("a",), ("b",)]]))

    counters = _run(build)
    assert counters == {"prefixes_kept": 2}  # no counter holds anything about ("c",)


def test_count_and_prune_on_no_votes_keeps_nothing():
    def build(p):
        kept = p | beam.Create([]) | transforms.CountAndPrune(1)
        assert_that(kept, equal_to([[]]))

    _run(build)


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


# ---- RunRound and CountDistinctUsers -----------------------------------------------------------


def test_run_round_one_of_three_users_with_threshold_one():
    sampler = Sampler(SEED)
    rows = [(1, "hello", 1), (2, "hey", 1), (3, "hi", 1)]

    def build(p):
        kept = p | beam.Create([_batch(rows)]) | transforms.RunRound(
            sampler, 2, sample_size=3, theta=1, encoder=ItemEncoder(max_length=6),
            frontier=frozenset({("h",)}), population=3,
        )
        assert_that(kept, equal_to([RoundResult(kept=(("h", "e"), ("h", "i")), users_sampled=3, users_required=3,
                                                  records_ranked=3)]))

    counters = _run(build)
    assert counters["votes_cast"] == 3 and counters["prefixes_kept"] == 2


def _round_on_50_users(population, expected):
    """Runs round 1 of 50 users (each its own word) for m = 5 and a stated population, checks
    its one result against ``expected``; returns the counters."""
    sampler = Sampler(SEED)
    rows = [(u, f"w{u}", 1) for u in range(50)]

    def build(p):
        result = p | beam.Create([_batch(rows)]) | transforms.RunRound(
            sampler, 1, sample_size=5, theta=1, encoder=ItemEncoder(max_length=6),
            frontier=frozenset({()}), population=population,
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
    assert counters.get("votes_cast", 0) == 0 and counters.get("users_sampled", 0) == 0
    assert RoundResult((), passing, 5).sample_short
    # Without the prefilter the same round draws its complete sample: five users, one vote each
    # (every word starts with "w").
    counters = _round_on_50_users(None, RoundResult((("w",),), users_sampled=5, users_required=None, records_ranked=50))
    assert counters["votes_cast"] == 5


def test_sample_users_with_sample_size_counts_the_distinct_users_drawn():
    sampler = Sampler(SEED)
    rows = _population(users=30, records_per_user=4)

    def build(p):
        records, size = p | beam.Create(_batches(rows, 16)) | transforms.SampleUsers(
            sampler, 2, 7, population=30
        ).with_sample_size()
        assert_that(size, equal_to([7]), label="size")
        users = records | beam.Map(lambda r: r[0]) | beam.Distinct()
        assert_that(users, equal_to(sampler.sample(2, range(30), 7)), label="users")

    _run(build)


def test_type_hints_refuse_a_wrong_element_type_when_the_graph_is_built():
    pipeline = beam.Pipeline(runner=FnApiRunner())
    with pytest.raises(Exception, match="type hint violation"):
        pipeline | beam.Create([1, 2, 3]) | transforms.CountAndPrune(1)


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
    pipeline = beam.Pipeline(runner=FnApiRunner())
    batches = pipeline | beam.Create([_batch([(1, "a", 1)])])
    batches | transforms.CountDistinctUsers(sampler)
    batches | transforms.RunRound(sampler, 2, 5, 2, ItemEncoder(max_length=4), frozenset({("a",)}), population=1)

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
    assert any(b"RoundKeys" in blob for blob in pickled)
    assert any(b"CensusKey" in blob for blob in pickled)
