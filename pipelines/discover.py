"""``python -m pipelines.discover``: a whole TrieHH discovery as a Beam entry point.

The flags are standard Beam ``PipelineOptions``: ``DiscoveryOptions`` declares one option per
setting of the library's ``DiscoveryConfig`` (generated from ``triehh_beam.job.config.SETTINGS``,
Beam's spelling ``--max_length`` and the command-line tool's ``--max-length`` both accepted),
every other flag Beam's ``PipelineOptions`` define (``--runner``, ``--project``,
``--temp_location``, ...) goes to the runner, any flag none defines (``--ledger-dir``) is refused
rather than dropped with Beam's warning, and the default runner is the library's in-process one, so nothing is downloaded. The module only
parses and wires: ``run_discovery`` runs the census, the plan and the rounds exactly as
``triehh discover`` does, with the same results for the same seed. Example:
``python -m pipelines.discover --input='records/*.parquet' --output=out --epsilon=4
--delta=1e-10 --max_length=10 [--runner=DataflowRunner --project=...]``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam.runners import describe_unknown, unknown_pipeline_args
from triehh_beam.job import config as config_lib
from triehh_beam.job.config import DiscoveryConfig
from triehh_beam.job.driver import DiscoveryResult, run_discovery

__all__ = ["DiscoveryOptions", "config_from_options", "main", "options_from_argv", "run"]

_EXIT_USAGE = 2


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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``run`` with a one-line refusal (exit code 2) for unknown arguments, missing or bad
    settings."""
    try:
        options = options_from_argv(list(sys.argv[1:] if argv is None else argv))
        config = config_from_options(options)
    except (ValueError, OSError) as e:
        print(f"pipelines.discover: error: {e}", file=sys.stderr)
        return _EXIT_USAGE
    result = run_discovery(config, options, progress=_say)
    _say(f"discovered {len(result.heavy_hitters)} heavy hitters in {result.rounds_run} rounds "
         f"({result.stop_reason}): {result.output_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
