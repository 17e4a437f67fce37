"""A window's values meet its elements by key (``window_join.MeetGiven``), and a window's rounds,
voted in parallel on every prefix of their length, chain into the results that rounds voting on
their frontiers give (``windowed.chain_rounds``): a prefix that does not extend the previous
round's frontier is dropped, a round after a round without result keeps nothing, a short sample
keeps nothing."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import FixedWindows, TimestampedValue

from tests.pipeline_factory import new_pipeline
from triehh_beam.beam.windows.window_join import GIVEN, MAIN, MeetGiven, record_key, RECORD_KEYS
from triehh_beam.beam.windows.windowed import WindowPlan, chain_rounds
from triehh_beam.protocol.rounds.loop import RoundResult

PP = WindowPlan(0, True, 100, 120, theta=2, sample_probability=0.5, nonce=b"n")  # TrieHH++: none required
TRIEHH = WindowPlan(0, True, 100, 120, theta=2, sample_size=10, nonce=b"n", real_sample_sizes=(10, 10, 10))


def test_a_round_keeps_only_the_prefixes_that_extend_the_previous_rounds_frontier():
    kept = {1: ([("a",), ("b",), ("$",)], 40), 2: ([("a", "x"), ("b", "y"), ("c", "z")], 41),
            3: ([("a", "x", "$"), ("c", "z", "$")], 39)}
    results = chain_rounds(PP, kept, {1: 40, 2: 41, 3: 39})
    assert results == [
        (1, RoundResult((("a",), ("b",), ("$",)), 40, None, 120)),
        (2, RoundResult((("a", "x"), ("b", "y")), 41, None, 120)),  # ("c",) was never kept
        (3, RoundResult((("a", "x", "$"),), 39, None, 120)),
    ]


def test_a_round_after_a_round_without_result_keeps_nothing():
    results = chain_rounds(PP, {1: ([("a",)], 40), 3: ([("a", "x", "y")], 39)}, {1: 40, 3: 39})
    assert [(r, result.kept) for r, result in results] == [(1, (("a",),)), (3, ())]


def test_a_short_sample_keeps_nothing_and_opens_no_frontier():
    kept = {1: ([("a",)], 9), 2: ([("a", "x")], 10)}
    results = chain_rounds(TRIEHH, kept, {1: 9, 2: 10})  # round 1 drew 9 of the 10 it must
    assert results == [(1, RoundResult((), 9, 10, 120)), (2, RoundResult((), 10, 10, 120))]


def test_each_key_meets_its_windows_given_value_and_only_it():
    windows = FixedWindows(10)
    with new_pipeline() as p:
        given = p | "Given" >> beam.Create([TimestampedValue((k, f"g{k}@{t}"), t) for k in (1, 2) for t in (1, 11)])
        main = p | "Main" >> beam.Create([TimestampedValue((k, f"e{k}.{i}@{t}"), t)
                                          for k in (1, 3) for i in range(2) for t in (2, 12)])
        met = ({GIVEN: given | "GivenWindows" >> beam.WindowInto(windows),
                MAIN: main | "MainWindows" >> beam.WindowInto(windows)}
               | MeetGiven() | beam.MapTuple(lambda key, value, elements: (key, value, sorted(elements))))
        assert_that(met, equal_to([
            (1, "g1@1", ["e1.0@2", "e1.1@2"]), (1, "g1@11", ["e1.0@12", "e1.1@12"]),
            (2, "g2@1", []), (2, "g2@11", []),
            (3, None, ["e3.0@2", "e3.1@2"]), (3, None, ["e3.0@12", "e3.1@12"]),
        ]))


def test_two_values_given_for_one_key_in_one_window_are_refused():
    with pytest.raises(Exception, match="given 2 values"):
        with new_pipeline() as p:
            given = p | "Given" >> beam.Create([(1, "a"), (1, "b")])
            main = p | "Main" >> beam.Create([(1, "x")])
            _ = {GIVEN: given, MAIN: main} | MeetGiven()


def test_a_batch_is_keyed_by_its_first_user_alike_every_time():
    import pyarrow as pa

    batch = pa.RecordBatch.from_arrays([pa.array([b"u7", b"u8"], pa.binary())], names=["user_id"])
    keys = {record_key(batch)[0] for _ in range(3)}
    assert len(keys) == 1 and 0 <= keys.pop() < RECORD_KEYS
