"""The Beam glue of triehh-beam: PTransforms, DoFns and record I/O over the pure protocol modules.

Drop the transforms into your own pipeline::

    records = p | ReadRecordBatches("gs://bucket/records/*.parquet")
    result = records | RunRound(sampler, round_index=1, sample_size=m, theta=theta,
                                encoder=encoder, frontier=frozenset({()}), population=n)
    # one element: a RoundResult (result.kept, result.sample_short)

or draw every round's sample in one pass and run the rounds on the samples only::

    drawn = records | SampleAllRounds(sampler.pass_keys(L), range(1, L + 1), m, n, encoder)
    results = drawn["tables"] | RunAllRounds(1, L, theta, frozenset({()}),
                                             sample_sizes=drawn["samples"])
    # one (round, RoundResult) per round
"""

from triehh_beam.beam.read import ReadRecordBatches
from triehh_beam.beam.runners import make_pipeline
from triehh_beam.beam.sample_pass import RoundSample, SampleAllRounds
from triehh_beam.beam.sampled_rounds import RunAllRounds, RunSampledRound
from triehh_beam.beam.samples import ReadSampleTables, WriteSampleTables
from triehh_beam.io.schema import RecordFormatError
from triehh_beam.beam.transforms import (
    METRICS_NAMESPACE,
    CountAndPrune,
    CountDistinctUsers,
    GroupByUser,
    MapToPrefixVotes,
    RunRound,
    SampleUsers,
)

__all__ = [
    "METRICS_NAMESPACE",
    "CountAndPrune",
    "CountDistinctUsers",
    "GroupByUser",
    "MapToPrefixVotes",
    "ReadRecordBatches",
    "ReadSampleTables",
    "RecordFormatError",
    "RoundSample",
    "RunAllRounds",
    "RunRound",
    "RunSampledRound",
    "SampleAllRounds",
    "SampleUsers",
    "WriteSampleTables",
    "make_pipeline",
]
