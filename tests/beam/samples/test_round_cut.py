"""The cut a round at a time (``round_cut.CutRounds``): from a first read's candidate files, every
round's sample tables are byte for byte those the in-memory cut (``sample_pass.SampleFromCandidates``)
writes from the same candidates, with the same ``RoundSample``s: TrieHH's bottom-m (users with
several records, several shards, m below and above the bundle bound) and TrieHH++'s Bernoulli
samples; a round short of the users required writes nothing and says so; ``round_candidates``
reads one round's rows, every one of them, and skips the row groups of other rounds."""

from __future__ import annotations

import glob
import os

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.candidate_records import user_records
from tests.pipeline_checks import check_outputs, counters_of, run_pipeline
from tests.pipeline_factory import new_pipeline

from triehh_beam.beam.held import DEFAULT_BUDGET
from triehh_beam.beam.samples import round_cut, sample_pass, samples
from triehh_beam.beam.samples.candidates import (CandidateBounds, DrawCandidates, WriteCandidates,
                                                 candidates_pattern)
from triehh_beam.io.arrays import binary_buffers
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.randomness import sampling

ROUNDS = [1, 2, 3]
ENCODER = ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=3)


def _write_candidates(tmp_path, table, keys, bounds, draw_budget=DEFAULT_BUDGET) -> str:
    prefix = str(tmp_path / "candidates" / "part")
    with beam.Pipeline() as p:
        (p | beam.Create(table.to_batches(max_chunksize=300))  # several batches: several row groups per round
         | DrawCandidates(keys, ROUNDS, bounds, draw_budget)
         | WriteCandidates(prefix, ItemKind.TEXT))
    return prefix


def _read_plainly(prefix: str):
    """Every candidate row, with pyarrow alone (the reference for ``round_candidates``)."""
    return pa.concat_tables([pq.read_table(f) for f in sorted(glob.glob(candidates_pattern(prefix)))])


def _in_memory_cut(p, prefix, keys, directory, shards, **sizes):
    """The in-memory cut (the reference), its tables written under ``directory``; its samples."""
    written = _read_plainly(prefix)
    batches = [(r, written.filter(pc.equal(written.column("round"), r)).drop(["round"]).combine_chunks().to_batches()[0])
               for r in ROUNDS]
    drawn = p | "Candidates" >> beam.Create(batches) | "InMemory" >> sample_pass.SampleFromCandidates(
        keys, ROUNDS, encoder=ENCODER, truncate=False, shards=shards, records_ranked=7, **sizes)
    drawn["tables"] | "WriteInMemory" >> samples.WriteSampleTables(directory)
    return drawn["samples"]


def _cut_by_round(p, prefix, keys, directory, shards, budget=DEFAULT_BUDGET, **sizes):
    """The cut a round at a time, its tables under ``directory``; its samples and written paths."""
    drawn = p | "Cut" >> round_cut.CutRounds(prefix, keys, ROUNDS, encoder=ENCODER, truncate=False,
                                              shards=shards, samples_dir=directory, records_ranked=7,
                                              budget=budget, **sizes)
    return drawn["samples"], drawn["tables"]


def _cut_beside_in_memory(tmp_path, prefix, keys, shards, budget, check, **sizes):
    """Both cuts in one job (tables under ``tmp_path/"b"`` and ``tmp_path/"a"``):
    ``check(cut's {round: RoundSample}, in-memory's, the cut's sorted (round, path)s)`` inside it;
    the counters of the cut's steps (with ``largest_rows_held``, the most rows one of them held)
    and of the in-memory cut's."""
    def build(p):
        cut, paths = _cut_by_round(p, prefix, keys, str(tmp_path / "b"), shards, budget, **sizes)
        memory = _in_memory_cut(p, prefix, keys, str(tmp_path / "a"), shards, **sizes)
        check_outputs({"cut": cut, "memory": memory, "paths": paths},
                      lambda out: check(dict(out["cut"]), dict(out["memory"]), sorted(out["paths"])))

    pipeline = new_pipeline()
    build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    return counters_of(result, "Cut"), counters_of(result, "InMemory")


# The default budget (every round cut whole by one worker) and one below a round's candidates
# (some 1,500-2,500 rows) but above two shards' sampled rows: rounds cut by rank buckets and
# groups of shards. (A shard's rows are one step's: ``test_a_tiny_budget_...`` takes 16 shards.)
BUDGETS = [DEFAULT_BUDGET, 1000]


