"""Checks of a test pipeline's outputs made inside the pipeline, with Beam's ``assert_that``: a
check of several outputs at once (``check_outputs``), and a run that returns the job's ``triehh``
counters. No output leaves a pipeline through a shared sink, so a wrong element fails the run."""

from __future__ import annotations

import functools
from typing import Callable, Dict, Mapping

import apache_beam as beam
from apache_beam.testing.util import assert_that

from tests.pipeline_factory import new_pipeline
from triehh_beam.beam import held
from triehh_beam.job.batch.jobs import job_counters

__all__ = ["check_outputs", "counters_of", "run_pipeline"]


def _tag(element, name):
    return name, element


def _grouped(tagged, names, check):
    outputs = {name: [] for name in names}
    for name, element in tagged:
        outputs[name].append(element)
    check(outputs)


def check_outputs(named: Mapping[str, beam.PCollection], check: Callable[[Dict[str, list]], None],
                  label: str = "CheckOutputs") -> None:
    """Asserts, inside the pipeline, ``check({name: [its elements]})`` over every named PCollection
    at once (an empty one gives ``[]``); ``check`` fails with ``AssertionError``. ``label`` must be
    unique in its pipeline."""
    names = tuple(named)
    tagged = [pcoll | f"{label}Tag{i}" >> beam.Map(_tag, name)
              for i, (name, pcoll) in enumerate(named.items())]
    flat = tagged | f"{label}Flatten" >> beam.Flatten()
    assert_that(flat, functools.partial(_grouped, names=names, check=check), label=label)


class _StepsUnder:
    """A finished result whose metrics are those of the steps named ``prefix...`` only."""

    def __init__(self, result, prefix: str):
        self._result, self._prefix = result, prefix

    def metrics(self):
        return self

    def query(self, metrics_filter):
        found = self._result.metrics().query(metrics_filter)
        return {kind: [m for m in values if m.key.step.startswith(self._prefix)]
                for kind, values in found.items()}


def counters_of(result, step_prefix: str = "") -> Dict[str, int]:
    """``job_counters`` of a finished ``result`` (the ``triehh`` counters by name, and
    ``largest_<name>`` of its distributions) over the steps whose name starts with ``step_prefix``
    (every step by default); without the workers' peak memory, which is the machine's."""
    counters = job_counters(_StepsUnder(result, step_prefix))
    return {name: value for name, value in counters.items() if not name.startswith(f"{held.PEAK_METRIC}.")}


def run_pipeline(build: Callable[[beam.Pipeline], None], step_prefix: str = "") -> Dict[str, int]:
    """Builds a pipeline with ``build`` (which adds its own checks), runs it to the end and returns
    ``counters_of`` its result."""
    pipeline = new_pipeline()
    build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    return counters_of(result, step_prefix)
