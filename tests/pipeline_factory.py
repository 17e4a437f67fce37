"""The one factory for the tests' Beam pipelines: ``new_pipeline`` builds them on the in-process
``FnApiRunner``, or on Prism when pytest runs with ``--runner prism`` (run pytest itself inside a
loopback-only network namespace then: CONTRIBUTING.md, the tiers). Tests build a pipeline through
it, never with a runner of their own, so that one switch moves the Beam-level suite to a runner."""

from typing import Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline

__all__ = ["RUNNERS", "new_pipeline", "use_runner"]

RUNNERS = ("in-process", "prism")
_chosen = {"runner": "in-process"}  # set once per session by tests/conftest.py (pytest --runner)


def use_runner(name: str) -> None:
    """Makes ``new_pipeline`` build on ``name`` (one of ``RUNNERS``) from now on."""
    if name not in RUNNERS:
        raise ValueError(f"unknown test runner {name!r}: one of {', '.join(RUNNERS)}")
    _chosen["runner"] = name


def new_pipeline(options: Optional[PipelineOptions] = None, test: bool = False) -> beam.Pipeline:
    """A pipeline (``TestPipeline`` with ``test``) with ``options``, on the session's runner."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    cls = test_pipeline.TestPipeline if test else beam.Pipeline
    options = options if options is not None else PipelineOptions([])
    if _chosen["runner"] == "in-process":
        return cls(runner=FnApiRunner(), options=options)
    from apache_beam.runners.portability.prism_runner import PrismRunner

    from triehh_beam.beam import runners

    flags = options.get_all_options(drop_default=True, retain_unknown_options=True)
    flags["runner"] = "PrismRunner"
    return cls(runner=PrismRunner(), options=runners.with_local_prism(PipelineOptions([], **flags)))
