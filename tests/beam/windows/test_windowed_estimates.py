"""``EstimateEachWindow`` per event-time window: each window with leaves releases the per-user
reference of its own records (the same user in two windows is two users) with the keys of its
release (its plan's nonce); a window without leaves releases nothing, and a leaf that nobody holds still gets an estimate."""

import apache_beam as beam
import pyarrow as pa
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from tests.pipeline_factory import new_pipeline
from tests.skewed_records import ENCODERS, encoded_rows as _encoded, population as skewed_population
from tests.skewed_records import split_count_batches
from triehh_beam.beam.windows.windowed import WindowPlan
from triehh_beam.beam.windows.windowed_estimates import EstimateEachWindow, window_estimate_keys
from triehh_beam.beam.windows.windows import EventWindows
from triehh_beam.protocol.estimates.frequency_estimates import EstimateTargets, reference_estimates
from triehh_beam.protocol.randomness.sampling import Sampler

SEED = bytes(range(3, 35))
HOUR = 3600 * 1_000_000
T0 = 1_763_892_000 * 1_000_000
ENCODER = ENCODERS["text"]
WINDOW_KEYS = Sampler(SEED, b"windowed estimates test").window_keys()
NONCES = {T0: bytes(16), T0 + HOUR: bytes(range(16)), T0 + 2 * HOUR: bytes(range(1, 17))}
# Window T0's leaves (heavy hitters and prefixes); window T0 + HOUR's hold one nobody holds;
# window T0 + 2 HOURS has none (withheld, or nothing discovered).
LEAVES = {
    T0: EstimateTargets((ENCODER.encode("ab"), ENCODER.encode("c"), ("b", "a"), ("c", "a"))),
    T0 + HOUR: EstimateTargets((ENCODER.encode("ab"), ENCODER.encode("zz"))),
}


def _weighted(population):
    return _encoded(population, ENCODER, truncate=False)


def test_each_window_releases_the_reference_of_its_own_records_with_its_keys():
    windows = EventWindows(HOUR)
    # The same user ids in every window: a window counts only its own records.
    populations = {start: skewed_population("text", seed, users=250, most_items=4)
                   for seed, start in enumerate((T0, T0 + HOUR, T0 + 2 * HOUR))}
    expected = [reference_estimates(_weighted(populations[start]), leaves, 0.5,
                                    window_estimate_keys(WINDOW_KEYS, start, NONCES[start]))
                for start, leaves in LEAVES.items()]
    for other in ((T0 + HOUR, NONCES[T0]), (T0, NONCES[T0 + HOUR])):  # another window, another release
        assert expected[0].estimates != reference_estimates(
            _weighted(populations[T0]), LEAVES[T0], 0.5, window_estimate_keys(WINDOW_KEYS, *other)).estimates
    with new_pipeline() as p:
        batches = p | "Batches" >> beam.Create(
            [TimestampedValue(b, Timestamp(micros=start + 1)) for start, population in populations.items()
             for b in split_count_batches(population, "text")]).with_output_types(pa.RecordBatch) | "BatchesIntoWindows" >> beam.WindowInto(windows.window_fn())
        given = p | "PlansAndLeaves" >> beam.Create(
            [TimestampedValue((WindowPlan(start, True, 0, 0, nonce=nonce), LEAVES.get(start, EstimateTargets(()))),
                              Timestamp(micros=start))
             for start, nonce in NONCES.items()]) | "IntoWindows" >> beam.WindowInto(windows.window_fn())
        released = batches | EstimateEachWindow(WINDOW_KEYS, 0.5, given, ENCODER, shards=3)
        assert_that(released | beam.Map(lambda e: (e.targets, e.estimates, e.half_width)),
                    equal_to([(e.targets, e.estimates, e.half_width) for e in expected]))
    # A leaf nobody in its window holds: noise around 0.
    assert ENCODER.encode("zz") in expected[1].by_target()
