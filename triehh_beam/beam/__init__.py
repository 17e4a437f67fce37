"""The Beam glue of triehh-beam: PTransforms, DoFns and record I/O over the pure protocol modules.

Drop the transforms into your own pipeline::

    records = p | ReadRecordBatches("gs://bucket/records/*.parquet")
    result = records | RunRound(sampler, round_index=1, sample_size=m, theta=theta,
                                encoder=encoder, frontier=frozenset({()}), population=n)
    # one element: a RoundResult (result.kept, result.sample_short)
"""

from triehh_beam.beam.read import ReadRecordBatches
from triehh_beam.beam.runners import make_pipeline
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
    "RecordFormatError",
    "RunRound",
    "SampleUsers",
    "make_pipeline",
]