def _split_within(counters, budget, prefix):
    """The most rows a step held is within the budget; a budget below a round's candidates split
    the rounds (with the default one a worker held a whole round's candidates)."""
    written = _read_plainly(prefix)
    rows = [pc.sum(pc.equal(written.column("round"), r)).as_py() for r in ROUNDS]
    assert 0 < counters["largest_rows_held"] <= budget
    if budget < min(rows):
        assert counters["largest_rows_held"] < min(rows)
    else:
        assert counters["largest_rows_held"] == max(rows)


def _files(directory):
    return {os.path.relpath(f, directory): open(f, "rb").read()
            for f in glob.glob(os.path.join(directory, "round-*", "part-*.parquet"))}


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("m, shards", [(40, 1), (250, 3), (900, 4)])
def test_each_round_equals_the_in_memory_cut(tmp_path, m, shards, budget):
    table = user_records(2000, np.random.default_rng(m))
    keys = sampling.Sampler(b"c" * 32, identity=b"round-cut").pass_keys(len(ROUNDS))
    # m = 900 is beyond the bundle bound: it is covered by the rate bound alone.
    prefix = _write_candidates(tmp_path, table, keys, CandidateBounds(rate_bound=int(0.5 * 2**64), bundle_keep=300))
    sizes = dict(sample_size=m, users_required=m)

    def check(drawn, expected, paths):
        assert drawn == expected and sorted(drawn) == ROUNDS
        assert all(not s.sample_short and s.users_sampled == m and s.records_ranked == 7 for s in drawn.values())
        b = _files(str(tmp_path / "b"))  # every path is out once its table is written
        assert paths == sorted((r, os.path.join(str(tmp_path / "b"), p)) for p in b for r in [int(p[6:10])])

    counters, expected_counters = _cut_beside_in_memory(tmp_path, prefix, keys, shards, budget, check, **sizes)
    _split_within(counters, budget, prefix)
    a, b = _files(str(tmp_path / "a")), _files(str(tmp_path / "b"))
    assert a == b and len(b) == shards * len(ROUNDS)
    assert counters["sample_files_written"] == len(b)
    for r in ROUNDS:
        assert counters.get(f"round{r}.items_too_long", 0) == expected_counters.get(f"round{r}.items_too_long", 0)


def test_a_tiny_budget_cuts_every_round_by_parts_within_it(tmp_path):
    """64 rows a step, some 2,000 candidates a round: the cut plans, splits, counts, resolves and
    builds in pieces (several histogram refinements, many buckets and units), and the samples
    and tables are still the in-memory cut's; no step held more than 64 rows."""
    table = user_records(2000, np.random.default_rng(11))
    keys = sampling.Sampler(b"t" * 32, identity=b"tiny").pass_keys(len(ROUNDS))
    prefix = _write_candidates(tmp_path, table, keys, CandidateBounds(rate_bound=int(0.5 * 2**64), bundle_keep=300))
    sizes = dict(sample_size=250, users_required=250)

    def check(drawn, expected, _):
        assert drawn == expected and sorted(drawn) == ROUNDS and all(s.users_sampled == 250 for s in drawn.values())

    counters, _ = _cut_beside_in_memory(tmp_path, prefix, keys, 16, 64, check, **sizes)
    assert _files(str(tmp_path / "a")) == _files(str(tmp_path / "b"))
    _split_within(counters, 64, prefix)
    spilled = glob.glob(str(tmp_path / "candidates" / "part-cut" / "round-*" / "bucket-*.arrows"))
    assert len(spilled) > 3 * 2000 / 32  # every round's rows in pieces of at most half the budget


@pytest.mark.parametrize("budget", BUDGETS + [64])
def test_a_short_round_writes_nothing_and_says_so(tmp_path, budget):
    table = user_records(500, np.random.default_rng(3))
    keys = sampling.Sampler(b"s" * 32, identity=b"short").pass_keys(len(ROUNDS))
    # Candidates of about a fifth of the users: a bottom-400 of the 500 users is not among them.
    prefix = _write_candidates(tmp_path, table, keys, CandidateBounds(rate_bound=int(0.2 * 2**64), bundle_keep=5))

    def check(drawn, expected, paths):
        assert paths == []
        assert sorted(drawn) == ROUNDS and all(s.sample_short and s.users_required == 400 for s in drawn.values())
        assert drawn == expected

    _cut_beside_in_memory(tmp_path, prefix, keys, 2, budget, check, sample_size=400, users_required=400)
    assert _files(str(tmp_path / "b")) == {}


