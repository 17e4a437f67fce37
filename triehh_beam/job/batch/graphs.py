"""The Beam job graphs a discovery runs, built on ``pipeline`` by the driver, which reads each
job's small outputs back: the census (the distinct users, those without a usable item, the
records counted and the files that cannot be read), the sampling pass (one read draws every
round's sample into the private artefact, and with ``rounds`` runs them too), a round on its
sample, the remaining rounds in one job (each level written as its round completes), the
frequency estimates, and a whole-item release.
"""

from __future__ import annotations

import json
import math
from typing import FrozenSet, Mapping, Optional, Sequence, Tuple, Union

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from triehh_beam.beam import census, transforms
from triehh_beam.beam.read import RECORDS_TAG, REJECTED_TAG, UNREADABLE_TAG, WriteDeadLetters
from triehh_beam.beam.releases.estimates import EstimateFrequencies
from triehh_beam.beam.releases.partitions import ReleasePartitions
from triehh_beam.beam.releases.whole_items import ReleaseWholeItems
from triehh_beam.beam.rounds import sampled_rounds
from triehh_beam.beam.rounds.prefix_combine import prefix_groups
from triehh_beam.beam.rounds.rounds_from_files import RunRoundsFromFiles
from triehh_beam.beam.samples import sample_pass, samples
from triehh_beam.beam.samples.candidates import CandidateBounds, DrawCandidates, WriteCandidates
from triehh_beam.beam.samples.round_cut import CutRounds
from triehh_beam.beam.text_files import one_text_file
from triehh_beam.io.schema import RecordFormatError
from triehh_beam.job.batch import levels
from triehh_beam.job.release import outputs
from triehh_beam.job.settings import sources
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.progress import CountProgressDoFn
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.central.partition_release import SelectionKeys
from triehh_beam.protocol.central.partition_selection import PartitionSelectionPlan
from triehh_beam.protocol.estimates.frequency_estimates import EstimateKeys, EstimateTargets
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.protocol.randomness.sampling import (PassKeys, Sampler, bernoulli_threshold,
                                                      rank_prefilter_bound, users_required)

__all__ = [
    "build_census",
    "build_first_read",
    "build_estimates",
    "build_first_pass",
    "build_rounds",
    "build_sampled_round",
    "build_sampling",
    "build_sampling_from_candidates",
    "build_whole_item_release",
    "census_from_json",
    "refuse_unreadable",
    "unreadable_path",
]


def build_census(pipeline: beam.Pipeline, config: DiscoveryConfig, sampler: Sampler, output_path: str,
                 progress: Optional[str] = None, as_of_millis: Optional[int] = None,
                 census_spill: Optional[str] = None):
    """Adds the census job to ``pipeline``: the number of distinct users, the records they were
    counted over and the users with no usable item (``beam.census``), written as one JSON line
    (``census_from_json`` reads it back). Returns the records read (zero counts dropped).

    The files that cannot be read are written as JSON lines ``[file, message]`` to
    ``unreadable_path(output_path)``, for the driver to refuse them before any round. With
    ``config.dead_letter``, the census (the one job that reads every record before any round)
    also writes the rejected rows there. With ``progress`` (a ``ProgressChannel``'s file) the
    records read are reported there as they are read. ``as_of_millis``: the instant a BigQuery
    table is read as of (``sources.pin``; None for files and queries). ``census_spill``: a
    private directory where the census spills its fingerprints (``census.TakeCensus``), for the
    caller to delete once the job has ended (None: combined in memory, all n held at once).
    """
    read = pipeline | "ReadRecords" >> sources.read_transform(
        config, dead_letter=bool(config.dead_letter), as_of_millis=as_of_millis
    ).with_unreadable_output()
    if config.dead_letter:
        read[REJECTED_TAG] | "WriteDeadLetters" >> WriteDeadLetters(config.dead_letter)
    _write_unreadable(read, output_path)
    records = _reported(read[RECORDS_TAG], progress) | "DropZeroCounts" >> beam.ParDo(transforms.DropZeroCountsDoFn())
    counted = records | "CountRecords" >> transforms.CountRows()
    (
        records
        | "TakeCensus" >> census.TakeCensus(sampler, config.encoder, config.truncate_long_items,
                                            spill_prefix=census_spill, spill_budget=config.worker_budget)
        | "Format" >> beam.Map(_census_json, records=beam.pvalue.AsSingleton(counted))
        | "Write" >> one_text_file(output_path)
    )
    return records


