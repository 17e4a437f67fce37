"""``triehh-pipeline`` (``python -m triehh_beam.cli.pipeline``): a whole discovery as a Beam entry
point whose flags are all ``PipelineOptions``: ``DiscoveryOptions`` declares one per setting
(``--max_length``, and ``--max-length`` too), every other flag goes to the runner, and a flag that
no options class defines is refused rather than dropped with Beam's warning. It only parses and
wires: ``run_discovery`` runs exactly what ``triehh discover`` runs, with the same results for the
same seed (the repository's ``pipelines/discover.py`` is this module, for ``python -m
pipelines.discover`` from a checkout)."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam.runners import describe_unknown, unknown_pipeline_args
from triehh_beam.cli.argtypes import EXIT_USAGE
from triehh_beam.job.batch.driver import DiscoveryResult, run_discovery
from triehh_beam.job.release.wording import counted
from triehh_beam.job.settings import config as config_lib
from triehh_beam.job.settings.config import DiscoveryConfig

__all__ = ["DiscoveryOptions", "config_from_options", "main", "options_from_argv", "run"]

PROG = "triehh-pipeline"


class DiscoveryOptions(PipelineOptions):
    """The settings of a discovery as Beam pipeline options (none required: Beam parses every
    options class for every pipeline; ``config_from_options`` refuses a missing one)."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        config_lib.add_pipeline_arguments(parser)


def config_from_options(options: PipelineOptions) -> DiscoveryConfig:
    """The frozen ``DiscoveryConfig`` the options describe.

    Raises:
      ValueError: a setting is missing or out of range; OSError: an unreadable seed file.
    """
    view = options.view_as(DiscoveryOptions)
    values = {item.dest: getattr(view, item.dest) for item in config_lib.SETTINGS}
    return config_lib.config_from_values(values)


def _say(line: str) -> None:
    print(line, flush=True)


def options_from_argv(argv: Sequence[str]) -> PipelineOptions:
    """The ``PipelineOptions`` of ``argv``.

    Raises:
      ValueError: an argument that no options class (Beam's or ``DiscoveryOptions``) defines,
        which Beam would drop with only a warning (a mistyped ``--budget-epsilon`` would leave
        the job without its budget).
    """
    unknown = unknown_pipeline_args(argv)
    if unknown:
        raise ValueError(describe_unknown(unknown, own="the discovery's settings"))
    return PipelineOptions(list(argv))


def run(argv: Optional[Sequence[str]] = None) -> DiscoveryResult:
    """Runs the discovery ``argv`` describes (default: ``sys.argv[1:]``) and returns its result."""
    options = options_from_argv(list(sys.argv[1:] if argv is None else argv))
    return run_discovery(config_from_options(options), options, progress=_say)


def main(argv: Optional[Sequence[str]] = None, prog: str = PROG) -> int:
    """``run`` with a one-line refusal (exit code 2) for unknown arguments, missing or bad
    settings; ``prog`` names the command in that line."""
    try:
        options = options_from_argv(list(sys.argv[1:] if argv is None else argv))
        config = config_from_options(options)
    except (ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    result = run_discovery(config, options, progress=_say)
    found = counted(len(result.heavy_hitters), "heavy hitter")
    _say(f"discovered {found} in {counted(result.rounds_run, 'round')} ({result.stop_reason}): {result.output_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
