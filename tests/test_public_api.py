"""The public API does not move when the modules behind it do: the names of ``triehh_beam``,
``triehh_beam.beam`` and ``triehh_beam.io`` (docs/api.md) are listed here, and each resolves."""

import importlib

import pytest

PUBLIC = {
    "triehh_beam": [
        "DPGuarantee", "EmptyItemError", "EncodingError", "ItemEncoder", "ItemKind", "ItemTooLongError",
        "Plan", "PrefixCounter", "PrivacyConditionError", "Sampler", "SmallestRanks", "Trie",
        "TrieFormatError", "choose_sequence", "client_vote", "compose", "discovery_probability",
        "min_frequency", "min_population", "plan", "prefix_vote", "theorem1", "user_id_bytes",
    ],
    "triehh_beam.beam": [
        "METRICS_NAMESPACE", "CountDistinctUsers", "DropZeroCountsDoFn", "ReadRecordBatches",
        "ReadSampleTables", "RecordFormatError", "RoundSample", "RunAllRounds", "RunRound",
        "RunSampledRound", "SampleAllRounds", "WriteSampleTables", "frontier_after", "make_pipeline",
    ],
    "triehh_beam.io": [
        "BYTES_ENCODINGS", "BatchPublisher", "DEFAULT_BATCH_SIZE", "DEFAULT_MAX_ITEM_BYTES",
        "DEFAULT_MAX_USER_BYTES", "DROP_REASONS", "FILE_COUNTERS", "FORMATS", "PublishError",
        "PubsubUnavailableError", "PullLoop", "RECORD_SCHEMA", "RecordBlock", "RecordColumns",
        "RecordFormatError", "RecordOptions", "RejectedRow", "TIMESTAMP_FIELD", "bad_fraction",
        "binary_buffers", "dead_letter_json", "describe_drops", "emulator_missing",
        "ensure_subscription", "ensure_topic", "infer_format", "iter_record_batches",
        "iter_record_blocks", "match_files", "normalise_batch", "parquet_row_groups", "record_schema",
        "start_pubsub_emulator", "write_records",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_names_are_the_listed_ones_and_each_resolves(package):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(PUBLIC[package])
    for name in PUBLIC[package]:
        value = getattr(module, name)
        defined_in = getattr(value, "__module__", None)
        if defined_in and defined_in.startswith("triehh_beam."):
            assert getattr(importlib.import_module(defined_in), name) is value, name


def test_a_star_import_gives_the_protocol_names():
    namespace = {}
    exec("from triehh_beam import *", namespace)  # noqa: S102 - the star import a user writes
    assert set(PUBLIC["triehh_beam"]) <= set(namespace)