def build_first_pass(pipeline: beam.Pipeline, config: DiscoveryConfig, sampler: Sampler, keys: PassKeys,
                     bounds: CandidateBounds, output_path: str, candidates_prefix: str,
                     progress: Optional[str] = None, as_of_millis: Optional[int] = None,
                     census_spill: Optional[str] = None) -> None:
    """Adds a fresh discovery's one read of its records: ``build_census`` (written as it writes
    it, spilling to ``census_spill``), and in the same read every round's candidates
    (``beam.samples.candidates``, ranked with ``keys``, kept under ``bounds``) written to
    ``candidates_prefix``, for ``build_sampling_from_candidates`` to cut to the plan's m once the
    census is charged."""
    records = build_census(pipeline, config, sampler, output_path, progress, as_of_millis, census_spill)
    (
        records
        | "DrawCandidates" >> DrawCandidates(keys, range(1, keys.max_rounds + 1), bounds, config.worker_budget)
        | "WriteCandidates" >> WriteCandidates(candidates_prefix, config.encoder.kind)
    )


def build_first_read(pipeline: beam.Pipeline, config: DiscoveryConfig, sampler: Sampler, output_path: str,
                     candidates: Optional[Tuple[PassKeys, CandidateBounds, str]] = None,
                     progress: Optional[str] = None, as_of_millis: Optional[int] = None,
                     census_spill: Optional[str] = None) -> None:
    """Adds a discovery's first job, the one read before its plan: ``build_census``, or with
    ``candidates`` (the pass keys, the candidate bounds and a files prefix: a trie's rounds to
    cut once the census is charged) ``build_first_pass``. The driver runs it
    (``jobs.take_census``) and ``jobs.submit_job_graphs`` submits it."""
    if candidates is None:
        build_census(pipeline, config, sampler, output_path, progress, as_of_millis, census_spill)
    else:
        keys, bounds, prefix = candidates
        build_first_pass(pipeline, config, sampler, keys, bounds, output_path, prefix, progress, as_of_millis,
                         census_spill)


def _census_json(counted: census.Census, records: int) -> str:
    # The users without a usable item by the length of their shortest item (null: none of
    # their items can be encoded), as [length, users] pairs.
    lengths = [[None if length == census.NEVER else length, users]
               for length, users in sorted(counted.unusable_lengths.items())]
    return json.dumps({"users": counted.users, "records": records, "usable_users": counted.usable_users,
                       "unusable_lengths": lengths})


def census_from_json(data: bytes) -> Tuple[census.Census, int]:
    """The census a ``build_census`` job wrote: (its ``Census``, the records it counted)."""
    document = json.loads(data)
    lengths = {census.NEVER if length is None else int(length): int(users)
               for length, users in document.get("unusable_lengths", [])}
    users = int(document["users"])
    return census.Census(users, int(document.get("usable_users", users)), lengths), int(document["records"])


def _reported(pcollection, progress: Optional[str], label: str = "ReportProgress"):
    """``pcollection`` through a step that reports its rows to ``progress`` (None: as is)."""
    if progress is None:
        return pcollection
    return pcollection | label >> beam.ParDo(CountProgressDoFn(progress)).with_input_types(
        pcollection.element_type).with_output_types(pcollection.element_type)


def unreadable_path(census_output_path: str) -> str:
    """Where ``build_census`` or ``build_first_pass`` writes the files it could not read."""
    return census_output_path + ".unreadable.jsonl"


def refuse_unreadable(lines: bytes) -> None:
    """Raises RecordFormatError naming every file the census could not read (none: returns)."""
    messages = sorted(json.loads(line)[1] for line in lines.decode("utf-8").splitlines() if line)
    if len(messages) == 1:
        raise RecordFormatError(messages[0])
    if messages:
        raise RecordFormatError(f"{len(messages)} files cannot be read: " + "; ".join(messages))


