"""The steps that emit at the end of a bundle (the candidates' leftovers, the census's spill
files) emit them in the window of the batches they came from, not the global window: under
fixed windows every output lands in its batches' window, and each window's candidates are
exactly those of its batches drawn alone."""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms import window as beam_window
from apache_beam.testing.util import assert_that, equal_to

from tests.candidate_records import user_records
from triehh_beam.beam.census import _SpillCensusDoFn
from triehh_beam.beam.samples.candidates import CandidateBounds, DrawCandidates
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness import sampling

ROUNDS = [1, 2]
# A rate bound keeping about a tenth, and each bundle's 40 smallest above it (emitted at the
# bundle's end).
BOUNDS = CandidateBounds(rate_bound=int(0.1 * 2**64), bundle_keep=40)


def _keyed(element, window=beam.DoFn.WindowParam):
    round_index, rows = element
    return (int(window.start), round_index), sorted(zip(rows.column("user_id").to_pylist(),
                                                        rows.column("rank").to_pylist()))


def _per_window_batches():
    """Two windows' batches (timestamps 0-9 s and 10-19 s), one bundle for both."""
    tables = {start: user_records(150, np.random.default_rng(start + 1)) for start in (0, 10)}
    return tables, [(start + 1, batch) for start, table in tables.items() for batch in table.to_batches(max_chunksize=60)]


def _windowed(p, timestamped):
    return (p | beam.Create(timestamped)
            | beam.Map(lambda e: beam_window.TimestampedValue(e[1], e[0])).with_output_types(pa.RecordBatch)
            | "Fixed" >> beam.WindowInto(beam_window.FixedWindows(10)))


def _flatten(pairs):
    rows = {}
    for key, kept in pairs:
        rows.setdefault(key, []).extend(kept)
    return sorted((key, sorted(kept)) for key, kept in rows.items())


def _same(pair):
    return pair[0] == pair[1] and len(pair[0]) == 2 * len(ROUNDS)


def test_candidates_land_in_their_batches_window():
    keys = sampling.Sampler(b"w" * 32, identity=b"windows").pass_keys(len(ROUNDS))
    tables, timestamped = _per_window_batches()
    with beam.Pipeline(runner=FnApiRunner()) as p:
        alone = [  # each window's batches drawn alone, in the global window
            p | f"Alone{start}" >> beam.Create(table.to_batches(max_chunksize=60))
            | f"Draw{start}" >> DrawCandidates(keys, ROUNDS, BOUNDS)
            | f"Key{start}" >> beam.Map(lambda e, s=start: ((s, e[0]), sorted(
                zip(e[1].column("user_id").to_pylist(), e[1].column("rank").to_pylist()))))
            for start, table in tables.items()]
        expected = alone | "AllAlone" >> beam.Flatten() | "ListAlone" >> beam.combiners.ToList() | "Flat" >> beam.Map(_flatten)
        drawn = (_windowed(p, timestamped) | DrawCandidates(keys, ROUNDS, BOUNDS) | beam.Map(_keyed)
                 | "Global" >> beam.WindowInto(beam_window.GlobalWindows()) | beam.combiners.ToList()
                 | beam.Map(_flatten))
        both = drawn | beam.Map(lambda d, e: (d, e), e=beam.pvalue.AsSingleton(expected)) | "Same" >> beam.Map(_same)
        assert_that(both, equal_to([True]))


def test_census_spill_files_land_in_their_batches_window(tmp_path):
    _, timestamped = _per_window_batches()
    key = sampling.Sampler(b"w" * 32, identity=b"windows").census_key()
    with beam.Pipeline(runner=FnApiRunner()) as p:
        windows = (_windowed(p, timestamped) | beam.ParDo(_SpillCensusDoFn(key, ItemEncoder(), False, str(tmp_path / "spill"), 10**6))
                   | beam.Map(lambda _, w=beam.DoFn.WindowParam: int(w.start))
                   | "Global" >> beam.WindowInto(beam_window.GlobalWindows()) | beam.Distinct())
        assert_that(windows, equal_to([0, 10]))
