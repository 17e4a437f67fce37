"""``triehh discover``: parses the flags (one per setting of ``job.settings.config``, plus how to report)
into a frozen ``DiscoveryConfig`` and Beam ``PipelineOptions`` (an unknown flag must be a Beam
option, else it is refused: Beam would drop it) and hands both to the driver (``execute``, shared
with ``demo`` and ``scheduled``); the end of a run is printed by ``summary``. Exit codes: 0
success; 2 bad arguments, an infeasible target, unusable input or a state directory of another
job (one line on stderr); 1 a failure while running."""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import shlex
import sys
import time
from typing import Optional, Sequence

from triehh_beam.cli import interrupts, summary
from triehh_beam.job.settings import config as config_lib
from triehh_beam.job.settings.config import DiscoveryConfig

__all__ = [
    "DEMO_DEFAULTS",
    "add_discover_arguments",
    "config_from_args",
    "unknown_arguments",
    "execute",
    "register_discover",
    "run",
    "say",
]

DEMO_DEFAULTS = dict(epsilon=4.0, delta=1e-10, max_length=10)


def add_discover_arguments(parser: argparse.ArgumentParser, *, demo: bool = False) -> None:
    """The flags of a discovery: one per setting (``job.settings.config.SETTINGS``) and how to report.

    ``demo`` reads the bundled population: no input flags, an output directory and a privacy
    target by default.
    """
    groups = {config_lib.GROUPS[0]: parser.add_argument_group(config_lib.GROUPS[0])}
    if demo:
        groups[config_lib.GROUPS[0]].add_argument(
            "--output", default=None, metavar="DIR",
            help="output directory; the private state goes beside it, in DIR.state (default: "
                 "triehh-demo/output in $XDG_CACHE_HOME, else in ~/.cache)")
        skip = ("input_pattern", "query", "output_dir", "input_format", "user_column", "item_column",
                "count_column")
        optional = tuple(DEMO_DEFAULTS)
    else:
        skip = optional = ()
    groups = config_lib.add_arguments(parser, skip=skip, optional=optional, groups=groups)
    io = groups[config_lib.GROUPS[0]]
    io.add_argument("--log-format", choices=("text", "json"), default="text",
                    help="progress as text lines, or as JSON lines with each round's Beam metrics (default: %(default)s)")
    groups["operation"].add_argument(
        "--dry-run", action="store_true",
        help="count users, print the inputs matched, the plan and the budget it would spend; run no round")
    if demo:
        parser.set_defaults(**DEMO_DEFAULTS)


def config_from_args(args: argparse.Namespace, input_pattern: Optional[str] = None) -> DiscoveryConfig:
    """The frozen ``DiscoveryConfig`` for parsed flags.

    Raises:
      ValueError: a bad value; OSError: an unreadable seed file (both name what was wrong).
    """
    overrides = {} if input_pattern is None else {"input_pattern": input_pattern}
    return config_lib.config_from_values(vars(args), **overrides)


def say(line: str) -> None:
    """Prints one progress line at once (a scheduler or pipe sees it as it happens); a Ctrl-C
    that a running job swallowed stops the run here, at a step it has committed."""
    print(line, flush=True)
    interrupts.check()


def _quiet(line: str) -> None:
    """Prints nothing (JSON progress has its own events); stops a run Ctrl-C was meant to stop."""
    interrupts.check()


def _print_json_line(event: dict) -> None:
    print(json.dumps(event, ensure_ascii=False, sort_keys=True), flush=True)
    interrupts.check()


def _fail(message: str, code: int) -> int:
    interrupts.check()  # a failure Ctrl-C caused (a write it cut short) is reported as the interrupt
    print(f"triehh: error: {message}", file=sys.stderr)
    return code


def unknown_arguments(beam_args: Sequence[str]) -> Optional[str]:
    """Why ``beam_args`` cannot go to Beam, in one line, or None when Beam defines them all.

    Refused: a triehh setting given where Beam options go (``--budget_epsilon``, Beam's
    spelling, to ``triehh discover``; any setting in a scheduled config's ``[beam]`` options),
    which Beam would parse into options nobody reads, and every argument that no Beam
    ``PipelineOptions`` class defines (Beam's own parser decides), which Beam would drop.
    """
    from triehh_beam.beam import runners

    settings = {}
    for item in config_lib.SETTINGS:
        settings[item.flag] = settings["--" + item.dest] = item
    for token in beam_args:
        item = settings.get(token.split("=", 1)[0])
        if item is not None:
            return (f"{token.split('=', 1)[0]} is not a Beam pipeline option: the triehh setting is "
                    f"{item.flag} ([{item.section}] {item.key} in a scheduled config)")
    names = runners.unknown_pipeline_args(beam_args)
    if not names:
        return None
    message = runners.describe_unknown(names)
    candidates = {**dict.fromkeys(runners.pipeline_flags()), **settings}  # Beam's flags too (--runer)
    close = difflib.get_close_matches(names[0], sorted(candidates), n=1, cutoff=0.8)
    if close:
        item = candidates[close[0]]
        message += f" (did you mean {item.flag if item else close[0] + ', a Beam pipeline option'}?)"
    return message