@pytest.mark.parametrize("budget, draw_budget", [(DEFAULT_BUDGET, DEFAULT_BUDGET), (1000, DEFAULT_BUDGET),
                                                  (DEFAULT_BUDGET, 1200)])
def test_bernoulli_rounds_equal_the_in_memory_cut(tmp_path, budget, draw_budget):
    # draw_budget 1200: the first read emits 30-row groups, so a round cut whole reads many.
    table = user_records(1500, np.random.default_rng(8))
    keys = sampling.Sampler(b"b" * 32, identity=b"bernoulli").pass_keys(len(ROUNDS))
    probability = 0.2
    top = sampling.bernoulli_threshold(probability) - 1
    prefix = _write_candidates(tmp_path, table, keys, CandidateBounds(rate_bound=top, bundle_keep=0), draw_budget)
    users = table.column("user_id").to_pylist()
    ranks = keys.ranks_all(*binary_buffers(table.column("user_id")))
    # The Bernoulli sample itself: every user ranked below the threshold.
    sampled = {r: len({u for u, k in zip(users, ranks[r - 1]) if k <= top}) for r in ROUNDS}

    def check(drawn, expected, _):
        assert drawn == expected
        assert all(s.users_required is None for s in drawn.values())
        assert {r: s.users_sampled for r, s in drawn.items()} == sampled

    counters, _ = _cut_beside_in_memory(tmp_path, prefix, keys, 3, budget, check, sample_size=None,
                                        sample_probability=probability)
    _split_within(counters, budget, prefix)
    assert _files(str(tmp_path / "a")) == _files(str(tmp_path / "b"))


def test_round_candidates_reads_one_round_and_skips_the_others(tmp_path, monkeypatch):
    table = user_records(1200, np.random.default_rng(4))
    keys = sampling.Sampler(b"r" * 32, identity=b"read").pass_keys(len(ROUNDS))
    prefix = _write_candidates(tmp_path, table, keys, CandidateBounds(rate_bound=int(0.3 * 2**64), bundle_keep=10))
    written = _read_plainly(prefix)
    groups = sum(pq.ParquetFile(f).num_row_groups for f in glob.glob(candidates_pattern(prefix)))
    read = []
    original = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group",
                        lambda self, i, **kw: read.append(i) or original(self, i, **kw))
    for r in ROUNDS:
        got = pa.Table.from_batches(list(round_cut.round_candidates(candidates_pattern(prefix), r)))
        part = written.filter(pc.equal(written.column("round"), r)).drop(["round"])
        key = lambda t: sorted(zip(*(t.column(c).to_pylist() for c in ("user_id", "item", "count", "rank"))))
        assert got.num_rows == part.num_rows > 0 and key(got) == key(part)
    # Each row group holds one round (a batch's candidates of one round), so each is read once.
    assert len(read) == groups


@pytest.mark.parametrize("m, shards", [(60, 2), (700, 3)])
def test_the_cut_of_the_candidates_equals_a_pass_over_every_record(tmp_path, m, shards):
    """The claim a discovery rests on: the first read's candidates cut a round at a time give the
    very sample tables a pass that ranks every record gives (``SampleAllRounds`` with no
    population: no prefilter, every record a candidate), byte for byte."""
    table = user_records(2500, np.random.default_rng(m + 1))
    keys = sampling.Sampler(b"p" * 32, identity=b"cut-vs-pass").pass_keys(len(ROUNDS))
    prefix = _write_candidates(tmp_path, table, keys, CandidateBounds(rate_bound=int(0.4 * 2**64), bundle_keep=100))

    def check(out):
        drawn, passed = dict(out["cut"]), dict(out["pass"])
        assert {r: s.users_sampled for r, s in drawn.items()} == {r: s.users_sampled for r, s in passed.items()}
        assert sorted(drawn) == ROUNDS and all(s.users_sampled == m for s in drawn.values())

    def build(p):
        drawn, _ = _cut_by_round(p, prefix, keys, str(tmp_path / "cut"), shards, sample_size=m, users_required=m)
        passed = p | beam.Create(table.to_batches(max_chunksize=300)) | sample_pass.SampleAllRounds(
            keys, ROUNDS, m, None, ENCODER, False, shards=shards)
        passed["tables"] | samples.WriteSampleTables(str(tmp_path / "pass"))
        check_outputs({"cut": drawn, "pass": passed["samples"]}, check)

    run_pipeline(build)
    cut, full = _files(str(tmp_path / "cut")), _files(str(tmp_path / "pass"))
    assert cut == full and len(cut) == shards * len(ROUNDS)
