"""Which Beam runner a job uses: the default (``DirectRunner`` or no ``--runner``) is the
in-process ``FnApiRunner``, because Beam 2.77's ``DirectRunner`` first tries Prism, which
downloads a binary on every run; ``PrismRunner`` runs the local Prism binary (``prism.find_prism``),
never a downloaded one; every other runner name goes to Beam unchanged. ``workers_on_this_machine``
says whether a job's workers run here (they can report progress through a file),
``local_state_reachable`` whether they can use a local state directory.
``unknown_pipeline_args`` finds the arguments no ``PipelineOptions`` class defines, which Beam's
parser would drop with only a warning."""

from __future__ import annotations

import ipaddress
import urllib.parse
import os
from typing import List, Optional, Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    PipelineOptions,
    PortableOptions,
    PrismRunnerOptions,
    StandardOptions,
    TestOptions,
)

from triehh_beam.beam import prism

__all__ = ["RUNNER_LOG_NAME", "describe_unknown", "local_state_reachable", "make_pipeline", "runner_kind", "unknown_pipeline_args", "uses_in_process_runner",
           "uses_prism", "with_local_prism", "workers_on_this_machine"]

_IN_PROCESS_NAMES = {None, "", "DirectRunner", "FnApiRunner", "direct"}
# Runners that speak the portable Job and Fn APIs, whose workers' environment is a pipeline option.
_PORTABLE_KINDS = ("prism", "portable", "flink", "spark")
_LOCAL_FLINK = ("[local]", "[auto]")  # Flink masters the Flink runner starts itself, in process
# Prism's own log lines, in a job's (private) state directory.
RUNNER_LOG_NAME = "prism.log"


def uses_in_process_runner(options: PipelineOptions) -> bool:
    """True when the options ask for the default, in-process runner."""
    return options.view_as(StandardOptions).runner in _IN_PROCESS_NAMES


def runner_kind(options: PipelineOptions) -> str:
    """The runner the options name as Beam resolves it, in lower case without ``Runner`` and
    without a module path: ``PrismRunner``, ``prism`` and ``...prism_runner.PrismRunner`` give
    ``prism``; the in-process runner gives ``""``."""
    if uses_in_process_runner(options):
        return ""
    name = str(options.view_as(StandardOptions).runner).rsplit(".", 1)[-1].lower()
    return name[: -len("runner")] if name.endswith("runner") else name


def uses_prism(options: PipelineOptions) -> bool:
    """True when the options ask for Beam's Prism runner."""
    return runner_kind(options) == "prism"


def with_local_prism(options: PipelineOptions) -> PipelineOptions:
    """The options, or for ``PrismRunner`` without ``--prism_location`` a copy naming the local
    binary (``prism.find_prism``), so that Beam never downloads one.

    Raises:
      prism.PrismNotFoundError: Prism asked for and none found (one line: how to build it).
    """
    if not uses_prism(options) or options.view_as(PrismRunnerOptions).prism_location:
        return options
    copy = PipelineOptions([], **options.get_all_options(drop_default=True, retain_unknown_options=True))
    copy.view_as(PrismRunnerOptions).prism_location = prism.find_prism()
    return copy


def _loopback(address: str) -> bool:
    """Whether a ``host:port`` address is on this machine's loopback."""
    try:
        host = urllib.parse.urlsplit("//" + address).hostname
        return host == "localhost" or ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _environment(options: PipelineOptions, kind: str) -> str:
    """The SDK workers' environment type a portable-family runner will use (Beam's defaults)."""
    chosen = options.view_as(PortableOptions).environment_type
    if chosen:
        return chosen.upper()
    if kind == "prism" or (kind == "flink" and options.view_as(FlinkRunnerOptions).flink_master in _LOCAL_FLINK):
        return "LOOPBACK"
    return "DOCKER"