def _write_unreadable(read, output_path: str) -> None:
    (
        read[UNREADABLE_TAG]
        | "UnreadableToJson" >> beam.Map(lambda unreadable: json.dumps(list(unreadable)))
        | "WriteUnreadable" >> one_text_file(unreadable_path(output_path))
    )


def _read_counted_records(pipeline: beam.Pipeline, config: DiscoveryConfig, output_path: str,
                          progress: Optional[str], as_of_millis: Optional[int]):
    """The records a pass after the census reads (files that cannot be read written beside
    ``output_path``, ``unreadable_path``; zero counts dropped), reported as ``build_census``'s."""
    read = pipeline | "ReadRecords" >> sources.read_transform(config, as_of_millis=as_of_millis).with_unreadable_output()
    _write_unreadable(read, output_path)
    return _reported(read[RECORDS_TAG] | "DropZeroCounts" >> beam.ParDo(transforms.DropZeroCountsDoFn()), progress)


def build_sampling(
    pipeline: beam.Pipeline,
    config: DiscoveryConfig,
    keys: PassKeys,
    plan: state_pb2.PrivacyPlan,
    rounds: Sequence[int],
    population: Optional[int],
    samples_dir: str,
    summary_path: str,
    candidates_prefix: str,
    run_rounds_into: Optional[str] = None,
    progress: Optional[str] = None,
    as_of_millis: Optional[int] = None,
    denied: FrozenSet[Units] = frozenset(),
) -> None:
    """Adds the sampling pass: every round in ``rounds`` sampled in one read of the records.

    TrieHH's samples are bottom-m (``plan.batch_size``), TrieHH++'s Bernoulli
    (``plan.sample_probability``). The read keeps each round's candidates as a fresh
    discovery's does, under the rank prefilter of the known ``population`` (None: every record
    is a candidate, for a round whose sample came up short) or TrieHH++'s exact Bernoulli cut,
    written to ``candidates_prefix`` (the caller deletes them); once they are written the same
    job cuts them a round at a time (``round_cut.CutRounds``), so nothing that grows with the
    input is held in memory. Writes each round's sample under ``samples_dir`` and one JSON line
    to ``summary_path``: ``{"records": records ranked, "users_sampled": {round: users}}``.
    Files that cannot be read are written as the census writes them. With ``run_rounds_into``
    (a levels directory), the rounds also run in this job, from round ``rounds[0]`` on the empty
    trie's frontier, each level written there as soon as its round completes. ``progress``: as
    ``build_census`` (the records ranked); ``as_of_millis``: as ``build_census`` (the census's).
    ``denied``: the deny list's sequences, applied by the rounds' votes (never by the sample).
    """
    records = _read_counted_records(pipeline, config, summary_path, progress, as_of_millis)
    if Protocol(plan.protocol).samples_by_probability:  # TrieHH++: each user with probability p_s, tau votes kept
        bound = bernoulli_threshold(plan.sample_probability) - 1  # -1: nobody
    else:
        bound = 2**64 - 1 if population is None else rank_prefilter_bound(population, plan.batch_size)
    written = (
        records
        | "DrawCandidates" >> DrawCandidates(keys, rounds, CandidateBounds(rate_bound=bound, bundle_keep=0),
                                             config.worker_budget)
        | "WriteCandidates" >> WriteCandidates(candidates_prefix, config.encoder.kind)
    )
    ranked = records | "RecordsRanked" >> transforms.CountRows()
    _cut_and_run(pipeline, config, keys, plan, rounds, population, candidates_prefix, samples_dir, summary_path,
                 run_rounds_into, beam.pvalue.AsSingleton(ranked), denied, after=written)


