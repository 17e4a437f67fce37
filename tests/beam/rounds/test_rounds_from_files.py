"""Rounds on written sample tables (``rounds_from_files.RunRoundsFromFiles``: each round's tables read
by path and its votes combined per prefix, in one group or several): the same ``(round,
RoundResult)`` for every round, and the same per-round counters, as ``RunAllRounds`` on the same
tables in memory in one group: several shards, every item kind, a deny list, a path delivered
twice, a round whose sample is short (it keeps nothing) and a frontier that dies out."""

from __future__ import annotations

import glob

import apache_beam as beam
import pytest

from tests.pipeline_checks import check_outputs, counters_of
from tests.pipeline_factory import new_pipeline
from tests.skewed_records import ENCODERS, population as skewed_population, record_batches
from triehh_beam.beam.rounds import rounds_from_files, sampled_rounds
from triehh_beam.beam.samples import sample_pass, samples
from triehh_beam.protocol.randomness.sampling import Sampler


def _both(tmp_path, batches, keys, encoder, m, population, shards, theta, denied, groups, check):
    """One job: the sampling pass, its tables written under ``tmp_path``; every round unrolled on
    the tables in memory (steps ``InMemory...``) and from their paths (``FromFiles...``), each
    round-1 path delivered twice; ``check(in memory's {round: RoundResult}, from files', written
    (round, path)s)`` inside it; the counters of each."""
    def build(p):
        drawn = p | beam.Create(batches) | sample_pass.SampleAllRounds(
            keys, range(1, encoder.max_length + 1), m, population, encoder, False, shards=shards)
        written = drawn["tables"] | samples.WriteSampleTables(str(tmp_path))
        in_memory = drawn["tables"] | "InMemory" >> sampled_rounds.RunAllRounds(
            1, encoder.max_length, theta, frozenset({()}), sample_sizes=drawn["samples"], denied=denied)
        paths = written | "Round1Twice" >> beam.FlatMap(lambda path: [path] * (2 if path[0] == 1 else 1))
        from_files = paths | "FromFiles" >> rounds_from_files.RunRoundsFromFiles(
            1, encoder.max_length, theta, frozenset({()}), drawn["samples"], denied, prefix_groups=groups)
        check_outputs({"memory": in_memory, "files": from_files, "written": written},
                      lambda out: check(dict(out["memory"]), dict(out["files"]), out["written"]))

    pipeline = new_pipeline()
    build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    return counters_of(result, "InMemory"), counters_of(result, "FromFiles")


def _counted(counters):
    return {name: value for name, value in counters.items() if not name.startswith("largest_")}


CASES = [
    # kind, m, population given (short rounds when it exceeds the users), shards, theta, deny list, groups
    ("text", 120, 300, 3, 4, False, 5),
    ("bytes", 200, 300, 1, 3, True, 1),
    ("int", 150, 300, 2, 5, False, 3),
    ("text", 250, 400, 2, 4, True, 2),  # 300 users but 400 said: every round is short
    ("text", 60, 300, 2, 61, False, 1),  # theta above m, any count: round 1 keeps nothing, the frontier dies
]


@pytest.mark.parametrize("kind, m, population, shards, theta, with_deny_list, groups", CASES)
def test_the_same_results_and_counters_as_every_round_unrolled(tmp_path, kind, m, population, shards, theta,
                                                                with_deny_list, groups):
    encoder = ENCODERS[kind]
    batches = record_batches(skewed_population(kind, seed=m), kind)
    keys = Sampler(bytes(range(32)), b"rounds from files").pass_keys(encoder.max_length)
    denied = frozenset()
    if with_deny_list:  # the most common first unit: a deny list that changes votes
        first = encoder.encode({"text": "ab", "bytes": b"\x01\x02", "int": 0}[kind])
        denied = frozenset({first[:1]})
    short = population > 300

    def check(expected, results, written):
        assert results == expected and sorted(results) == list(range(1, encoder.max_length + 1))
        assert all(r.sample_short == short for r in results.values())
        if short:
            assert written == []
        elif theta <= m:
            assert results[1].kept  # the case keeps something
        else:
            assert all(not r.kept for r in results.values())

    expected_counters, counters = _both(tmp_path, batches, keys, encoder, m, population, shards, theta,
                                        denied, groups, check)
    # The counters, not the most rows a step held (which prefix groups change by design).
    assert _counted(counters) == _counted(expected_counters)
    if short:
        assert glob.glob(str(tmp_path / "round-*" / "*.parquet")) == []
    elif theta <= m:
        assert counters["round1.votes_cast"] > 0  # the case votes something
