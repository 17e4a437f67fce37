"""The Beam glue of triehh-beam: PTransforms and DoFns over the pure protocol modules. The base
(reading record batches, the census, shared steps, memory budgets, runners) and the rooms
``samples``, ``rounds``, ``releases``, ``windows`` and ``pubsub``. The names below are the ones
to use in your own pipeline (examples/own_pipeline.py shows them in use)."""

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.read import ReadRecordBatches
from triehh_beam.beam.rounds.run_round import RunRound
from triehh_beam.beam.rounds.sampled_rounds import RunAllRounds, RunSampledRound, frontier_after
from triehh_beam.beam.runners import make_pipeline
from triehh_beam.beam.samples.sample_pass import RoundSample, SampleAllRounds
from triehh_beam.beam.samples.samples import ReadSampleTables, WriteSampleTables
from triehh_beam.beam.transforms import CountDistinctUsers, DropZeroCountsDoFn
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
