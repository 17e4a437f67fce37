"""Your own Beam pipeline with triehh-beam's public round: a few thousand records of words, the
privacy plan for them, a release's keys, and then one ``RunRound`` per round on the in-process
runner until the trie stops growing; prints each round and the heavy hitters found.

Run it: ``python examples/own_pipeline.py [WORKDIR]`` (about a minute on one core; nothing is
downloaded); each round's result is kept in WORKDIR when given.
The records are generated here, so the script is self-contained; in your pipeline they would
come from ``ReadRecordBatches("gs://bucket/records/*.parquet")`` or any source of Arrow batches
with columns ``user_id`` (binary), ``item`` and ``count``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import pathlib
import tempfile
from typing import Dict, List

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam import RunRound, make_pipeline
from triehh_beam.protocol.items.encoding import ItemEncoder, is_terminated
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.rounds.loop import RoundResult
from triehh_beam.protocol.rounds.trie import Trie

WORDS = ["the", "of", "and", "to", "in", "is", "was", "that", "for", "on", "with", "as", "his", "they",
         "at", "be", "this", "from", "have", "one", "had", "by", "word", "but", "not", "what", "all"]
# A public demonstration seed: a real release draws its seed secretly and keeps it private.
DEMO_SEED = bytes(range(32))
IDENTITY = b"examples/own_pipeline"


def population(users: int, seed: int) -> Dict[str, Dict[str, int]]:
    """user id -> {word: count}: one to three Zipf-distributed words per user."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    weights /= weights.sum()
    held = {}
    for user in range(users):
        words = rng.choice(len(WORDS), size=int(rng.integers(1, 4)), p=weights)
        counts: Dict[str, int] = {}
        for w in words.tolist():
            counts[WORDS[w]] = counts.get(WORDS[w], 0) + 1
        held[f"user-{user}"] = counts
    return held


def record_batches(users: Dict[str, Dict[str, int]], batch_size: int = 1000) -> List[pa.RecordBatch]:
    """The population as Arrow record batches: one (user_id, item, count) row per held word."""
    rows = [(user.encode(), word, count) for user, counts in users.items() for word, count in counts.items()]
    batches = []
    for start in range(0, len(rows), batch_size):
        ids, items, counts = zip(*rows[start:start + batch_size])
        batches.append(pa.record_batch(
            [pa.array(ids, pa.binary()), pa.array(items, pa.string()), pa.array(counts, pa.int64())],
            names=["user_id", "item", "count"]))
    return batches


def run_round(batches, sampler, step: rounds.NextRound, plan, encoder, population_size, workdir) -> RoundResult:
    """One pipeline of your own: the records, the public ``RunRound``, its one result written out.
    A sample cut short by the rank prefilter (odds about 1e-12) is drawn again without it."""
    output = os.path.join(workdir, f"round-{step.index}.json")
    with make_pipeline(PipelineOptions([])) as pipeline:  # the in-process runner
        (
            pipeline
            | "Records" >> beam.Create(batches)
            | "RunRound" >> RunRound(sampler, step.index, plan.theta, encoder, step.frontier,
                                     sample_size=plan.batch_size, population=population_size)
            | "ToJson" >> beam.Map(lambda result: json.dumps(dataclasses.asdict(result)))
            | "Write" >> beam.io.WriteToText(output, num_shards=1, shard_name_template="")
        )
    with open(output, encoding="utf-8") as lines:
        fields = json.loads(lines.read())
    result = RoundResult(**{**fields, "kept": tuple(tuple(p) for p in fields["kept"])})
    if result.sample_short and population_size is not None:
        return run_round(batches, sampler, step, plan, encoder, None, workdir)
    return result


def show(encoder: ItemEncoder, prefix) -> str:
    """A kept prefix as text, ``$`` marking a complete word."""
    return encoder.decode(prefix) + ("$" if is_terminated(prefix) else "")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=4000)
    parser.add_argument("--population-seed", type=int, default=7)
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("workdir", nargs="?", type=pathlib.Path,
                        help="where each round's result is written and kept, as the other examples take "
                             "one (default: a temporary directory, deleted at the end)")
    args = parser.parse_args(argv)

    users = population(args.users, args.population_seed)
    batches = record_batches(users)
    encoder = ItemEncoder(max_length=6)  # words of up to 5 letters and the end mark
    plan = planner.plan(len(users), args.epsilon, 1.0 / len(users) ** 2, encoder.max_length)
    sampler = Sampler(DEMO_SEED, IDENTITY)  # the release's keys derive from these; never the graph
    print(f"{sum(b.num_rows for b in batches)} records of {len(users)} users; plan: m = {plan.batch_size} users "
          f"per round, theta = {plan.theta} votes (epsilon = {args.epsilon})")

    trie = Trie.empty(encoder)
    step = rounds.next_round(trie)
    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory())
        else:
            args.workdir.mkdir(parents=True, exist_ok=True)
            workdir = str(args.workdir)
        while isinstance(step, rounds.NextRound):
            result = run_round(batches, sampler, step, plan, encoder, len(users), workdir)
            shown = " ".join(sorted(show(encoder, p) for p in result.kept))
            print(f"round {step.index}: {len(result.kept)} prefixes kept, {result.users_sampled} users sampled: {shown}")
            trie, step = rounds.apply_round(trie, step, result.kept)
    found = sorted(trie.heavy_hitters())
    print(f"stopped: {step.reason.value}")
    print(f"heavy hitters ({len(found)}): {', '.join(found)}")


if __name__ == "__main__":
    main()
