"""Tests of triehh_beam.beam.bigquery: BigQuery input without BigQuery.

No BigQuery emulator works here: the one that serves the Storage Read API (bqemulator, every
release) requires grpcio-tools < 1.81, which the project pins to 1.81.1 for its generated
protobuf code, and Beam 2.77's ReadFromBigQuery builds its Storage Read client on Google's
endpoint with no way to point it elsewhere. So: the rows the source yields are turned into
batches by a real pipeline (in-process runner) and compared with reading the same records from
a file; and the whole read, ReadFromBigQuery included, is built into a Dataflow job offline
(``--dry_run=True``, network and credentials forbidden), whose graph is checked.
"""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.testing.util import assert_that, equal_to

from triehh_beam.beam.bigquery import (ReadBigQueryBatches, RowsToRecordBatches, is_bigquery_input,
                                       parse_bigquery_table)
from triehh_beam.beam.read import RECORDS_TAG, REJECTED_TAG
from triehh_beam.io import RecordOptions, write_records
from tests.pipeline_factory import new_pipeline
from tests.e2e.test_dataflow_dry_run import DATAFLOW_DRY_RUN, offline  # noqa: F401 (fixture)
from tests.io.helpers import batch_rows, counters, read_rows
from tests.io.records.test_rows import RECORDS, as_rows


def test_table_uris():
    assert is_bigquery_input("bq://p.d.t") and not is_bigquery_input("data/*.parquet")
    assert parse_bigquery_table("bq://my-proj.devices.records") == "my-proj:devices.records"
    # A domain-scoped project holds a dot and a colon of its own.
    assert parse_bigquery_table("bq://example.com:proj.d.t") == "example.com:proj:d.t"
    for bad in ("bq://d.t", "bq://p..t", "gs://b/o", "bq://"):
        with pytest.raises(ValueError, match="bq://PROJECT.DATASET.TABLE"):
            parse_bigquery_table(bad)
    with pytest.raises(ValueError, match="give a BigQuery table .* or a query, not both"):
        ReadBigQueryBatches()
    with pytest.raises(ValueError, match="not both"):
        ReadBigQueryBatches(table="bq://p.d.t", query="SELECT 1")


def test_rows_become_the_batches_a_file_of_the_same_records_gives(tmp_path):
    path = str(tmp_path / "same.parquet")
    write_records(path, RECORDS * 50)
    expected, drops = read_rows(path)
    p = new_pipeline()
    out = (p | beam.Create(as_rows(RECORDS * 50))
           | RowsToRecordBatches("bq://p.d.t", batch_size=64, dead_letter=True))
    assert_that(out[RECORDS_TAG] | beam.FlatMap(batch_rows), equal_to(expected), label="Rows")
    bounded = out[RECORDS_TAG] | beam.Map(lambda b: 0 < b.num_rows <= 64) | beam.Distinct()
    assert_that(bounded, equal_to([True]), label="Bounded")
    reasons = out[REJECTED_TAG] | beam.Map(lambda r: (r[0], r[1], r[3], r[4]))
    assert_that(reasons, equal_to([("bq://p.d.t", reason, None, None)
                                   for reason, n in drops.items() for _ in range(n)]),
                label="Rejected")
    result = p.run()
    result.wait_until_finish()
    totals = counters(result)
    assert totals["records_read"] == len(RECORDS) * 50
    for reason, n in drops.items():
        assert totals[f"records_{reason}"] == n


def test_a_table_read_builds_into_a_dataflow_job_offline(offline):
    options = PipelineOptions(DATAFLOW_DRY_RUN)
    for source, expected in [
        ({"table": "bq://my-proj.devices.records"},
         {"table_reference": "my-proj", "selected_fields": "['user_id', 'item', 'count', 'ts']"}),
        ({"query": "SELECT user_id, item, ts FROM `my-proj.devices.records`"},
         {"query": "SELECT user_id, item, ts FROM `my-proj.devices.records`"}),
    ]:
        p = beam.Pipeline(options=options)
        read = p | "ReadRecords" >> ReadBigQueryBatches(
            **source, options=RecordOptions(timestamp_column="ts"), dead_letter=True)
        _ = read[RECORDS_TAG] | "Rows" >> beam.Map(lambda batch: batch.num_rows)
        job = p.run().job
        transforms = {t.unique_name: t for t in job.proto_pipeline.components.transforms.values()}
        for name in ("ReadRecords/ReadFromBigQuery/Read", "ReadRecords/ToRecordBatches/BatchRows",
                     "ReadRecords/ToRecordBatches/Normalise"):
            assert name in transforms, sorted(transforms)
        shown = {}
        for item in transforms["ReadRecords/ReadFromBigQuery/Read"].display_data:
            labelled = beam_runner_api_pb2.LabelledPayload.FromString(item.payload)
            shown[labelled.label] = labelled.string_value
        # The Storage Read API, Arrow on the wire; only the record columns of a table.
        assert shown["method"] == "DIRECT_READ" and shown["output_format"] == "ARROW"
        for label, value in expected.items():
            assert value in shown[label], (label, shown[label])
    assert offline == []