def run(args: argparse.Namespace, beam_args: Sequence[str], input_pattern: Optional[str] = None) -> int:
    """Runs a discovery for parsed flags; returns the exit code."""
    pattern = input_pattern or getattr(args, "input", None)
    if pattern and os.path.isdir(pattern):
        return _fail(f"--input {pattern} is a directory: give a pattern of its files, e.g. --input "
                     f"{shlex.quote(os.path.join(pattern, '*.jsonl'))}", 2)
    try:
        config = config_from_args(args, input_pattern)
    except OSError as e:  # the one file a config reads
        return _fail(f"--seed-file {args.seed_file}: cannot read it ({e.strerror or e})", 2)
    except ValueError as e:
        return _fail(str(e), 2)
    return execute(config, beam_args, dry_run=args.dry_run, log_format=args.log_format)


def execute(config: DiscoveryConfig, beam_args: Sequence[str], *, dry_run: bool = False,
            log_format: str = "text") -> int:
    """Runs (or with ``dry_run`` plans) the discovery ``config`` on Beam; returns the exit code.

    Progress shows no exact count unless ``config.verbose`` (then marked private); the exact
    counts are in the operator report, in the job's state directory.

    Every refusal (bad input, an infeasible target, a state directory that holds another job or
    is held by another run, the budget spent) is one line on stderr and exit code 2.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.io.schema import RecordFormatError
    from triehh_beam.io.streams import UnknownFormatError
    from triehh_beam.job.batch.driver import (BadInputError, ConfigMismatchError, InfeasiblePlanError,
                                              InputChangedError, PopulationError, run_discovery)
    from triehh_beam.job.batch.dry_run import dry_run as plan_only
    from triehh_beam.job.state.lease import LeaseHeld
    from triehh_beam.job.state.ledger import BudgetExceededError
    from triehh_beam.job.state.state_store import StateError

    started = time.monotonic()
    as_json = log_format == "json"
    refused = unknown_arguments(beam_args)
    if refused:
        return _fail(refused, 2)
    options = PipelineOptions(list(beam_args))
    if options.get_all_options().get("dry_run"):
        return _fail(
            "--dry_run=True only builds one Beam job; a discovery runs several and reads each "
            "one's output. Use --dry-run to plan without running rounds, or "
            "triehh_beam.job.batch.driver.submit_job_graphs to validate every job graph on a runner",
            2,
        )
    from triehh_beam.beam import prism, runners

    try:
        options = runners.with_local_prism(options)  # Prism: the local binary, found once
    except prism.PrismNotFoundError as e:
        return _fail(str(e), 2)
    if not config.verbose and runners.workers_on_this_machine(options):
        # A worker's error is logged by Beam with its traceback before it reaches us; we
        # report it ourselves in one line (input problems) or re-raise it (anything else).
        # (Prism's own lines go to its log in the state directory: runners.RUNNER_LOG_NAME.)
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)
    if config.window is not None or config.timestamp_column is not None or config.windows is not None:
        return _execute_windowed(config, options, dry_run, as_json)
    try:
        from triehh_beam.job.state.progress import TerminalBar

        ticks = None if as_json else TerminalBar()  # a running job's progress, on stderr
        if dry_run:
            report = plan_only(config, options, progress=_quiet if as_json else say, ticks=ticks)
            if as_json:
                _print_json_line({"event": "dry_run", **report})
            return 0
        result = run_discovery(
            config,
            options,
            progress=_quiet if as_json else say,
            events=_print_json_line if as_json else None,
            ticks=ticks,
        )
    except InfeasiblePlanError as e:
        alternatives = "; ".join(a.description for a in getattr(e.plan, "alternatives", ()))
        message = f"privacy target infeasible: {e.plan.reason}"
        if alternatives:
            message += f". Alternatives: {alternatives} (details: triehh plan)"
        return _fail(message, 2)
    except RecordFormatError as e:
        return _fail(f"{e} (the flags that say how to read the records: --format, --user-column, --item-column, "
                     "--count-column)", 2)
    except FileNotFoundError as e:  # no input file matches (its message says so), or a path is missing
        return _fail(f"{e.filename}: {e.strerror} (check --input, --output and --state-dir)" if e.filename else str(e), 2)
    except (ConfigMismatchError, StateError, BudgetExceededError, BadInputError, InputChangedError,
            PopulationError) as e:
        return _fail(str(e), 2)
    except LeaseHeld as e:
        return _fail(f"another run is working on this state directory: {e}", 2)
    except UnknownFormatError as e:
        return _fail(f"cannot tell the format of {e.path} from its extension: pass --format jsonl, csv or "
                     "parquet, or name the files *.jsonl, *.csv or *.parquet (optionally compressed, e.g. "
                     "*.jsonl.gz)", 2)
    except ValueError as e:  # bad values that reach the driver (e.g. a bad pattern)
        return _fail(str(e), 2)
    interrupts.finishing()  # the result is published: print it whole and exit 0, even after Ctrl-C
    if as_json:
        _print_json_line({
            "event": "summary",
            "heavy_hitters": result.heavy_hitters,
            "frequent_prefixes": result.frequent_prefixes,
            "rounds_run": result.rounds_run,
            "stop_reason": result.stop_reason,
            "output": result.output_path,
            "operator_report": result.report_path,
            "elapsed_seconds": round(time.monotonic() - started, 3),
            "input_warnings": summary.input_warnings_of(result, config),
        })
    else:
        summary.print_summary(result, time.monotonic() - started, config, say)
    return 0


def _execute_windowed(config: DiscoveryConfig, options, dry_run: bool, as_json: bool) -> int:
    """``--window``: one discovery per event-time window of the files (``job.windows.stream.run_replay``)."""
    from triehh_beam.io.schema import RecordFormatError
    from triehh_beam.job.release.wording import counted
    from triehh_beam.job.windows import stream

    if config.window is None or config.timestamp_column is None:
        return _fail("--window and --timestamp-column go together: windows need each record's event time", 2)
    if dry_run:
        return _fail("--dry-run plans one job; a windowed discovery plans each window when it closes", 2)
    if config.windows is None:
        return _fail("--window needs --windows FROM..TO (RFC 3339 UTC, aligned to the window): every window "
                     "of the range is released and charged, empty or not", 2)
    try:
        ran = stream.run_replay(config, options, progress=_quiet if as_json else say)
    except (RecordFormatError, FileNotFoundError, ValueError) as e:
        return _fail(str(e), 2)
    interrupts.finishing()  # every window is released: print them whole and exit 0, even after Ctrl-C
    if as_json:
        for report in ran.reports:
            _print_json_line({"event": "window", "window_start": report["window_start"],
                              "released": report["released"], "reason": report["reason"],
                              "output": report.get("published_to")})
    released = sum(1 for r in ran.reports if r["released"])
    if not as_json:
        letters = stream.describe_dead_letters(stream.count_dead_letters(ran.dead_letter), config.verbose)
        say(f"{counted(len(ran.reports), 'window')}, {released} released; dead letters: {letters} "
            f"(private, in {ran.dead_letter})")
    return 0


def register_discover(subparsers) -> None:
    """Adds ``discover`` to the ``triehh`` tool (Beam flags allowed)."""
    parser = subparsers.add_parser(
        "discover",
        help="discover heavy hitters in device records (a Beam job per round)",
        description="Discover heavy hitters with TrieHH (or TrieHH++: --protocol triehh++; whole items "
        "released once with counts: --protocol sample-threshold). Flags this command does not know must be "
        "Beam pipeline options (e.g. --runner=DataflowRunner --project=... --temp_location=gs://...); "
        "any other is refused. The default runner is Beam's in-process runner; --runner=PrismRunner runs "
        "the local Prism binary ($TRIEHH_PRISM, else prism on PATH, else the one .ci/run builds; never a "
        "download). A runner whose workers cannot reach a local path (Dataflow, DOCKER workers) needs a gs:// "
        "--state-dir.",
    )
    add_discover_arguments(parser)
    parser.set_defaults(handler=lambda args, extra: run(args, extra), accepts_beam_args=True, resumable=True)
