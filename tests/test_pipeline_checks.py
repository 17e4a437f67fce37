"""``tests/pipeline_checks.py``: a check of several outputs runs inside the pipeline on every element
of each (an empty output as ``[]``) and a failing check fails the run; counters are split by step."""

import apache_beam as beam
import pytest
from apache_beam.metrics import Metrics

from tests.pipeline_checks import check_outputs, counters_of
from tests.pipeline_factory import new_pipeline


def _count(element, name):
    Metrics.counter("triehh", name).inc()
    return element


def _run(check):
    pipeline = new_pipeline()
    squares = pipeline | "Numbers" >> beam.Create([1, 2, 3]) | "Square" >> beam.Map(lambda x: x * x)
    counted = pipeline | "Words" >> beam.Create(["a", "b"]) | "Counted" >> beam.Map(_count, "words")
    nothing = pipeline | "Nothing" >> beam.Create([]) | "None" >> beam.Map(lambda x: x)
    check_outputs({"squares": squares, "counted": counted, "nothing": nothing}, check)
    result = pipeline.run()
    result.wait_until_finish()
    return result


def test_the_check_sees_every_output_whole_and_counters_split_by_step():
    def check(out):
        assert sorted(out["squares"]) == [1, 4, 9]
        assert sorted(out["counted"]) == ["a", "b"] and out["nothing"] == []

    result = _run(check)
    assert counters_of(result)["words"] == 2
    assert counters_of(result, "Counted") == {"words": 2} and counters_of(result, "Square") == {}


def test_a_failing_check_fails_the_run():
    def check(out):
        assert sorted(out["squares"]) == [1, 4, 10]

    with pytest.raises(Exception, match="10"):
        _run(check)
