"""One sampling pass and rounds on the sample (what a discovery job runs) give exactly the public
``RunRound`` and the keyed simulation: the same kept prefixes, round by round, for several seeds, item types,
many-items-per-user populations and truncation on and off; the one-job mode too."""

import dataclasses

import apache_beam as beam
import pyarrow as pa
import pytest

from tests.pipeline_checks import check_outputs, run_pipeline
from tests.pipeline_factory import new_pipeline
from tests.skewed_records import ENCODERS, population as skewed_population, record_batches
from triehh_beam.beam import RunRound
from triehh_beam.beam.rounds import sampled_rounds
from triehh_beam.beam.samples import sample_pass, samples
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind, is_terminated
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference import simulation

THETA = 4
M = 120


def _sample_pass(batches, sampler, encoder, truncate, population, tmp_path, check, shards=None):
    """Runs the sampling pass, its tables written under ``tmp_path``; ``check({round: RoundSample})``
    inside the pipeline; returns the counters."""
    keys = sampler.pass_keys(encoder.max_length)

    def build(p):
        drawn = p | beam.Create(batches) | sample_pass.SampleAllRounds(
            keys, range(1, encoder.max_length + 1), M, population, encoder, truncate, shards=shards
        )
        drawn["tables"] | samples.WriteSampleTables(str(tmp_path))
        check_outputs({"samples": drawn["samples"]}, lambda out: check(dict(out["samples"])))

    return run_pipeline(build)


def _from_files(p, tmp_path, round_index, frontier, required, label="FromFiles"):
    return (
        p
        | f"{label}Read" >> samples.ReadSampleTables(str(tmp_path), round_index)
        | label >> sampled_rounds.RunSampledRound(round_index, THETA, frontier, users_required=required)
    )


def _round_from_files(tmp_path, round_index, frontier, required, check):
    """One round on the tables under ``tmp_path``: ``check(its RoundResult)`` inside the pipeline;
    returns the counters."""
    def build(p):
        result = _from_files(p, tmp_path, round_index, frontier, required)
        check_outputs({"result": result}, lambda out: check(*out["result"]))

    return run_pipeline(build)


CASES = [
    ("text", 1, False),
    ("text", 2, True),
    ("bytes", 3, False),
    ("bytes", 4, True),
    ("int", 5, False),
]


def _simulated_levels(expected, encoder):
    """The kept prefixes of every round the simulation ran (the last one empty when it ended on an
    empty round), and its trie."""
    levels = list(expected.levels) + [frozenset()] * (expected.rounds_run - len(expected.levels))
    trie = Trie.empty(encoder)
    for level in expected.levels:
        trie = trie.with_level(level)
    return levels, trie


@pytest.mark.parametrize("kind,seed,truncate", CASES)
def test_one_pass_and_rounds_on_the_sample_equal_the_public_round_and_the_simulation(kind, seed, truncate, tmp_path):
    encoder = ENCODERS[kind]
    population = skewed_population(kind, seed)
    batches = record_batches(population, kind)
    sampler = Sampler(seed.to_bytes(32, "big"), b"job")
    n = len(population)
    records = sum(b.num_rows for b in batches)

    def check_samples(drawn):
        assert sorted(drawn) == list(range(1, encoder.max_length + 1))
        for r, sample in drawn.items():
            assert sample == sample_pass.RoundSample(r, min(M, n), min(M, n), records)
            assert not sample.sample_short

    pass_counters = _sample_pass(batches, sampler, encoder, truncate, n, tmp_path, check_samples)
    assert pass_counters["records_ranked"] == records

    expected = simulation.simulate(
        population, encoder, THETA, M, sampler, too_long="truncate" if truncate else "drop"
    )
    levels, simulated_trie = _simulated_levels(expected, encoder)
    assert any(levels), "a population where nothing is kept would prove little"
    trie = Trie.empty(encoder)
    step = rounds.next_round(trie)
    rounds_run = 0
    while isinstance(step, rounds.NextRound):
        level = levels[step.index - 1]

        def check(out, index=step.index, level=level):
            [result], [public] = out["files"], out["public"]
            assert frozenset(result.kept) == level, index
            assert public == dataclasses.replace(result, records_ranked=records), index
            assert result.users_sampled == min(M, n)

        def build(p, index=step.index, frontier=step.frontier):
            from_files = _from_files(p, tmp_path, index, frontier, min(M, n))
            public = p | beam.Create(batches) | "Public" >> RunRound(
                sampler, index, THETA, encoder, frontier, sample_size=M, population=n, truncate=truncate
            )
            check_outputs({"files": from_files, "public": public}, check)

        counters = run_pipeline(build, step_prefix="FromFiles")
        assert counters["users_sampled"] == min(M, n)
        assert counters["votes_cast"] == expected.round_stats[step.index - 1].votes_cast
        assert counters.get("prefixes_kept", 0) == len(level)
        rounds_run += 1
        trie, step = rounds.apply_round(trie, step, sorted(level))
    assert trie.to_bytes() == simulated_trie.to_bytes()
    assert rounds_run == expected.rounds_run

    # The one-job mode: every round unrolled in one graph, from the same pass.
    def check_all(results):
        for r, level in enumerate(levels, start=1):
            assert frozenset(results[r].kept) == level
            assert results[r].users_required == min(M, n)

    _all_rounds(batches, sampler, encoder, truncate, n, 1, encoder.max_length, frozenset({()}), check_all)


