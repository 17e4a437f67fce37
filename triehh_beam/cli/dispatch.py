"""The ``triehh`` command-line tool: each subcommand's module registers its parser and sets
``handler`` (``(args, beam_args) -> exit code``), ``accepts_beam_args`` for commands whose unknown
flags are Beam pipeline options, and ``resumable`` for commands whose re-run resumes where an
interrupted one stopped. Exit codes: 0 the command did its job, 2 invalid arguments (one line on
stderr, no traceback), 1 a failure while running, 130 interrupted (Ctrl-C: one line, with the
command that resumes)."""

from __future__ import annotations

import argparse
import atexit
import os
import shlex
import sys
from typing import Callable, List, Optional, Sequence

from triehh_beam.cli import demo, discover, federated, interrupts, scheduled, stream
from triehh_beam.cli.argtypes import EXIT_USAGE, ArgumentParser, UsageError
from triehh_beam.cli.inspect import ledger, show
from triehh_beam.cli.measure import audit, evaluate
from triehh_beam.cli.plan import command as plan

__all__ = ["EXIT_INTERRUPTED", "build_parser", "entry", "main"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C stopped

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
    parser.set_defaults(commands=subparsers.choices)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs ``triehh`` with ``argv`` (default: ``sys.argv[1:]``) and returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, beam_args = parser.parse_known_args(argv)
        command = args.commands[args.command]
        if beam_args and not getattr(args, "accepts_beam_args", False):
            command.error(f"unrecognized arguments: {' '.join(beam_args)}")
        typo = command.typo_message(beam_args)  # a mistyped flag, unless Beam defines it
        if typo:
            command.refuse(typo)
    except SystemExit as exit_:  # argparse exits on errors and on --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    try:
        with interrupts.remembered():
            return _run(args, beam_args, argv)
    except KeyboardInterrupt:  # it arrived as the command started
        return _interrupted(args, argv)


def _run(args: argparse.Namespace, beam_args: List[str], argv: Sequence[str]) -> int:
    """The command's exit code; within ``interrupts.remembered``."""
    try:
        code = args.handler(args, beam_args)
    except UsageError as err:
        if interrupts.received():
            return _interrupted(args, argv)
        print(f"triehh {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return _interrupted(args, argv)
    except BrokenPipeError:  # `triehh show OUT | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit's flush
        return 1
    except Exception:
        # After Ctrl-C every failure is the interrupt's: Beam re-raises it from a DoFn as
        # RuntimeError, and a file write it cut short ends in OSError.
        if interrupts.received():
            return _interrupted(args, argv)
        raise
    if code != 0 and interrupts.received():  # a failure the interrupt caused, already reported
        return _interrupted(args, argv)
    return code


def _interrupted(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """One line, not Beam's 60-odd frames: what was committed stays, and the same command resumes.
    A second Ctrl-C from here on changes nothing (it would print the line twice)."""
    interrupts.finishing()
    again = f"; resume with: {shlex.join(['triehh', *argv])}" if getattr(args, "resumable", False) else ""
    print(f"\ntriehh {args.command}: interrupted{again}", file=sys.stderr)
    return EXIT_INTERRUPTED


def entry() -> None:
    """The ``triehh`` executable: exits with ``main``'s code. Around the command, SIGINT is only
    remembered: one that lands while it starts interrupts it as it begins, and one that lands as
    the process exits, its result already out, cannot turn a finished command into a killed one."""
    interrupts.record_only()
    code = main()
    interrupts.ignore()  # its result is out: a Ctrl-C as the process shuts down changes nothing
    if code == EXIT_INTERRUPTED:
        # A Beam job interrupted in-process leaves its worker threads waiting for work that never
        # comes, and Python's exit would wait for them for ever: run the exit handlers (Beam stops
        # the servers it started there), then leave without joining those threads.
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