def workers_on_this_machine(options: PipelineOptions) -> bool:
    """Whether every SDK worker of the options' jobs runs on this machine, so that it can append
    to this machine's files (the progress file).

    True for the in-process runner (threads, or processes with ``multi_processing``); for Prism, the
    portable, Flink and Spark runners when the workers are this process's threads (``LOOPBACK``:
    Prism's default, and Flink's with a local master), or processes the job service starts
    (``PROCESS``) or a worker pool serves (``EXTERNAL``) on a loopback address, the job service
    itself here (Prism started by the job, or a loopback ``--job_endpoint``). False otherwise:
    Dataflow, ``DOCKER`` workers (the portable runner's default), other addresses, other runners.
    """
    if uses_in_process_runner(options):
        return True
    kind = runner_kind(options)
    if kind not in _PORTABLE_KINDS:
        return False
    environment = _environment(options, kind)
    if environment == "LOOPBACK":
        return True
    portable = options.view_as(PortableOptions)
    endpoint = portable.job_endpoint
    service_here = (kind == "prism" and not endpoint) or bool(endpoint and _loopback(endpoint))
    if environment == "PROCESS":
        return service_here
    if environment == "EXTERNAL":
        address = portable.environment_config or portable.lookup_environment_option("external_service_address")
        return service_here and bool(address) and _loopback(address)
    return False


def local_state_reachable(options: PipelineOptions) -> bool:
    """Whether the options' workers can use a state directory on a local path (they write into
    it: the census spill, each round's tables, the windows' state).

    True where they run on this machine (``workers_on_this_machine``), and where a team runs them
    itself: ``EXTERNAL`` worker pools and ``PROCESS`` workers of Prism, the portable, Flink or
    Spark runner, which can mount the directory at the same path (``deploy/flink``'s compose
    does; the operator's to ensure), and with ``--dry_run=True`` (no worker runs: Dataflow's
    offline translation). False for Dataflow's VMs, Beam's ``DOCKER`` containers (they see none of
    the host's files) and every other runner.
    """
    if workers_on_this_machine(options) or options.view_as(TestOptions).dry_run:
        return True
    kind = runner_kind(options)
    return kind in _PORTABLE_KINDS and _environment(options, kind) in ("EXTERNAL", "PROCESS")


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


def make_pipeline(options: PipelineOptions, log_dir: Optional[str] = None) -> beam.Pipeline:
    """A pipeline on the runner the options name, the in-process one by default (Prism: the
    local binary, ``with_local_prism``). ``log_dir``: a private local directory (a job's state
    directory) where Prism's own log lines go, in ``RUNNER_LOG_NAME``, instead of the console
    (None, or a ``scheme://`` one: left to logging)."""
    if uses_in_process_runner(options):
        return beam.Pipeline(runner=_in_process_runner(options), options=options)
    if log_dir is not None and uses_prism(options) and "://" not in log_dir:
        prism.send_log_to(os.path.join(log_dir, RUNNER_LOG_NAME))
    return beam.Pipeline(options=with_local_prism(options))


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


def pipeline_flags() -> List[str]:
    """Every flag a ``PipelineOptions`` class loaded in the process defines (``--runner``,
    ``--project``, ...), from Beam's own parser, as ``unknown_pipeline_args`` reads it."""
    flags: List[str] = []

    def collect(parser) -> None:
        flags.extend(flag for action in parser._actions for flag in action.option_strings
                     if flag.startswith("--"))

    PipelineOptions([]).get_all_options(add_extra_args_fn=collect, retain_unknown_options=True)
    return flags


def describe_unknown(names: Sequence[str], own: str = "triehh") -> str:
    """One line refusing ``unknown_pipeline_args``'s ``names``; ``own``: who else defines flags."""
    many = len(names) > 1
    return (f"unknown argument{'s' if many else ''} {', '.join(names)}: neither {own} nor Beam's "
            f"pipeline options define {'them' if many else 'it'}")