def build_sampling_from_candidates(
    pipeline: beam.Pipeline,
    config: DiscoveryConfig,
    keys: PassKeys,
    plan: state_pb2.PrivacyPlan,
    candidates_prefix: str,
    population: int,
    samples_dir: str,
    summary_path: str,
    run_rounds_into: Optional[str] = None,
    records_ranked: int = 0,
    denied: FrozenSet[Units] = frozenset(),
) -> None:
    """Adds the cut of a first pass's candidates to every round's sample (``plan``'s m of
    ``population`` users, or TrieHH++'s p_s), a round at a time (``round_cut.CutRounds``),
    written and summarised as ``build_sampling`` writes them (``records``: ``records_ranked``),
    the rounds run too with ``run_rounds_into``, in order, each on its written tables
    (``rounds_from_files.RunRoundsFromFiles``: a combine per prefix)."""
    _cut_and_run(pipeline, config, keys, plan, list(range(1, plan.max_length + 1)), population, candidates_prefix,
                 samples_dir, summary_path, run_rounds_into, records_ranked, denied)


def _cut_and_run(pipeline, config: DiscoveryConfig, keys: PassKeys, plan: state_pb2.PrivacyPlan,
                 rounds: Sequence[int], population: Optional[int], candidates_prefix: str, samples_dir: str,
                 summary_path: str, run_rounds_into: Optional[str], records_ranked, denied: FrozenSet[Units],
                 after=None) -> None:
    """The cut of written candidates to ``rounds``' samples (``round_cut.CutRounds``: the plan's m
    of ``population`` users, required unless the population is unknown, or TrieHH++'s p_s), its
    summary, and with ``run_rounds_into`` the rounds on them (``RunRoundsFromFiles``), each
    level written there as its round completes."""
    by_probability = Protocol(plan.protocol).samples_by_probability
    if by_probability:
        sizes = dict(sample_size=None, sample_probability=plan.sample_probability)
    else:
        sizes = dict(sample_size=plan.batch_size, sample_probability=None)
    required = users_required(plan.batch_size, population, by_probability)
    drawn = pipeline | "CutRounds" >> CutRounds(
        candidates_prefix, keys, rounds, encoder=config.encoder, truncate=config.truncate_long_items,
        shards=_shards(config, _expected_users(population, **sizes), **sizes), samples_dir=samples_dir,
        users_required=required, records_ranked=records_ranked, after=after, budget=config.worker_budget, **sizes)
    _summarise(drawn["samples"], summary_path)
    if run_rounds_into is not None:
        _rounds_on_files(drawn["tables"], config, plan, rounds[0], frozenset({()}), run_rounds_into, denied,
                         _expected_users(population, **sizes), sample_sizes=drawn["samples"])


def _rounds_on_files(written, config: DiscoveryConfig, plan: state_pb2.PrivacyPlan, first_round: int,
                     frontier: FrozenSet[Units], levels_dir: str, denied: FrozenSet[Units], expected_users: int,
                     sample_sizes=None, users_required=None, records_ranked: Optional[int] = None) -> None:
    """Rounds ``first_round``..L on their written tables (``(round, path)``), each level written
    to ``levels_dir`` as its round completes: each round's tables voted over workers and its votes
    combined per prefix in groups that keep within the worker budget (``RunRoundsFromFiles``,
    ``prefix_combine.prefix_groups``: nothing below theta leaves the combine). ``sample_sizes``
    (the cut's) or ``users_required`` and ``records_ranked``: as ``RunRoundsFromFiles``'s."""
    results = written | "RunRounds" >> RunRoundsFromFiles(
        first_round, plan.max_length, plan.theta, frontier, sample_sizes, denied, users_required, records_ranked,
        prefix_groups=prefix_groups(expected_users, config.worker_budget))
    results | "WriteLevels" >> beam.ParDo(_WriteLevelDoFn(levels_dir, config.encoder))


def _expected_users(population: Optional[int], sample_size: Optional[int], sample_probability: Optional[float]) -> int:
    """A round's expected sample: m, or ``p_s * n`` (16 shards' worth when n is unknown)."""
    if sample_probability is not None:
        return math.ceil(sample_probability * population) if population else 16 * 16384
    return sample_size


def _round_users(plan: state_pb2.PrivacyPlan, users_required: Optional[int]) -> int:
    """A round's users as its plan expects them: required, m, or ``p_s * n``."""
    if users_required:
        return users_required
    if Protocol(plan.protocol).samples_by_probability:
        return math.ceil(plan.sample_probability * plan.population)
    return plan.batch_size


