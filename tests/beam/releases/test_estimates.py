"""``EstimateFrequencies`` equals the per-user reference (``reference_estimates``) exactly: the same
keys give the same released numbers, for several item types, many items per user (records
spread over batches), truncation on and off, any number of shards, and the leaves given as a
value or as a side-input PCollection."""

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to

from tests.pipeline_factory import new_pipeline
from tests.skewed_records import (ENCODERS, VOCABULARY, encoded_rows, population as skewed_population,
                                   split_count_batches)
from triehh_beam.beam.releases.estimates import EstimateFrequencies
from triehh_beam.protocol.estimates.frequency_estimates import (EstimateKeys, EstimateTargets,
                                                                reference_estimates)
from triehh_beam.protocol.rounds.trie import Trie

SEED = bytes(range(7, 39))
def _leaves(kind, encoder, truncate):
    """A trie over some of the vocabulary: whole items and a frequent prefix or two."""
    sequences = [s for s in (encoded_rows({"x": {v: 1 for v in VOCABULARY[kind]}}, encoder, truncate)["x"])]
    chosen = sorted({s for s, _ in sequences})[::2]
    levels = [{s[:r] for s in chosen if len(s) >= r} for r in range(1, max(map(len, chosen)) + 1)]
    trie = Trie(encoder, levels)
    targets = EstimateTargets.from_trie(trie)
    assert len(targets) >= 2
    return targets


def _run(build):
    """Runs the pipeline ``build`` makes; returns its metrics (every namespace)."""
    pipeline = new_pipeline()
    build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    return result.metrics().query()


@pytest.mark.parametrize("kind", ["text", "bytes", "int"])
@pytest.mark.parametrize("truncate", [False, True])
def test_the_pipeline_releases_exactly_the_reference_estimates(kind, truncate):
    encoder = ENCODERS[kind]
    population = skewed_population(kind, seed=3, users=250, most_items=4)
    targets = _leaves(kind, encoder, truncate)
    keys = EstimateKeys.derive(SEED, b"identity " + kind.encode())
    expected = reference_estimates(encoded_rows(population, encoder, truncate), targets, 0.7, keys)
    # The noise is not what makes them equal: the exact counts behind them are not trivial.
    assert sum(expected.estimates) > 50

    def build(p):
        released = (p | beam.Create(split_count_batches(population, kind))
                    | EstimateFrequencies(keys, 0.7, targets, encoder, truncate, shards=5))
        assert_that(released, equal_to([expected]))

    metrics = _run(build)
    # No counter, distribution or gauge at all: nothing derived from the exact counts leaves.
    # (A portable runner such as Prism adds its own per-step element counts and sizes, namespace
    # "beam": the runner's operator metrics, never the product's, and never published.)
    ours = {kind: [m for m in metrics[kind] if m.key.metric.namespace != "beam"]
            for kind in ("counters", "distributions", "gauges")}
    assert not any(ours.values()), ours


def test_shards_and_a_side_input_of_leaves_change_nothing():
    encoder = ENCODERS["text"]
    population = skewed_population("text", seed=9, users=250, most_items=4)
    targets = _leaves("text", encoder, False)
    keys = EstimateKeys.derive(SEED, b"shards")
    expected = reference_estimates(encoded_rows(population, encoder, False), targets, 2.0, keys)

    def build(p):
        batches = p | beam.Create(split_count_batches(population, "text", size=17))
        one = batches | "One" >> EstimateFrequencies(keys, 2.0, targets, encoder, shards=1)
        many = batches | "Many" >> EstimateFrequencies(keys, 2.0, targets, encoder, shards=2048)
        leaves = p | "Leaves" >> beam.Create([targets])
        side = batches | "Side" >> EstimateFrequencies(keys, 2.0, leaves, encoder, shards=3)
        assert_that(one, equal_to([expected]), label="one shard")
        assert_that(many, equal_to([expected]), label="2048 shards")
        assert_that(side, equal_to([expected]), label="side input")

    _run(build)


def test_leaves_nobody_holds_still_get_an_estimate_and_no_records_still_release():
    encoder = ENCODERS["text"]
    targets = EstimateTargets((encoder.encode("zzz"), encoder.encode("q")))
    keys = EstimateKeys.derive(SEED, b"nobody")
    expected = reference_estimates({}, targets, 1.0, keys)
    population = {"u1": {"ab": 3}, "u2": {"c": 1}}

    def build(p):
        some = (p | "Some" >> beam.Create(split_count_batches(population, "text"))
                | "WithRecords" >> EstimateFrequencies(keys, 1.0, targets, encoder))
        none = (p | "None" >> beam.Create([]).with_output_types(pa.RecordBatch)
                | "WithoutRecords" >> EstimateFrequencies(keys, 1.0, targets, encoder))
        assert_that(some, equal_to([expected]), label="records")
        assert_that(none, equal_to([expected]), label="no records")

    _run(build)
    assert len(expected.estimates) == 2


def test_bad_arguments_are_refused_before_any_graph():
    keys = EstimateKeys.derive(SEED)
    targets = EstimateTargets((("a", ""),))
    with pytest.raises(ValueError):
        EstimateFrequencies(keys, 0.0, targets, ENCODERS["text"])
    with pytest.raises(ValueError):
        EstimateFrequencies(keys, 1.0, targets, ENCODERS["text"], shards=0)
