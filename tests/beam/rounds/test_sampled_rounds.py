"""One sampling pass and rounds on the sample (what a discovery job runs) give exactly the public
``RunRound`` and the keyed simulation: the same kept prefixes, round by round, for several seeds, item types,
many-items-per-user populations and truncation on and off; the one-job mode too."""

import dataclasses

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.metrics.metric import MetricsFilter

from tests.pipeline_factory import new_pipeline
from triehh_beam.beam import RunRound
from triehh_beam.beam.rounds import sampled_rounds
from triehh_beam.beam.samples import sample_pass, samples
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference import simulation

THETA = 4
M = 120
ENCODERS = {
    "text": ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=5),
    "bytes": ItemEncoder(ItemKind.BYTES, unit_size=1, max_length=4),
    "int": ItemEncoder(ItemKind.INT, unit_size=2, max_length=5, int_bits=8),
}
ARROW_ITEMS = {"text": pa.string(), "bytes": pa.binary(), "int": pa.int64()}


def _population(kind, seed, users=300):
    """user -> {item: count}: 1 to 6 items per user from a skewed vocabulary, some too long."""
    rng = np.random.default_rng(seed)
    if kind == "text":
        vocabulary = ["ab", "abc", "a", "ba", "bab", "c", "abcdef", "bbbbbbb", "cab", "ca"]
    elif kind == "bytes":
        vocabulary = [b"\x01\x02", b"\x01", b"\x02\x01", b"\x01\x02\x03", b"\x01\x01\x01\x01\x01", b"\x03"]
    else:
        vocabulary = [0, 1, 2, -1, 17, 100, -128, 127]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    population = {}
    for user in range(users):
        held = {}
        for _ in range(rng.integers(1, 7)):
            item = vocabulary[rng.choice(len(vocabulary), p=weights)]
            held[item] = held.get(item, 0) + int(rng.integers(1, 4))
        population[f"u{user}"] = held
    return population


def _batches(population, kind, size=97):
    rows = [(u.encode(), item, c) for u, held in population.items() for item, c in held.items()]
    rows = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]  # users spread over batches
    out = []
    for i in range(0, len(rows), size):
        users, items, counts = zip(*rows[i : i + size])
        out.append(
            pa.record_batch(
                [pa.array(users, pa.binary()), pa.array(items, ARROW_ITEMS[kind]), pa.array(counts, pa.int64())],
                names=["user_id", "item", "count"],
            )
        )
    return out


def _run(build):
    pipeline = new_pipeline()
    outputs = build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    query = result.metrics().query(MetricsFilter().with_namespace("triehh"))
    return outputs, {c.key.metric.name: c.committed for c in query["counters"]}


class _Collect(beam.DoFn):
    """Collects elements into a module-level list (the in-process runner shares the process)."""

    def __init__(self, key):
        self._key = key

    def process(self, element):
        _COLLECTED.setdefault(self._key, []).append(element)


_COLLECTED = {}


def _collect(pcoll, key):
    _COLLECTED.pop(key, None)
    pcoll | f"Collect{key}" >> beam.ParDo(_Collect(key))
    return key


def _sample_pass(batches, sampler, encoder, truncate, population, tmp_path, shards=None):
    keys = sampler.pass_keys(encoder.max_length)

    def build(p):
        drawn = p | beam.Create(batches) | sample_pass.SampleAllRounds(
            keys, range(1, encoder.max_length + 1), M, population, encoder, truncate, shards=shards
        )
        drawn["tables"] | samples.WriteSampleTables(str(tmp_path))
        return _collect(drawn["samples"], "samples")

    key, counters = _run(build)
    return dict(_COLLECTED[key]), counters


def _round_from_files(tmp_path, round_index, frontier, required):
    def build(p):
        result = (
            p
            | samples.ReadSampleTables(str(tmp_path), round_index)
            | sampled_rounds.RunSampledRound(round_index, THETA, frontier, users_required=required)
        )
        return _collect(result, "result")

    key, counters = _run(build)
    [result] = _COLLECTED[key]
    return result, counters


def _run_round(batches, sampler, encoder, truncate, population, round_index, frontier):
    def build(p):
        result = p | beam.Create(batches) | RunRound(
            sampler, round_index, THETA, encoder, frontier, sample_size=M, population=population, truncate=truncate
        )
        return _collect(result, "public")

    key, _ = _run(build)
    [result] = _COLLECTED[key]
    return result


CASES = [
    ("text", 1, False),
    ("text", 2, True),
    ("bytes", 3, False),
    ("bytes", 4, True),
    ("int", 5, False),
]


