"""``triehh stream``: one private discovery per event-time window of device records read from
Pub/Sub (``job.windows.stream``), with ``discover``'s settings except where records come from and how a
batch job is split, plus the subscription, message format, event-time attribute and
``--stop-after-windows``; unknown flags must be Beam options (``--streaming`` implied). Exit
codes: 0 the job ended (after ``--stop-after-windows``, once every declared window closed, or
drained); 2 bad arguments; 1 a failure while running."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from triehh_beam.job.settings import config as config_lib

__all__ = ["register_stream", "run"]

# Settings of a bounded job only: the input (files, a table, a query), how rounds are split
# into jobs, and the refusals that need the whole input (a stream has none: its rejects go to
# the dead letter).
_NOT_FOR_STREAMS = ("input_pattern", "query", "input_format", "timestamp_column", "rounds_per_job",
                    "keep_samples", "lease_seconds", "max_bad_fraction", "max_unusable_fraction")
STREAM_INPUT = "pubsub"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    groups = config_lib.add_arguments(parser, skip=_NOT_FOR_STREAMS)
    source = groups[config_lib.GROUPS[0]]
    source.add_argument("--subscription", required=True, metavar="projects/P/subscriptions/S",
                        help="the Pub/Sub subscription the device records arrive on")
    source.add_argument("--message-format", choices=("json", "proto"), default="json",
                        help="json: one record object {user_id, item, count} or a list of them; proto: a "
                        "DeviceRecords message (protos/triehh_beam/proto/stream.proto) (default: %(default)s)")
    source.add_argument("--timestamp-attribute", metavar="NAME", default=None,
                        help="message attribute holding the event time, milliseconds since the epoch or "
                        "RFC 3339 (default: the publish time); a message whose attribute does not parse "
                        "is dead-lettered")
    source.add_argument("--stop-after-windows", type=int, metavar="N", default=None,
                        help="end the job cleanly once N windows have closed, with records or not (tests, "
                        "backfills); at most the windows --windows FROM..TO declares. Without it the job runs "
                        "until stopped (Ctrl-C or SIGTERM: resumable), until every declared window has closed, "
                        "or until the budget refuses the window now open")


def run(args: argparse.Namespace, beam_args: Sequence[str]) -> int:
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.cli.discover import unknown_arguments
    from triehh_beam.job.release.wording import counted
    from triehh_beam.job.state.ledger import BudgetExceededError
    from triehh_beam.job.windows import stream, windowed

    def fail(message: str, code: int = 2) -> int:
        print(f"triehh stream: error: {message}", file=sys.stderr)
        return code

    refused = unknown_arguments([a for a in beam_args if not a.startswith("--streaming")])
    if refused:
        return fail(refused)
    if args.window is None:
        return fail("--window is required: the length of each event-time window (e.g. 1h)")
    try:
        config = config_lib.config_from_values(vars(args), input_pattern=f"{STREAM_INPUT}://{args.subscription}")
        source = stream.StreamSource(args.subscription, args.message_format, args.timestamp_attribute,
                                     args.stop_after_windows)
        windowed.WindowedJob.check(config)  # the declared windows and their plan, before anything is made
        source.check(config)
    except (ValueError, OSError) as e:
        return fail(str(e))
    from triehh_beam.beam import prism, runners

    try:
        options = runners.with_local_prism(PipelineOptions(list(beam_args)))  # Prism: the local binary
    except (prism.PrismNotFoundError, ValueError) as e:
        return fail(str(e))
    if not config.verbose and runners.uses_in_process_runner(options):
        # As for discover: Beam logs a worker's error with its traceback before it reaches us.
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)
    try:
        ran = stream.run_stream(config, source, options, progress=lambda line: print(line, flush=True))
    except (BudgetExceededError, ValueError) as e:  # Beam's own checks of the subscription too
        return fail(str(e))
    released = sum(1 for r in ran.reports if r["released"])
    letters = stream.describe_dead_letters(stream.count_dead_letters(ran.dead_letter), config.verbose)
    print(f"stream {ran.state.lower()}: {counted(len(ran.reports), 'window')} closed, {released} released; "
          f"dead letters: {letters} (private, in {ran.dead_letter})", flush=True)
    return 0


def register_stream(subparsers) -> None:
    """Adds ``stream`` to the ``triehh`` tool (Beam flags allowed)."""
    parser = subparsers.add_parser(
        "stream",
        help="discover heavy hitters per event-time window of records read from Pub/Sub",
        description="One private TrieHH discovery per fixed event-time window of device records read "
        "from a Pub/Sub subscription, for every window of the declared range --windows FROM..TO, or "
        "from FROM on with --windows FROM.. (with records or not; TrieHH plans for --population N), "
        "each released to OUTPUT/window=<start>/ once the window closes (its end plus "
        "--allowed-lateness), its spend recorded in the ledger when the window opens (a rolling "
        "budget: --budget-period). Started again with the same command, a stream resumes at the "
        "first window not released; OUTPUT/_STREAM.json (triehh show OUTPUT) says how it goes. Flags this "
        "command does not know must be Beam pipeline options (--runner=DataflowRunner ...); the "
        "default runner is Beam's streaming DirectRunner, in process, with Beam's Pub/Sub read (its "
        "watermark follows the clock). On other portable runners (Flink's) the stream reads with its "
        "own Pub/Sub read: a backlog holds windows open until it is read, and a message is "
        "acknowledged only once its window is released; --runner PrismRunner runs a local Prism with "
        "that read (docs/stream_input.md).",
    )
    _add_arguments(parser)
    parser.set_defaults(handler=run, accepts_beam_args=True)
