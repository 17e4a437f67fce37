#!/usr/bin/env python
"""Quick figures for the one-pass sampling and the columnar vote (not a test, not the issue's
full benchmark; ``round_throughput.py`` is that).

  vote   the columnar vote and count (``protocol.columnar``) of ``--users`` sampled users holding
         1 to 5 words each, against ``vote.client_vote`` called per user, same votes checked.
  pass   ``ReadRecordBatches | DropZeroCounts | SampleAllRounds(L) | WriteSampleTables`` on the
         in-process runner over ``--records`` one-word users in one Parquet file, against reading
         the same file with pyarrow and hashing every user id once (``RoundKeys.ranks_packed``);
         then one round on the sample (``ReadSampleTables | RunSampledRound``).

Usage: ``python benchmarks/sample_pass_quick.py vote --users 200000`` and
``python benchmarks/sample_pass_quick.py pass --records 1000000 --max-length 10``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

SEED = b"triehh-beam quick benchmark seed"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(label, function):
    wall, cpu = time.perf_counter(), _cpu()
    value = function()
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    print(f"{label:<44} wall {wall:8.3f} s   cpu {cpu:8.3f} s")
    return value, wall


def _words(rng, count):
    letters = np.array(list("etaoinshrdlucmfw"))
    return ["".join(letters[rng.integers(0, 16, size=rng.integers(3, 9))]) for _ in range(count)]


def vote(users: int) -> None:
    from triehh_beam.protocol import columnar
    from triehh_beam.protocol.encoding import ItemEncoder
    from triehh_beam.protocol.vote import client_vote

    rng = np.random.default_rng(1)
    encoder = ItemEncoder(max_length=10)
    vocabulary = sorted({encoder.encode(w) for w in _words(rng, 5000)})
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    held = rng.integers(1, 6, size=users)
    picks = rng.choice(len(vocabulary), size=int(held.sum()), p=weights / weights.sum())
    counts = rng.integers(1, 4, size=len(picks))
    offsets = np.concatenate([[0], np.cumsum(held)])
    # A user's rows as pairs (a word picked twice is two rows: client_vote sums them).
    per_user = [
        list(zip((vocabulary[p] for p in picks[offsets[i] : offsets[i + 1]]), counts[offsets[i] : offsets[i + 1]].tolist()))
        for i in range(users)
    ]
    uniforms = rng.random(users)
    frontier = frozenset(s[:2] for s in vocabulary[:300])
    round_index = 3

    def reference():
        tally = {}
        for weighted, u in zip(per_user, uniforms):
            v = client_vote(weighted, frontier, round_index, float(u))
            if v is not None:
                tally[v] = tally.get(v, 0) + 1
        return tally

    def columnar_path():
        table = columnar.sequence_table(vocabulary, offsets, picks, counts)
        return columnar.count_votes(table, uniforms, frontier, round_index).counts

    expected, slow = _timed(f"client_vote per user ({users:,} users)", reference)
    got, fast = _timed(f"columnar table + vote ({users:,} users)", columnar_path)
    table = columnar.sequence_table(vocabulary, offsets, picks, counts)
    _, vote_only = _timed("columnar vote only (table built)", lambda: columnar.count_votes(table, uniforms, frontier, round_index))
    assert got == expected
    print(f"speed-up: {slow / fast:.1f}x (table + vote), {slow / vote_only:.1f}x (vote only); same votes")


def sample_pass(records: int, max_length: int, m: int) -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.beam import runners, samples, sample_pass as pass_lib, sampled_rounds, transforms
    from triehh_beam.beam.read import ReadRecordBatches
    from triehh_beam.io.normalise import binary_buffers
    from triehh_beam.protocol.encoding import ItemEncoder
    from triehh_beam.protocol.sampling import Sampler

    workdir = tempfile.mkdtemp(prefix="sample-pass-")
    path = os.path.join(workdir, "records.parquet")
    rng = np.random.default_rng(2)
    words = _words(rng, 20000)
    weights = 1.0 / np.arange(1, len(words) + 1)
    ids = ((np.arange(records, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(2)).astype(np.int64)
    items = np.array(words, dtype=object)[rng.choice(len(words), size=records, p=weights / weights.sum())]
    pq.write_table(pa.table({"user_id": ids, "item": pa.array(items, pa.string())}), path, row_group_size=65536)
    sampler = Sampler(SEED, b"bench")
    encoder = ItemEncoder(max_length=max_length)

    def read_and_hash():
        keys = sampler.round_keys(1)
        n = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["user_id"]):
            users = batch.column(0).cast(pa.string()).cast(pa.binary())
            keys.ranks_packed(*binary_buffers(users))
            n += batch.num_rows
        return n

    _, baseline = _timed(f"read + hash once ({records:,} records)", read_and_hash)
    out = os.path.join(workdir, "samples")

    def run_pass():
        pipeline = runners.make_pipeline(PipelineOptions([]))
        drawn = (
            pipeline
            | "Read" >> ReadRecordBatches(path)
            | "DropZeroCounts" >> beam.ParDo(transforms.DropZeroCountsDoFn())
            | pass_lib.SampleAllRounds(sampler.pass_keys(max_length), range(1, max_length + 1), m, records, encoder)
        )
        drawn["tables"] | samples.WriteSampleTables(out)
        pipeline.run().wait_until_finish()

    _, one_pass = _timed(f"SampleAllRounds L={max_length} m={m:,} (one job)", run_pass)

    def one_round():
        pipeline = runners.make_pipeline(PipelineOptions([]))
        pipeline | samples.ReadSampleTables(out, 1) | sampled_rounds.RunSampledRound(1, 10, frozenset({()}))
        pipeline.run().wait_until_finish()

    _, round_time = _timed("one round on its sample (one job)", one_round)
    print(f"pass / (read + hash): {one_pass / baseline:.1f}x; round / (read + hash): {round_time / baseline:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["vote", "pass"])
    parser.add_argument("--users", type=int, default=200000)
    parser.add_argument("--records", type=int, default=1000000)
    parser.add_argument("--max-length", type=int, default=10)
    parser.add_argument("--m", type=int, default=9516, help="users per round (planner's m for n=10^6)")
    args = parser.parse_args()
    if args.what == "vote":
        vote(args.users)
    else:
        sample_pass(args.records, args.max_length, args.m)


if __name__ == "__main__":
    main()