@pytest.mark.parametrize("kind,seed,truncate", CASES)
def test_one_pass_and_rounds_on_the_sample_equal_the_public_round_and_the_simulation(kind, seed, truncate, tmp_path):
    encoder = ENCODERS[kind]
    population = _population(kind, seed)
    batches = _batches(population, kind)
    sampler = Sampler(seed.to_bytes(32, "big"), b"job")
    n = len(population)
    drawn, pass_counters = _sample_pass(batches, sampler, encoder, truncate, n, tmp_path)
    records = sum(b.num_rows for b in batches)
    assert sorted(drawn) == list(range(1, encoder.max_length + 1))
    for r, sample in drawn.items():
        assert sample == sample_pass.RoundSample(r, min(M, n), min(M, n), records)
        assert not sample.sample_short
    assert pass_counters["records_ranked"] == records

    expected = simulation.simulate(
        population, encoder, THETA, M, sampler, too_long="truncate" if truncate else "drop"
    )
    trie = Trie.empty(encoder)
    step = rounds.next_round(trie)
    levels = []
    while isinstance(step, rounds.NextRound):
        result, counters = _round_from_files(tmp_path, step.index, step.frontier, min(M, n))
        public = _run_round(batches, sampler, encoder, truncate, n, step.index, step.frontier)
        assert public == dataclasses.replace(result, records_ranked=records), step.index
        assert result.users_sampled == min(M, n)
        assert counters["users_sampled"] == min(M, n)
        assert counters["votes_cast"] == expected.round_stats[step.index - 1].votes_cast
        assert counters.get("prefixes_kept", 0) == len(result.kept)
        levels.append(frozenset(result.kept))
        trie, step = rounds.apply_round(trie, step, result.kept)
    assert tuple(l for l in levels if l) == expected.levels
    assert trie.to_bytes() == _simulated_trie(expected, encoder).to_bytes()
    assert len(levels) == expected.rounds_run

    # The one-job mode: every round unrolled in one graph, from the same pass.
    all_rounds = _all_rounds(batches, sampler, encoder, truncate, n, 1, encoder.max_length, frozenset({()}))
    for r, level in enumerate(levels, start=1):
        assert frozenset(all_rounds[r].kept) == level
        assert all_rounds[r].users_required == min(M, n)
    assert any(levels), "a population where nothing is kept would prove little"


def _simulated_trie(expected, encoder):
    trie = Trie.empty(encoder)
    for level in expected.levels:
        trie = trie.with_level(level)
    return trie


def _all_rounds(batches, sampler, encoder, truncate, population, first, last, frontier):
    keys = sampler.pass_keys(encoder.max_length)

    def build(p):
        drawn = p | beam.Create(batches) | sample_pass.SampleAllRounds(
            keys, range(first, last + 1), M, population, encoder, truncate
        )
        results = drawn["tables"] | sampled_rounds.RunAllRounds(
            first, last, THETA, frontier, sample_sizes=drawn["samples"]
        )
        return _collect(results, "all")

    key, counters = _run(build)
    results = dict(_COLLECTED[key])
    assert sorted(results) == list(range(first, last + 1))
    for r, result in results.items():
        # Users counted from the tables, which a short sample does not have.
        assert counters.get(f"round{r}.users_sampled", 0) == (0 if result.sample_short else min(M, population))
    return results


def test_a_resume_runs_the_later_rounds_from_a_given_frontier(tmp_path):
    encoder = ENCODERS["text"]
    population = _population("text", 11)
    batches = _batches(population, "text")
    sampler = Sampler(bytes(32), b"resume")
    whole = _all_rounds(batches, sampler, encoder, False, len(population), 1, encoder.max_length, frozenset({()}))
    frontier = sampled_rounds.frontier_after(whole[2])
    assert frontier
    resumed = _all_rounds(batches, sampler, encoder, False, len(population), 3, encoder.max_length, frontier)
    for r in range(3, encoder.max_length + 1):
        assert resumed[r].kept == whole[r].kept