def _unrolled(p, batches, sampler, encoder, truncate, population, first, last, frontier, label="All"):
    drawn = p | f"{label}Records" >> beam.Create(batches) | f"{label}Pass" >> sample_pass.SampleAllRounds(
        sampler.pass_keys(encoder.max_length), range(first, last + 1), M, population, encoder, truncate
    )
    return drawn["tables"] | f"{label}Rounds" >> sampled_rounds.RunAllRounds(
        first, last, THETA, frontier, sample_sizes=drawn["samples"])


def _all_rounds(batches, sampler, encoder, truncate, population, first, last, frontier, check, short=False):
    """Every round from ``first`` to ``last`` in one job: ``check({round: RoundResult})`` inside the
    pipeline, and each round's users counted from its tables (none when its sample is ``short``)."""
    def check_results(out):
        results = dict(out["all"])
        assert sorted(results) == list(range(first, last + 1))
        assert all(r.sample_short == short for r in results.values())
        check(results)

    def build(p):
        results = _unrolled(p, batches, sampler, encoder, truncate, population, first, last, frontier)
        check_outputs({"all": results}, check_results)

    counters = run_pipeline(build)
    for r in range(first, last + 1):
        # Users counted from the tables, which a short sample does not have.
        assert counters.get(f"round{r}.users_sampled", 0) == (0 if short else min(M, population))


def test_a_resume_runs_the_later_rounds_from_a_given_frontier():
    encoder = ENCODERS["text"]
    population = skewed_population("text", 11)
    batches = record_batches(population, "text")
    sampler = Sampler(bytes(32), b"resume")
    expected = simulation.simulate(population, encoder, THETA, M, sampler, too_long="drop")
    frontier = frozenset(p for p in expected.levels[1] if not is_terminated(p))  # after round 2
    assert frontier

    def check(out):
        whole, resumed = dict(out["whole"]), dict(out["resumed"])
        assert sorted(resumed) == list(range(3, encoder.max_length + 1))
        assert sampled_rounds.frontier_after(whole[2]) == frontier
        for r in range(3, encoder.max_length + 1):
            assert resumed[r].kept == whole[r].kept

    def build(p):
        whole = _unrolled(p, batches, sampler, encoder, False, len(population), 1, encoder.max_length,
                          frozenset({()}), label="Whole")
        resumed = _unrolled(p, batches, sampler, encoder, False, len(population), 3, encoder.max_length,
                            frontier, label="Resumed")
        check_outputs({"whole": whole, "resumed": resumed}, check)

    run_pipeline(build)


