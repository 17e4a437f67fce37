"""The frequency estimates of a finished discovery (``--estimate-frequencies``), run by the
driver after the rounds: one more checked read of exactly the input the census read
(``passes``) counts the users of the committed trie's discovered items under keys of the
release (``EstimateKeys``: a re-run after a crash releases the same numbers), and the noisy
estimates are read back for the driver to commit before anything is published. The job's
counters are not kept: no figure of this job but the noisy estimates leaves it.
"""

from __future__ import annotations

import math
import uuid

from apache_beam.io.filesystems import FileSystems

from triehh_beam.job.batch import graphs, passes
from triehh_beam.job.batch.jobs import JobRunner, read_single_output
from triehh_beam.job.release import outputs
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.settings import sources
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.estimates.frequency_estimates import LEVEL, EstimateKeys, EstimateTargets
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol.rounds.trie import Trie

__all__ = ["ROWS_PER_SHARD", "run_estimates"]

#: Records per shard of users the estimate pass aims at (a shard is held in memory by a worker).
ROWS_PER_SHARD = 1 << 18


def _shards(records: int) -> int:
    return max(1, min(2048, math.ceil(records / ROWS_PER_SHARD)))


def run_estimates(config: DiscoveryConfig, jobs: JobRunner, state: state_pb2.JobState,
                  trie: Trie) -> state_pb2.FrequencyEstimates:
    """Runs the estimate pass of a finished job and returns the released estimates (noisy).

    A trie with no leaf releases nothing and reads nothing.

    Raises:
      InputChangedError: the input is not what the census read (before or after the pass), a
        file became unreadable, or the pass read another number of records.
    """
    epsilon = state.plan.estimate_epsilon
    targets = EstimateTargets.from_trie(trie)
    if not len(targets):
        return state_pb2.FrequencyEstimates(epsilon=epsilon, half_width=TwoSidedGeometric(epsilon).half_width(LEVEL))
    root = config.resolved_state_dir
    sources.check_unchanged(state, config, "(before the frequency estimates)")
    sampler = Release.of_state(state).sampler()
    keys = EstimateKeys.derive(sampler.seed, sampler.identity)
    name = uuid.uuid4().hex
    output = FileSystems.join(root, "census", f"estimates-{name}.json")
    summary = FileSystems.join(root, "census", f"estimates-{name}.summary.json")
    records = state.input_snapshot.records
    try:
        passes.run_checked_pass(config, jobs, state, lambda p, reported: graphs.build_estimates(
            p, config, keys, targets, epsilon, output, summary, _shards(records), progress=reported,
            as_of_millis=sources.pinned_at(state.input_snapshot)), "estimates", summary, passes.ESTIMATES)
        released = outputs.estimates_from_json(read_single_output(output), config.encoder)
    finally:
        if FileSystems.exists(output):
            FileSystems.delete([output])
    return released
