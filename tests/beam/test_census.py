"""``TakeCensus`` (beam/census.py) against an independent in-memory census.

The oracle asks the protocol's encoder itself, item by item (``ItemEncoder.encode``, which raises
``ItemTooLongError`` or another ``EncodingError``), whether a user has a usable item; for units of
one character or byte a too-long item's length in base units is its number of units, read from
``ItemTooLongError.length``, so the oracle's histogram of the shortest item per unusable user
does not use the census's own length arithmetic. Populations are small and drawn with fixed
seeds; batches are small so that users' records land in several batches and the combiner's
compaction runs.
"""

import random

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from tests.census_oracle import CENSUS_SEED, census_batch, census_oracle, text_population
from tests.pipeline_factory import new_pipeline
from triehh_beam.beam import census as census_lib, transforms
from triehh_beam.beam.census import NEVER, Census, TakeCensus
from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.randomness.sampling import Sampler

def _run(rows, encoder, expected, truncate=False, batch=97, item_type=pa.string()):
    """Runs the census of ``rows`` (user, item) in batches of ``batch`` rows, asserts that it
    counts ``expected`` (a ``Census``); returns its counters."""
    pipeline = new_pipeline()
    batches = [census_batch(rows[i:i + batch], item_type) for i in range(0, len(rows), batch)]
    counted = pipeline | beam.Create(batches) | TakeCensus(Sampler(CENSUS_SEED), encoder, truncate)
    assert_that(counted, equal_to([expected]))
    result = pipeline.run()
    result.wait_until_finish()
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    return {c.key.metric.name: c.committed for c in query["counters"]}


@pytest.mark.parametrize("case_fold", [False, True])
@pytest.mark.parametrize("truncate", [False, True])
def test_the_census_counts_users_without_a_usable_item_as_the_encoder_says(case_fold, truncate):
    rows = text_population(random.Random(11 + case_fold + 2 * truncate))
    encoder = ItemEncoder(max_length=9, case_fold=case_fold)
    expected, too_long, unencodable = census_oracle(rows, encoder, truncate)
    assert 0 < expected.unusable_users < expected.users  # the population exercises both
    assert len(expected.unusable_lengths) >= (1 if truncate else 4)  # lengths to tell apart
    counters = _run(rows, encoder, expected, truncate)
    assert counters["items_too_long"] == too_long and counters["items_unencodable"] == unencodable
    assert counters["census_records_read"] == len(rows)


def test_n_is_what_count_distinct_users_counts():
    rows = text_population(random.Random(3), users=1500)
    encoder = ItemEncoder(max_length=6)
    expected, _, _ = census_oracle(rows, encoder)
    assert expected.users == 1500
    pipeline = new_pipeline()
    batches = pipeline | beam.Create([census_batch(rows[i:i + 97]) for i in range(0, len(rows), 97)])
    counted = batches | TakeCensus(Sampler(CENSUS_SEED), encoder) | beam.Map(lambda census: census.users)
    assert_that(counted, equal_to([1500]), label="TakeCensus")
    assert_that(batches | transforms.CountDistinctUsers(Sampler(CENSUS_SEED)), equal_to([1500]), label="CountDistinct")
    pipeline.run().wait_until_finish()


def test_units_of_several_characters_count_lengths_in_characters():
    # k = 3, L = 4: up to 9 characters fit. "abcdefghij" (10) needs 4 units and the terminator.
    rows = [("a", "abcdefghi"), ("b", "abcdefghij"), ("b", "x" * 14), ("c", "y" * 30), ("c", "é" * 11)]
    counters = _run(rows, ItemEncoder(max_length=4, unit_size=3), Census(3, 1, {10: 1, 11: 1}))
    assert counters["items_too_long"] == 4


def test_tokenised_text_is_usable_when_one_token_is():
    encoder = ItemEncoder(max_length=5, tokenize=True)
    rows = [("a", "a verylongword"), ("b", "verylongword anotherlongone"), ("c", "!!! ..."), ("d", "ok")]
    expected, too_long, unencodable = census_oracle(rows, encoder)
    assert expected == Census(4, 2, {12: 1, NEVER: 1})
    counters = _run(rows, encoder, expected)
    assert (counters["items_too_long"], counters["items_unencodable"]) == (too_long, unencodable) == (3, 1)


def test_bytes_and_integer_items():
    rows = [("a", b"\x00\x01"), ("b", b"\x00" * 9), ("c", b"")]
    _run(rows, ItemEncoder(kind=ItemKind.BYTES, max_length=4), Census(3, 1, {9: 1, NEVER: 1}),
         item_type=pa.binary())
    # 16-bit integers in units of 4 bits are 4 units and the terminator: L = 4 fits none.
    ints = [("a", 7), ("b", -3)]
    short = ItemEncoder(kind=ItemKind.INT, int_bits=16, unit_size=4, max_length=4)
    _run(ints, short, Census(2, 0, {16: 2}), item_type=pa.int64())
    _run(ints, short, Census(2, 2, {}), truncate=True, item_type=pa.int64())
    whole = ItemEncoder(kind=ItemKind.INT, int_bits=16, unit_size=4, max_length=5)
    _run(ints, whole, Census(2, 2, {}), item_type=pa.int64())


def test_a_users_shortest_item_is_kept_across_batches_and_shards():
    # Every user's records spread over several batches (batch of 7 rows), lengths decreasing.
    rows = [(f"u{u}", "z" * (40 - r)) for r in range(5) for u in range(300)]
    _run(rows, ItemEncoder(max_length=10), Census(300, 0, {36: 300}), batch=7)


def test_item_lengths_is_the_encoders_view():
    encoder = ItemEncoder(max_length=4, case_fold=True)
    assert census_lib.item_lengths(encoder, "Straße") == [7]  # case folds to "strasse"
    assert census_lib.item_lengths(encoder, "") == [NEVER]
    assert census_lib.item_lengths(encoder, "e\u0301") == [1]  # NFC composes
    assert census_lib.item_lengths(encoder, "\u0958") == [2]  # NFC decomposes
    assert census_lib.item_lengths(ItemEncoder(tokenize=True), "... !!!") == [NEVER]
