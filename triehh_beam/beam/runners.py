"""Which Beam runner a job uses, and the one rule that keeps the default offline.

Beam 2.77's ``DirectRunner`` first tries the Prism runner, which downloads a binary on every
run and then falls back. triehh-beam's default is therefore the in-process ``FnApiRunner``
(what the DirectRunner falls back to), chosen explicitly, so a laptop or CI run never reaches
out. ``--runner=DirectRunner`` (or no ``--runner``) means that in-process runner;
``--direct_running_mode=multi_processing`` with ``--direct_num_workers=N`` still applies to it.
Every other runner name (``DataflowRunner``, ``FlinkRunner``, ``PortableRunner``, ...) is passed
to Beam unchanged.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

__all__ = ["make_pipeline", "uses_in_process_runner"]

_IN_PROCESS_NAMES = {None, "", "DirectRunner", "FnApiRunner", "direct"}


def uses_in_process_runner(options: PipelineOptions) -> bool:
    """True when the options ask for the default, in-process runner."""
    return options.view_as(StandardOptions).runner in _IN_PROCESS_NAMES


def _in_process_runner(options: PipelineOptions):
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    # Hand the pipeline options to the SDK harness, as the DirectRunner does.
    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    provision = fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
    )
    return fn_runner.FnApiRunner(provision_info=provision)


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A pipeline on the runner the options name, the in-process one by default."""
    if uses_in_process_runner(options):
        return beam.Pipeline(runner=_in_process_runner(options), options=options)
    return beam.Pipeline(options=options)