def test_more_users_than_a_tiny_population_and_a_short_sample_are_values(tmp_path):
    encoder = ENCODERS["text"]
    population = _population("text", 12, users=50)
    batches = _batches(population, "text")
    sampler = Sampler(bytes(range(32)))
    # m > n: everyone, in every round.
    drawn, _ = _sample_pass(batches, sampler, encoder, False, 50, tmp_path / "all")
    assert {s.users_sampled for s in drawn.values()} == {50}
    # A population claimed far larger than the truth makes the prefilter keep almost nobody:
    # the sample comes up short, no table is written, and the one-job results say so.
    drawn, _ = _sample_pass(batches, sampler, encoder, False, 10**9, tmp_path / "short")
    assert all(s.sample_short for s in drawn.values())
    assert not (tmp_path / "short").exists() or not list((tmp_path / "short").rglob("*.parquet"))
    # Read back per round, the missing tables are a short sample too.
    from_files, _ = _round_from_files(tmp_path / "short", 1, frozenset({()}), min(M, 10**9))
    assert from_files.sample_short and from_files.kept == () and from_files.users_sampled == 0
    results = _all_rounds(batches, sampler, encoder, False, 10**9, 1, 2, frozenset({()}))
    assert all(r.sample_short and r.kept == () for r in results.values())


def test_sampled_users_with_nothing_encodable_are_rows_that_cast_no_vote(tmp_path):
    encoder = ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=3)
    population = {f"u{i}": {"toolongitem": 1} for i in range(30)}
    population.update({f"v{i}": {"ab": 2} for i in range(30)})
    batches = _batches(population, "text")
    sampler = Sampler(bytes(range(1, 33)))
    drawn, counters = _sample_pass(batches, sampler, encoder, False, 60, tmp_path)
    tables = [samples.read_sample_table(str(p)) for p in (tmp_path / "round-0001").glob("*.parquet")]
    rows = pa.concat_tables(tables)
    assert rows.num_rows == 60
    empty = sum(1 for s in rows.column("sequences").to_pylist() if not s)
    assert empty == 30
    assert counters["round1.items_too_long"] == 30
    result, round_counters = _round_from_files(tmp_path, 1, frozenset({()}), 60)
    assert round_counters["users_without_items"] == 30
    assert round_counters["votes_cast"] == 30
    assert result.kept == (("a",),)


def test_several_shards_give_the_same_rounds(tmp_path):
    encoder = ENCODERS["text"]
    population = _population("text", 21)
    batches = _batches(population, "text")
    sampler = Sampler(bytes(range(2, 34)))
    one, _ = _sample_pass(batches, sampler, encoder, False, len(population), tmp_path / "one", shards=1)
    many, _ = _sample_pass(batches, sampler, encoder, False, len(population), tmp_path / "many", shards=7)
    assert len(list((tmp_path / "many" / "round-0001").glob("part-*.parquet"))) > 1
    for r in (1, 2, 3):
        a, _ = _round_from_files(tmp_path / "one", r, frozenset({()}) if r == 1 else _frontier_of(tmp_path / "one", r), None)
        b, _ = _round_from_files(tmp_path / "many", r, frozenset({()}) if r == 1 else _frontier_of(tmp_path / "one", r), None)
        assert a == b


def _frontier_of(directory, round_index):
    frontier = frozenset({()})
    for r in range(1, round_index):
        result, _ = _round_from_files(directory, r, frontier, None)
        frontier = sampled_rounds.frontier_after(result)
    return frontier


def test_no_job_graph_of_the_pass_or_the_rounds_carries_the_secret_seed():
    import base64
    import bz2

    from apache_beam.internal import pickler
    from apache_beam.pipeline import PipelineVisitor

    seed = b"SEED-MUST-NOT-LEAK-0123456789abcdef"
    sampler = Sampler(seed)
    encoder = ENCODERS["text"]
    pipeline = new_pipeline()
    drawn = pipeline | beam.Create(_batches({"u": {"a": 1}}, "text")) | sample_pass.SampleAllRounds(
        sampler.pass_keys(encoder.max_length), range(1, 4), 5, 1, encoder
    )
    drawn["tables"] | sampled_rounds.RunAllRounds(1, 3, 2, frozenset({()}), sample_sizes=drawn["samples"])
    pickled = []

    class Collect(PipelineVisitor):
        def visit_transform(self, node):
            transform = node.transform
            if transform is None:
                return
            for attribute in ("fn", "_fn", "combine_fn"):
                if hasattr(transform, attribute):
                    blob = pickler.dumps(getattr(transform, attribute))
                    pickled.append(bz2.decompress(base64.b64decode(blob)))
            blob = pickler.dumps(transform.__dict__.get("_keys"))
            pickled.append(bz2.decompress(base64.b64decode(blob)))

        def enter_composite_transform(self, node):
            self.visit_transform(node)

    pipeline.visit(Collect())
    assert len(pickled) > 10
    assert not any(seed in blob for blob in pickled)
    assert any(b"PassKeys" in blob for blob in pickled)  # the derived keys do travel
