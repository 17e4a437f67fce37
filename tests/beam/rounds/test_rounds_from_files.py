"""Rounds on written sample tables (``rounds_from_files.RunRoundsFromFiles``: each round's tables read
by path and its votes combined per prefix, in one group or several): the same ``(round,
RoundResult)`` for every round, and the same per-round counters, as ``RunAllRounds`` on the same
tables in memory in one group: several shards, every item kind, a deny list, a path delivered
twice, a round whose sample is short (it keeps nothing) and a frontier that dies out."""

from __future__ import annotations

import glob

import apache_beam as beam
import pytest

from tests.beam.rounds.test_sampled_rounds import ENCODERS, _COLLECTED, _batches, _collect, _population, _run
from triehh_beam.beam.rounds import rounds_from_files, sampled_rounds
from triehh_beam.beam.samples import sample_pass, samples
from triehh_beam.protocol.randomness.sampling import Sampler


def _drawn(batches, keys, encoder, m, population, shards, tmp_path):
    """Every round's sample tables written under ``tmp_path``; (their (round, path), the samples)."""
    def build(p):
        drawn = p | beam.Create(batches) | sample_pass.SampleAllRounds(
            keys, range(1, encoder.max_length + 1), m, population, encoder, False, shards=shards)
        written = drawn["tables"] | samples.WriteSampleTables(str(tmp_path))
        return _collect(written, "written"), _collect(drawn["samples"], "drawn")

    (written_key, drawn_key), _ = _run(build)
    return list(_COLLECTED.get(written_key, [])), list(_COLLECTED[drawn_key])


def _in_memory(written, drawn, encoder, theta, denied):
    def build(p):
        tables = p | "Tables" >> beam.Create(
            [(r, samples.read_sample_table(path)) for r, path in written])
        sizes = p | "Sizes" >> beam.Create(drawn)
        results = tables | sampled_rounds.RunAllRounds(1, encoder.max_length, theta, frozenset({()}),
                                                       sample_sizes=sizes, denied=denied)
        return _collect(results, "in-memory")

    key, counters = _run(build)
    return dict(_COLLECTED[key]), counters


def _from_files(written, drawn, encoder, theta, denied, groups):
    def build(p):
        paths = p | "Paths" >> beam.Create(written + written[:1])  # one path twice: voted once
        sizes = p | "Sizes" >> beam.Create(drawn)
        results = paths | rounds_from_files.RunRoundsFromFiles(1, encoder.max_length, theta, frozenset({()}),
                                                               sizes, denied, prefix_groups=groups)
        return _collect(results, "from-files")

    key, counters = _run(build)
    return dict(_COLLECTED[key]), counters


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
    batches = _batches(_population(kind, seed=m), kind)
    keys = Sampler(bytes(range(32)), b"rounds from files").pass_keys(encoder.max_length)
    written, drawn = _drawn(batches, keys, encoder, m, population, shards, tmp_path)
    denied = frozenset()
    if with_deny_list:  # the most common first unit: a deny list that changes votes
        first = encoder.encode({"text": "ab", "bytes": b"\x01\x02", "int": 0}[kind])
        denied = frozenset({first[:1]})
    expected, expected_counters = _in_memory(written, drawn, encoder, theta, denied)
    results, counters = _from_files(written, drawn, encoder, theta, denied, groups)
    assert results == expected and sorted(results) == list(range(1, encoder.max_length + 1))
    assert counters == expected_counters
    short = population > 300
    assert all(r.sample_short == short for r in results.values())
    if short:
        assert glob.glob(str(tmp_path / "round-*" / "*.parquet")) == [] and written == []
    elif theta <= m:
        assert results[1].kept and counters["round1.votes_cast"] > 0  # the case votes something
    else:
        assert all(not r.kept for r in results.values())
