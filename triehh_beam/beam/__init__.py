"""The Beam glue of triehh-beam: PTransforms, DoFns and record I/O over the pure protocol modules.

One round in your own pipeline (the transforms a discovery job runs)::

    records = p | ReadRecordBatches("gs://bucket/records/*.parquet")
    result = records | RunRound(sampler, round_index=1, theta=theta, encoder=encoder,
                                sample_size=m, population=n)
    # one element: a RoundResult (result.kept, result.sample_short)

or every round's sample in one pass and the rounds on the samples only::

    drawn = records | SampleAllRounds(sampler.pass_keys(L), range(1, L + 1), m, n, encoder)
    results = drawn["tables"] | RunAllRounds(1, L, theta, frozenset({()}),
                                             sample_sizes=drawn["samples"])
    # one (round, RoundResult) per round
"""

from triehh_beam.beam.read import ReadRecordBatches
from triehh_beam.beam.run_round import RunRound
from triehh_beam.beam.runners import make_pipeline
from triehh_beam.beam.sample_pass import RoundSample, SampleAllRounds
from triehh_beam.beam.sampled_rounds import RunAllRounds, RunSampledRound, frontier_after
from triehh_beam.beam.samples import ReadSampleTables, WriteSampleTables
from triehh_beam.beam.transforms import METRICS_NAMESPACE, CountDistinctUsers, DropZeroCountsDoFn
from triehh_beam.io.schema import RecordFormatError

__all__ = [
    "METRICS_NAMESPACE",
    "CountDistinctUsers",
    "DropZeroCountsDoFn",
    "ReadRecordBatches",
    "ReadSampleTables",
    "RecordFormatError",
    "RoundSample",
    "RunAllRounds",
    "RunRound",
    "RunSampledRound",
    "SampleAllRounds",
    "WriteSampleTables",
    "frontier_after",
    "make_pipeline",
]
