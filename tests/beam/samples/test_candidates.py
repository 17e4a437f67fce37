"""The candidates of a discovery's one read (``beam.samples.candidates``): whatever the bundles, the rows
kept under ``CandidateBounds`` hold every round's bottom-m for every m the bounds cover (m at most
``bundle_keep``, or an m-th smallest rank at most ``rate_bound``), checked against ``bottom_m``
on the whole input; and the Parquet round trip gives back exactly the rows drawn, a round at a time."""

from __future__ import annotations

import glob

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.candidate_records import user_records
from triehh_beam.beam.samples import candidates
from triehh_beam.beam.samples.candidates import (CandidateBounds, DrawCandidates, WriteCandidates,
                                                 candidates_pattern, BundleSmallest)
from triehh_beam.beam.samples.round_cut import round_candidates
from triehh_beam.io.arrays import binary_buffers
from triehh_beam.protocol.items.encoding import ItemKind
from triehh_beam.protocol.randomness.bottom_m import bottom_m
from triehh_beam.protocol.randomness.sampling import Sampler


def _kept_by_bundles(table: pa.Table, ranks: np.ndarray, bounds: CandidateBounds, bundles: int,
                     batch_rows: int) -> set:
    """The (rank, user) pairs kept when ``table`` is split into ``bundles`` bundles of batches."""
    kept = set()
    users = table.column("user_id").to_pylist()
    for rows in np.array_split(np.arange(table.num_rows), bundles):
        smallest = BundleSmallest(bounds.bundle_keep, bounds.rate_bound)
        for start in range(0, len(rows), batch_rows):
            part = rows[start:start + batch_rows]
            batch = table.take(pa.array(part)).to_batches()[0]
            smallest.add(batch, ranks[part])
            for i in part:
                if bounds.rate_bound >= 0 and ranks[i] <= bounds.rate_bound:
                    kept.add((int(ranks[i]), users[i]))
        rest = smallest.rows()
        if rest is not None:
            kept.update(zip(np.asarray(rest.column("rank")).tolist(), rest.column("user_id").to_pylist()))
    return kept


@pytest.mark.parametrize("bundles, batch_rows", [(1, 64), (3, 50), (7, 1000)])
def test_every_covered_bottom_m_is_among_the_candidates(bundles, batch_rows):
    rng = np.random.default_rng(bundles)
    table = user_records(2000, rng)
    users = table.column("user_id").to_pylist()
    ranks = Sampler(b"k" * 32, identity=b"candidates").pass_keys(1).ranks_all(
        *binary_buffers(table.column("user_id")))[0]
    ordered = np.unique(ranks)  # one rank per user
    rate = int(ordered[299])  # the 300th smallest user's rank
    bounds = CandidateBounds(rate_bound=rate, bundle_keep=40)
    kept = _kept_by_bundles(table, ranks, bounds, bundles, batch_rows)
    for m in (1, 5, 40, 120, 300):  # at most bundle_keep, or covered by the rate bound
        sample = {(int(ranks[i]), users[i]) for i in bottom_m(ranks, users, m)}
        assert len(sample) == m and sample <= kept, m
    # Beyond both bounds a bottom-m is not whole: the cut must see it short (it does: it
    # counts the users it kept), so the bounds are what is tested here, not luck.
    sample = {(int(ranks[i]), users[i]) for i in bottom_m(ranks, users, 1500)}
    assert not sample <= kept


def test_bundle_smallest_alone_holds_the_bottom_m_whatever_the_bundles():
    rng = np.random.default_rng(11)
    table = user_records(1500, rng)
    users = table.column("user_id").to_pylist()
    ranks = Sampler(b"k" * 32, identity=b"bundles").pass_keys(1).ranks_all(
        *binary_buffers(table.column("user_id")))[0]
    kept = _kept_by_bundles(table, ranks, CandidateBounds(-1, 25), bundles=5, batch_rows=37)
    sample = {(int(ranks[i]), users[i]) for i in bottom_m(ranks, users, 25)}
    assert sample <= kept
    # Each bundle keeps its own 25 smallest (ties at the cut kept), no more than it must.
    assert len({u for _, u in kept}) <= 5 * 25


@pytest.mark.parametrize("output_rows", [None, 37])
def test_candidates_round_trip_through_parquet_by_round(tmp_path, monkeypatch, output_rows):
    if output_rows is not None:  # a round's rows go out many times per bundle, not only at its end
        monkeypatch.setattr(candidates, "_OUTPUT_ROWS", output_rows)
    rng = np.random.default_rng(5)
    table = user_records(3000, rng)
    keys = Sampler(b"k" * 32, identity=b"round-trip").pass_keys(3)
    ranks = keys.ranks_all(*binary_buffers(table.column("user_id")))
    bounds = CandidateBounds(rate_bound=int(0.05 * 2**64), bundle_keep=10)
    prefix = str(tmp_path / "candidates" / "part")
    with beam.Pipeline() as p:
        (p | beam.Create(table.to_batches(max_chunksize=400))
         | DrawCandidates(keys, [1, 2, 3], bounds)
         | WriteCandidates(prefix, ItemKind.TEXT))
    written = pa.concat_tables([pq.read_table(f) for f in glob.glob(prefix + "-*.parquet")])
    groups = sum(pq.ParquetFile(f).num_row_groups for f in glob.glob(prefix + "-*.parquet"))
    # One row group per output: with 37 output rows, a bundle emits a round's rows every 37 or
    # so (a batch adds up to ~20), not only at its end.
    if output_rows:
        assert groups >= written.num_rows // (2 * output_rows) > 3
    users, items = table.column("user_id").to_pylist(), table.column("item").to_pylist()
    for round_index in (1, 2, 3):
        expected = {(users[i], items[i], int(ranks[round_index - 1][i]))
                    for i in np.flatnonzero(ranks[round_index - 1] <= bounds.rate_bound)}
        part = written.filter(pa.compute.equal(written.column("round"), round_index))
        got = list(zip(part.column("user_id").to_pylist(), part.column("item").to_pylist(),
                       part.column("rank").to_pylist()))
        # Every row under the rate bound, each once (a user's items are distinct here), and
        # above it only what some bundle kept as its smallest, ranked right.
        assert expected <= set(got) and len(got) == len(set(got))
        assert all(rank == int(ranks[round_index - 1][users.index(u)]) for u, _, rank in set(got) - expected)
    # Read back a round at a time (``round_cut.round_candidates``): the same rows, by round.
    for round_index in (1, 2, 3):
        part = written.filter(pa.compute.equal(written.column("round"), round_index))
        read = pa.Table.from_batches(list(round_candidates(candidates_pattern(prefix), round_index)))
        rows = lambda t: sorted(zip(*(t.column(c).to_pylist() for c in ("user_id", "item", "count", "rank"))))
        assert read.num_rows == part.num_rows and rows(read) == rows(part)
