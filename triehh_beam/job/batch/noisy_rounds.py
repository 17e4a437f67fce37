"""A noisy-rounds discovery's rounds (``--protocol noisy-rounds``, docs/protocol.md §8) inside
the driver's lifecycle: the plan committed and the ledger charged before the sampling pass (at
p_s = 1: every user's items, every round), then one Beam job per round (``run_round``:
``ReleaseNoisyRound`` on that round's tables, the noise keyed by the release, so a retried or
resumed round redraws the same noise), its release (threshold, kept prefixes and their noisy
counts) committed with the round (``record_round``), and published beside the trie
(``published_section``). No vote count leaves the round's combine; nothing below a round's
threshold is written anywhere; the state holds only what is published and private totals."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Dict, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from triehh_beam.beam.releases.noisy_rounds import ReleaseNoisyRound
from triehh_beam.beam.samples import samples
from triehh_beam.beam.text_files import one_text_file
from triehh_beam.job.batch import jobs as jobs_lib
from triehh_beam.job.batch import levels
from triehh_beam.job.batch.discovery_job import copy_state
from triehh_beam.job.release import outputs
from triehh_beam.job.release.planning import noisy_plan
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.central.noisy_release import NoisyRoundKeys, candidate_units, round_candidates
from triehh_beam.protocol.estimates.count_intervals import LEVEL
from triehh_beam.protocol.items.encoding import ItemEncoder, Units
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol.rounds.loop import RoundResult
from triehh_beam.protocol.rounds.trie import Trie

__all__ = ["NOISY_COUNT_NOTE", "NoisyRoundResult", "published_section", "record_round", "run_round"]

NOISY_COUNT_NOTE = (
    "noisy_count: the users whose chosen item (one per user per round, by local frequency) it is, plus "
    "discrete Laplace noise of parameter round_epsilon (unbiased, standard deviation sqrt(2 a) / (1 - a), "
    "a = exp(-round_epsilon)); published only when at least the round's threshold, so the counts of the "
    "released are biased upward near it; half_width: the noise's alone, at level. Each round's threshold "
    "bounds the expected prefixes nobody holds that a release keeps (false_prefixes in the privacy block), "
    "so a kept prefix may be held by nobody")


@dataclasses.dataclass(frozen=True)
class NoisyRoundResult(RoundResult):
    """A noisy round's result: ``kept`` as every round's, plus what it releases.

    Attributes:
      released: the kept prefixes with their noisy counts (each >= threshold), sorted.
      threshold, candidates: the round's threshold and public candidates.
    """

    released: Tuple[Tuple[Units, int], ...] = ()
    threshold: int = 0
    candidates: int = 0


def _units(plan: state_pb2.PrivacyPlan, encoder: ItemEncoder) -> Tuple[str, ...]:
    return candidate_units(plan.alphabet, encoder.unit_size, encoder.eos)


def _released_json(kept_and_users, encoder: ItemEncoder) -> str:
    released, users = kept_and_users
    return json.dumps({"released": [[outputs.units_to_json(p, encoder), c] for p, c in released], "users": users})


def run_round(driver, state: state_pb2.JobState, trie: Trie, round_index: int) -> Tuple[NoisyRoundResult, Dict[str, int]]:
    """Runs round ``round_index`` on its sample (every user) in one Beam job: (its result, the
    job's counters). ``driver``: the ``Driver`` (its samples, keys and job runner)."""
    plan, encoder = state.plan, driver.encoder
    sampler = driver.sampler(state)
    keys = NoisyRoundKeys.derive(sampler.seed, sampler.identity)
    units, frontier = _units(plan, encoder), trie.frontier()
    release = ReleaseNoisyRound(noisy_plan(plan), keys, frontier, units, round_index)
    path = FileSystems.join(driver.config.resolved_state_dir, "rounds",
                            f"round-{round_index:04d}-noisy-{uuid.uuid4().hex}.json")
    samples_dir = levels.samples_dir(driver.config.resolved_state_dir, state.job_id)  # as the driver finds them

    def build(pipeline, reported):
        del reported  # the tables are counted by the vote itself
        (pipeline
         | "ReadSample" >> samples.ReadSampleTables(samples_dir, round_index)
         | "KeyByRound" >> beam.Map(lambda table: (round_index, table))
         | f"ReleaseNoisyRound({round_index})" >> release
         | "ToJson" >> beam.Map(_released_json, encoder=encoder)
         | "Write" >> one_text_file(path))

    drawn = list(state.samples.users_sampled)
    required = drawn[round_index - 1] if 0 < round_index <= len(drawn) else None
    counters = driver.jobs.run(build, f"round {round_index}/{plan.max_length}", required, unit="users")
    document = json.loads(jobs_lib.read_single_output(path))
    FileSystems.delete([path])
    released = tuple(sorted((outputs.units_from_json(p, encoder), int(c)) for p, c in document["released"]))
    candidates = round_candidates(frontier, units)
    result = NoisyRoundResult(
        kept=tuple(p for p, _ in released), users_sampled=int(document["users"]), users_required=required,
        released=released if int(document["users"]) >= (required or 0) else (),
        threshold=noisy_plan(plan).threshold(candidates), candidates=candidates)
    if result.sample_short:  # nothing is computed from an incomplete sample: the driver draws it again
        result = dataclasses.replace(result, kept=())
    return result, counters


def record_round(state: state_pb2.JobState, round_index: int, result: RoundResult) -> state_pb2.JobState:
    """``state`` with round ``round_index``'s release recorded (a copy), for the driver to commit
    with the round; ``state`` itself for any other protocol's result."""
    if not isinstance(result, NoisyRoundResult):
        return state
    state = copy_state(state)
    recorded = state.noisy_rounds.rounds.add(round_index=round_index, threshold=result.threshold,
                                             candidates=result.candidates)
    encoder = Trie.from_proto(state.trie).encoder
    for prefix, count in result.released:
        recorded.kept.add(units=[encoder.unit_to_bytes(u) for u in prefix], noisy_count=count)
    return state


def released(state: state_pb2.JobState, encoder: ItemEncoder) -> Dict[Units, int]:
    """Every prefix the committed rounds kept, with its noisy count."""
    return {tuple(encoder.unit_from_bytes(u) for u in p.units): int(p.noisy_count)
            for r in state.noisy_rounds.rounds for p in r.kept}


def published_section(state: state_pb2.JobState, trie: Trie) -> Optional[dict]:
    """``heavy_hitters.json``'s ``noisy_rounds`` section (None for other protocols): each round's
    threshold and candidates, the noisy count of every heavy hitter and frequent prefix (the
    trie's leaves: their estimates) and the half width of the noise's 95% interval. Nothing below a threshold: the state holds nothing else."""
    if not state.plan.alphabet:
        return None
    encoder = trie.encoder
    counts = released(state, encoder)
    return {"noisy_rounds": {
        "thresholds": [int(r.threshold) for r in state.noisy_rounds.rounds],
        "candidates": [int(r.candidates) for r in state.noisy_rounds.rounds],
        "heavy_hitters": [{"item": outputs.json_value(encoder.decode(p), encoder), "noisy_count": counts[p]}
                          for p in trie.heavy_hitter_sequences() if p in counts],
        "frequent_prefixes": [{"prefix": outputs.json_value(encoder.decode(p), encoder), "noisy_count": counts[p]}
                              for p in trie.frequent_prefix_sequences() if p in counts],
        "level": LEVEL,
        "half_width": TwoSidedGeometric(state.plan.round_epsilon).half_width(LEVEL),
        "note": NOISY_COUNT_NOTE,
    }}
