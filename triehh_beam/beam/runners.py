"""Which Beam runner a job uses: the default (``DirectRunner`` or no ``--runner``) is the
in-process ``FnApiRunner``, because Beam 2.77's ``DirectRunner`` first tries Prism, which
downloads a binary on every run; every other runner name goes to Beam unchanged.
``unknown_pipeline_args`` finds the arguments no ``PipelineOptions`` class defines, which Beam's
parser would drop with only a warning."""

from __future__ import annotations

from typing import List, Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

__all__ = ["describe_unknown", "make_pipeline", "unknown_pipeline_args", "uses_in_process_runner"]

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



def unknown_pipeline_args(argv: Sequence[str]) -> List[str]:
    """The names of the arguments of ``argv`` that no ``PipelineOptions`` class defines.

    Parsed by the parser ``PipelineOptions.get_all_options`` builds from every options class
    loaded in the process (Beam's own, the runners', any the caller declared), so the list of
    known flags is Beam's, never a copy. A flag is named without its value (``--x=1``, ``--x 1``:
    ``--x``); stray words are named only when no unknown flag is. Beam itself only warns about
    these arguments and drops them.
    """
    unknown: List[str] = []

    def parse(parser) -> None:  # called with the parser holding every class's arguments
        unknown.extend(parser.parse_known_args(list(argv))[1])

    PipelineOptions(list(argv)).get_all_options(add_extra_args_fn=parse, retain_unknown_options=True)
    return [token.split("=", 1)[0] for token in unknown if token.startswith("-")] or unknown


def describe_unknown(names: Sequence[str], own: str = "triehh") -> str:
    """One line refusing ``unknown_pipeline_args``'s ``names``; ``own``: who else defines flags."""
    many = len(names) > 1
    return (f"unknown argument{'s' if many else ''} {', '.join(names)}: neither {own} nor Beam's "
            f"pipeline options define {'them' if many else 'it'}")