def test_more_users_than_a_tiny_population_and_a_short_sample_are_values(tmp_path):
    encoder = ENCODERS["text"]
    population = skewed_population("text", 12, users=50)
    batches = record_batches(population, "text")
    sampler = Sampler(bytes(range(32)))

    def everyone(drawn):  # m > n: everyone, in every round.
        assert {s.users_sampled for s in drawn.values()} == {50}

    _sample_pass(batches, sampler, encoder, False, 50, tmp_path / "all", everyone)

    # A population claimed far larger than the truth makes the prefilter keep almost nobody:
    # the sample comes up short, no table is written, and the one-job results say so.
    def all_short(drawn):
        assert drawn and all(s.sample_short for s in drawn.values())

    _sample_pass(batches, sampler, encoder, False, 10**9, tmp_path / "short", all_short)
    assert not (tmp_path / "short").exists() or not list((tmp_path / "short").rglob("*.parquet"))

    # Read back per round, the missing tables are a short sample too.
    def short_from_files(result):
        assert result.sample_short and result.kept == () and result.users_sampled == 0

    _round_from_files(tmp_path / "short", 1, frozenset({()}), min(M, 10**9), short_from_files)

    def nothing_kept(results):
        assert all(r.kept == () for r in results.values())

    _all_rounds(batches, sampler, encoder, False, 10**9, 1, 2, frozenset({()}), nothing_kept, short=True)


def test_sampled_users_with_nothing_encodable_are_rows_that_cast_no_vote(tmp_path):
    encoder = ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=3)
    population = {f"u{i}": {"toolongitem": 1} for i in range(30)}
    population.update({f"v{i}": {"ab": 2} for i in range(30)})
    batches = record_batches(population, "text")
    sampler = Sampler(bytes(range(1, 33)))

    def sixty(drawn):
        assert {s.users_sampled for s in drawn.values()} == {60}

    counters = _sample_pass(batches, sampler, encoder, False, 60, tmp_path, sixty)
    tables = [samples.read_sample_table(str(p)) for p in (tmp_path / "round-0001").glob("*.parquet")]
    rows = pa.concat_tables(tables)
    assert rows.num_rows == 60
    empty = sum(1 for s in rows.column("sequences").to_pylist() if not s)
    assert empty == 30
    assert counters["round1.items_too_long"] == 30

    def kept_a(result):
        assert result.kept == (("a",),)

    round_counters = _round_from_files(tmp_path, 1, frozenset({()}), 60, kept_a)
    assert round_counters["users_without_items"] == 30
    assert round_counters["votes_cast"] == 30


def test_several_shards_give_the_same_rounds(tmp_path):
    encoder = ENCODERS["text"]
    population = skewed_population("text", 21)
    batches = record_batches(population, "text")
    sampler = Sampler(bytes(range(2, 34)))
    expected = simulation.simulate(population, encoder, THETA, M, sampler, too_long="drop")
    levels, _ = _simulated_levels(expected, encoder)
    assert len(levels) >= 3, "three rounds to compare"
    for shards, where in ((1, "one"), (7, "many")):
        _sample_pass(batches, sampler, encoder, False, len(population), tmp_path / where, lambda drawn: None,
                     shards=shards)
    assert len(list((tmp_path / "many" / "round-0001").glob("part-*.parquet"))) > 1
    frontier = frozenset({()})
    for r in (1, 2, 3):
        def check(out, r=r):
            [one], [many] = out["one"], out["many"]
            assert one == many, r
            assert frozenset(one.kept) == levels[r - 1], r

        def build(p, r=r, frontier=frontier):
            check_outputs({where: _from_files(p, tmp_path / where, r, frontier, None, label=where.title())
                           for where in ("one", "many")}, check)

        run_pipeline(build)
        frontier = frozenset(u for u in levels[r - 1] if not is_terminated(u))


def test_no_job_graph_of_the_pass_or_the_rounds_carries_the_secret_seed():
    import base64
    import bz2

    from apache_beam.internal import pickler
    from apache_beam.pipeline import PipelineVisitor

    seed = b"SEED-MUST-NOT-LEAK-0123456789abcdef"
    sampler = Sampler(seed)
    encoder = ENCODERS["text"]
    pipeline = new_pipeline()
    drawn = pipeline | beam.Create(record_batches({"u": {"a": 1}}, "text")) | sample_pass.SampleAllRounds(
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