def _shards(config: DiscoveryConfig, expected_users: int, sample_size: Optional[int],
            sample_probability: Optional[float]) -> int:
    """Sample tables per round: ``sample_pass.shard_count``'s, or more (up to 256) when a shard
    of that many users could pass an eighth of the worker budget (a shard's rows are one step's)."""
    return max(sample_pass.shard_count(max(1, expected_users)),
               min(256, math.ceil(expected_users / max(1, config.worker_budget // 8))))


def _summarise(drawn_samples, summary_path: str) -> None:
    (
        drawn_samples
        | "ToList" >> beam.combiners.ToList()
        | "Summary" >> beam.Map(_sampling_summary)
        | "WriteSummary" >> one_text_file(summary_path)
    )


def _sampling_summary(drawn) -> str:
    # Every round's RoundSample reports the same records ranked: the pass read them once.
    return json.dumps({
        "records": max((sample.records_ranked for _, sample in drawn), default=0),
        "users_sampled": {str(r): sample.users_sampled for r, sample in sorted(drawn)},
    })


def build_sampled_round(
    pipeline: beam.Pipeline,
    config: DiscoveryConfig,
    samples_dir: str,
    plan: state_pb2.PrivacyPlan,
    frontier: FrozenSet[Units],
    round_index: int,
    output_path: str,
    users_required: Optional[int],
    records_ranked: Optional[int],
    progress: Optional[str] = None,
    denied: FrozenSet[Units] = frozenset(),
) -> None:
    """Adds round ``round_index`` on its sample alone: its ``RoundResult`` as one JSON line.
    ``progress``: as ``build_census`` (the sampled users read); ``denied``: the deny list's
    sequences."""
    (
        _reported(pipeline | "ReadSample" >> samples.ReadSampleTables(samples_dir, round_index), progress)
        | f"RunSampledRound({round_index})" >> sampled_rounds.RunSampledRound(
            round_index, plan.theta, frontier, users_required=users_required, records_ranked=records_ranked,
            denied=denied, prefix_groups=prefix_groups(_round_users(plan, users_required), config.worker_budget))
        | "ToJson" >> beam.Map(outputs.round_result_to_json, encoder=config.encoder)
        | "Write" >> one_text_file(output_path)
    )


def build_rounds(
    pipeline: beam.Pipeline,
    config: DiscoveryConfig,
    samples_dir: str,
    plan: state_pb2.PrivacyPlan,
    frontier: FrozenSet[Units],
    first_round: int,
    levels_dir: str,
    users_required: Union[None, int, Mapping[int, int]],
    records_ranked: Optional[int],
    progress: Optional[str] = None,
    denied: FrozenSet[Units] = frozenset(),
) -> None:
    """Adds rounds ``first_round``..L on their samples (a resume's: drawn by an earlier job), on
    the same bounded path as a fresh run's (``_rounds_on_files``: the tables are read by path,
    one at a time), each level written to ``levels_dir`` as soon as its round completes.
    ``users_required``: one for every round, or per round (TrieHH++'s drawn sizes).
    ``progress``: unused (the rounds read their tables themselves); ``denied``: the deny list's
    sequences."""
    del progress
    rounds = range(first_round, plan.max_length + 1)
    written = (
        pipeline
        | "SamplePatterns" >> beam.Create([(r, samples.round_pattern(samples_dir, r)) for r in rounds])
        | "MatchTables" >> beam.FlatMap(_tables_of).with_output_types(Tuple[int, str])
    )
    if isinstance(users_required, Mapping):
        expected = max(users_required.values(), default=0)
    else:
        expected = plan.batch_size if users_required is None else users_required
    _rounds_on_files(written, config, plan, first_round, frontier, levels_dir, denied, expected,
                     users_required=users_required, records_ranked=records_ranked)


def _tables_of(round_and_pattern: Tuple[int, str]):
    """``(round, pattern)`` -> ``(round, path)`` of every sample table matching it."""
    round_index, pattern = round_and_pattern
    for metadata in FileSystems.match([pattern])[0].metadata_list:
        yield round_index, metadata.path


class _WriteLevelDoFn(beam.DoFn):
    """Writes one round's result as its level file, atomically, as soon as it is computed."""

    def __init__(self, directory: str, encoder):
        self._directory = directory
        self._encoder = encoder

    def process(self, element):
        round_index, result = element
        levels.write_level(self._directory, round_index, result, self._encoder)
        yield round_index


def build_estimates(
    pipeline: beam.Pipeline,
    config: DiscoveryConfig,
    keys: EstimateKeys,
    targets: EstimateTargets,
    epsilon: float,
    output_path: str,
    summary_path: str,
    shards: int,
    progress: Optional[str] = None,
    as_of_millis: Optional[int] = None,
) -> None:
    """Adds the frequency estimates' pass: every record read once more, the released estimates
    written as one JSON line to ``output_path`` (``outputs.estimates_to_json``: noisy numbers
    only) and ``{"records": records read}`` to ``summary_path`` (checked against the census);
    files that cannot be read are written as the census writes them. ``progress`` and
    ``as_of_millis``: as ``build_census``."""
    records = _read_counted_records(pipeline, config, summary_path, progress, as_of_millis)
    (
        records
        | "CountRecords" >> transforms.CountRows()
        | "Summary" >> beam.Map(lambda records: json.dumps({"records": records}))
        | "WriteSummary" >> one_text_file(summary_path)
    )
    (
        records
        | "EstimateFrequencies" >> EstimateFrequencies(keys, epsilon, targets, config.encoder,
                                                       config.truncate_long_items, shards)
        | "ToJson" >> beam.Map(outputs.estimates_to_json, encoder=config.encoder)
        | "Write" >> one_text_file(output_path)
    )


def build_whole_item_release(
    pipeline: beam.Pipeline,
    config: DiscoveryConfig,
    keys: PassKeys,
    plan: state_pb2.PrivacyPlan,
    population: Optional[int],
    output_path: str,
    progress: Optional[str] = None,
    as_of_millis: Optional[int] = None,
    selection: Optional[Tuple[PartitionSelectionPlan, SelectionKeys]] = None,
) -> None:
    """Adds whole-item sample-and-threshold's one pass: the records read once, each user kept with
    probability ``plan.sample_probability`` by its round-1 rank (``keys``: ``pass_keys(1)``), the
    kept users' whole-item reports counted and thresholded at ``plan.theta`` (tau), written as one
    JSON line to ``output_path``: ``{"released": [[units as hex, count], ...], "users_sampled": k,
    "records": records ranked}`` (counts >= tau only). ``population`` only sizes the shards.
    Files that cannot be read are written as the census writes them; ``progress`` and
    ``as_of_millis``: as ``build_census``. With ``selection`` (partition selection's plan and
    keys; ``plan.sample_probability`` is 1) every user contributes and the items are kept by
    their keyed coins, each written with its noisy count (null without counts)."""
    records = _read_counted_records(pipeline, config, output_path, progress, as_of_millis)
    # Partition selection reads every user: tables of ~128k users (each table encodes its users'
    # distinct items once, so fewer, larger tables repeat less of the vocabulary).
    shards = None if selection is None else max(1, min(256, -(-(population or 1) // 131072)))
    drawn = records | "SampleOnce" >> sample_pass.SampleAllRounds(
        keys, [1], sample_size=None, population=population, encoder=config.encoder, truncate=False,
        sample_probability=plan.sample_probability, shards=shards)
    release = (ReleaseWholeItems(plan.theta) if selection is None else ReleasePartitions(*selection))
    (
        drawn["tables"]
        | "ReleaseWholeItems" >> release
        | "ToJson" >> beam.Map(_release_json, encoder=config.encoder,
                               drawn=beam.pvalue.AsSingleton(drawn["samples"]))
        | "Write" >> one_text_file(output_path)
    )


def _release_json(release, encoder, drawn) -> str:
    released, _ = release
    _, sample = drawn  # (1, RoundSample): the one round's
    return json.dumps({"released": [[outputs.units_to_json(s, encoder), count] for s, count in released],
                       "users_sampled": sample.users_sampled, "records": sample.records_ranked})
