"""The ``triehh`` command-line tool: the parser of every subcommand, and dispatch.

Each subcommand lives in its own module (``plan``, ``discover``, ``demo``, ``ledger``,
``scheduled``, ``evaluate``, ``show``, ``audit``), whose ``register_<name>(subparsers)`` adds its parser and sets
``handler`` (``(args, beam_args) -> exit code``) and, for commands that run Beam jobs,
``accepts_beam_args``: flags such a command does not know are Beam pipeline options, the other
commands refuse them. Exit codes: 0 when the command did its job, 2 for invalid arguments (one
line on stderr, no traceback), 1 for a failure while running.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Optional, Sequence

from triehh_beam.cli import audit, demo, discover, evaluate, federated, ledger, plan, scheduled, show, stream
from triehh_beam.cli.argtypes import EXIT_USAGE, ArgumentParser, UsageError

__all__ = ["build_parser", "main"]

_SUBCOMMANDS: Sequence[Callable] = (
    plan.register_plan,
    discover.register_discover,
    demo.register_demo,
    ledger.register_ledger,
    scheduled.register_scheduled,
    evaluate.register_evaluate,
    show.register_show,
    stream.register_stream,
    federated.register_federated,
    audit.register_audit,
)


def build_parser() -> argparse.ArgumentParser:
    """The ``triehh`` parser with every registered subcommand."""
    parser = ArgumentParser(
        prog="triehh",
        description="Private heavy-hitter discovery with TrieHH.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in _SUBCOMMANDS:
        register(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs ``triehh`` with ``argv`` (default: ``sys.argv[1:]``) and returns the exit code."""
    parser = build_parser()
    try:
        args, beam_args = parser.parse_known_args(argv)
        if beam_args and not getattr(args, "accepts_beam_args", False):
            parser.error(f"unrecognized arguments: {' '.join(beam_args)}")
    except SystemExit as exit_:  # argparse exits on errors and on --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    try:
        return args.handler(args, beam_args)
    except UsageError as err:
        print(f"triehh {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `triehh show OUT | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit's flush
        return 1


if __name__ == "__main__":
    sys.exit(main())
