"""Entry point: a whole private heavy-hitter discovery (``triehh discover``, ``triehh demo``).

Parses flags into a frozen ``DiscoveryConfig`` and Beam ``PipelineOptions`` (every flag this
parser does not know is passed to Beam unchanged, e.g. ``--runner``, ``--project``,
``--temp_location``, ``--direct_running_mode``), then hands both to the driver. No Beam logic
lives here.

Exit codes: 0 success; 2 bad arguments, an infeasible privacy target, unusable input or a state
directory that holds another job (one-line reason on stderr); 1 a failure while running.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import List, Optional, Sequence

from apache_beam.options.pipeline_options import PipelineOptions

__all__ = ["add_discover_arguments", "config_from_args", "register_demo", "register_discover", "run"]

DEMO_DEFAULTS = dict(epsilon=4.0, delta=1e-10, max_length=10)


def add_discover_arguments(parser: argparse.ArgumentParser, *, demo: bool = False) -> None:
    """The flags of a discovery; ``demo`` makes input and output optional."""
    io = parser.add_argument_group("input and output")
    if demo:
        io.add_argument("--output", default="triehh-demo-output", help="output directory (default: %(default)s)")
    else:
        io.add_argument("--input", required=True, metavar="PATTERN", help="records: file, glob, gs:// path; comma-separate several")
        io.add_argument("--output", required=True, metavar="DIR", help="where heavy_hitters.json and trie.pb are written")
        io.add_argument("--format", choices=("jsonl", "csv", "parquet"), help="input format (default: from the file extension)")
        io.add_argument("--user-column", default="user_id", help="(default: %(default)s)")
        io.add_argument("--item-column", default="item", help="(default: %(default)s)")
        io.add_argument("--count-column", default="count", help="optional per-record count (default: %(default)s)")
    io.add_argument("--verbose", action="store_true",
                    help="keep Beam's own log output (on the in-process runner it is silenced: the "
                    "product reports every input problem itself)")
    io.add_argument("--log-format", choices=("text", "json"), default="text",
                    help="progress as text lines, or as JSON lines with each round's Beam metrics (default: %(default)s)")
    io.add_argument("--state-dir", metavar="DIR", help="private job state, holds the secret seed (default: OUTPUT/state)")
    io.add_argument("--seed-file", metavar="F", help="file whose 16-64 bytes are the secret seed (default: a fresh random seed)")

    privacy = parser.add_argument_group("privacy target")
    defaults = DEMO_DEFAULTS if demo else {}
    privacy.add_argument("--epsilon", type=float, required=not demo, default=defaults.get("epsilon"), help="epsilon for the whole job")
    privacy.add_argument("--delta", type=float, required=not demo, default=defaults.get("delta"), help="delta for the whole job")
    privacy.add_argument("--max-length", type=int, required=not demo, default=defaults.get("max_length"), metavar="L",
                         help="units per item including the terminator; also the most rounds")
    privacy.add_argument("--unit-size", type=int, default=1, metavar="K", help="characters per unit (default: %(default)s)")
    privacy.add_argument("--rule", choices=("authors", "corollary1"), default="authors", help="parameter rule (default: %(default)s)")

    budget = parser.add_argument_group("lifetime budget of the population (privacy ledger)")
    budget.add_argument("--ledger", metavar="DIR",
                        help="where the population's ledger.jsonl lives; share it between jobs on the same "
                        "population (default: the state directory)")
    budget.add_argument("--budget-epsilon", type=float, help="lifetime epsilon of the population (default: unlimited)")
    budget.add_argument("--budget-delta", type=float, help="lifetime delta of the population (default: unlimited)")

    operate = parser.add_argument_group("operation")
    operate.add_argument("--dry-run", action="store_true",
                         help="count users, print the inputs matched, the plan and the budget it would spend; run no round")
    operate.add_argument("--dead-letter", metavar="PATH",
                         help="write the rejected input rows (raw) to this JSON-lines file, for the operator")
    operate.add_argument("--max-bad-fraction", type=float, metavar="F",
                         help="refuse the job, before any round, if more than F of the rows are bad")
    operate.add_argument("--max-item-bytes", type=int, default=4096, help="longer items are bad rows (default: %(default)s)")
    operate.add_argument("--max-user-bytes", type=int, default=256, help="longer user ids are bad rows (default: %(default)s)")
    operate.add_argument("--lease-seconds", type=float, default=6 * 3600,
                         help="how long a run holds the state directory's lease between renewals (default: %(default)s)")

    items = parser.add_argument_group("items")
    items.add_argument("--item-type", choices=("text", "bytes", "int"), default="text",
                       help="text (units of K characters), bytes (K bytes) or int (K bits) (default: %(default)s)")
    items.add_argument("--int-bits", type=int, help="width of integer items, 1-64 (default: 64)")
    items.add_argument("--bytes-encoding", choices=("base64", "hex"),
                       help="how byte items are written in JSON Lines and CSV (Parquet: binary columns)")
    items.add_argument("--tokenize", action="store_true",
                       help="split text fields into words (rule: triehh_beam/protocol/tokenize.py), each an item")
    items.add_argument("--case-fold", action="store_true", help="fold case of text items")
    items.add_argument("--truncate-long-items", action="store_true",
                       help="cut items longer than L-1 units to a prefix instead of dropping them")

    expert = parser.add_argument_group("expert (experiments only)")
    expert.add_argument("--theta", type=int, help="fix the threshold instead of planning it (with --batch-size)")
    expert.add_argument("--batch-size", type=int, help="fix the users sampled per round (with --theta)")
    expert.add_argument("--allow-no-guarantee", action="store_true",
                        help="run fixed parameters even when Theorem 1 gives no guarantee for them")


def config_from_args(args: argparse.Namespace, input_pattern: Optional[str] = None):
    """The frozen ``DiscoveryConfig`` for parsed flags (raises ValueError on bad values)."""
    from triehh_beam.job.driver import DiscoveryConfig

    seed = None
    if args.seed_file:
        from apache_beam.io.filesystems import FileSystems

        with FileSystems.open(args.seed_file, compression_type="uncompressed") as f:
            seed = f.read()
        if not 16 <= len(seed) <= 64:
            raise ValueError(f"{args.seed_file}: a seed file holds 16 to 64 bytes, this one {len(seed)}")
    return DiscoveryConfig(
        input_pattern=input_pattern or args.input,
        output_dir=args.output,
        epsilon=args.epsilon,
        delta=args.delta,
        max_length=args.max_length,
        unit_size=args.unit_size,
        input_format=getattr(args, "format", None),
        rule=args.rule,
        state_dir=args.state_dir,
        seed=seed,
        case_fold=args.case_fold,
        truncate_long_items=args.truncate_long_items,
        user_column=getattr(args, "user_column", "user_id"),
        item_column=getattr(args, "item_column", "item"),
        count_column=getattr(args, "count_column", "count"),
        theta=args.theta,
        batch_size=args.batch_size,
        allow_no_guarantee=args.allow_no_guarantee,
        item_kind=args.item_type,
        int_bits=args.int_bits,
        tokenize=args.tokenize,
        bytes_encoding=args.bytes_encoding,
        max_user_bytes=args.max_user_bytes,
        max_item_bytes=args.max_item_bytes,
        dead_letter=args.dead_letter,
        max_bad_fraction=args.max_bad_fraction,
        ledger_dir=args.ledger,
        budget_epsilon=args.budget_epsilon,
        budget_delta=args.budget_delta,
        lease_seconds=args.lease_seconds,
    )


def _say(line: str) -> None:
    print(line, flush=True)


def _print_json_line(event: dict) -> None:
    print(json.dumps(event, ensure_ascii=False, sort_keys=True), flush=True)


def _fail(message: str, code: int) -> int:
    print(f"triehh: error: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace, beam_args: Sequence[str], input_pattern: Optional[str] = None) -> int:
    """Runs a discovery for parsed flags; returns the exit code."""
    from triehh_beam.beam.record_io import RecordFormatError, record_format_error_from
    from triehh_beam.job.cas import LeaseHeld
    from triehh_beam.job.driver import (
        BadInputError,
        ConfigMismatchError,
        InfeasiblePlanError,
        run_discovery,
    )
    from triehh_beam.job.dry_run import dry_run
    from triehh_beam.job.ledger import BudgetExceededError
    from triehh_beam.job.state_store import StateError

    try:
        config = config_from_args(args, input_pattern)
    except (ValueError, OSError) as e:
        return _fail(str(e), 2)
    started = time.monotonic()
    as_json = getattr(args, "log_format", "text") == "json"
    options = PipelineOptions(list(beam_args))
    if options.get_all_options().get("dry_run"):
        return _fail(
            "--dry_run=True only builds one Beam job; a discovery runs several and reads each "
            "one's output. Use --dry-run to plan without running rounds, or "
            "triehh_beam.job.driver.submit_job_graphs to validate every job graph on a runner",
            2,
        )
    from triehh_beam.beam import runners

    if not getattr(args, "verbose", False) and runners.uses_in_process_runner(options):
        # A worker's error is logged by Beam with its traceback before it reaches us; we
        # report it ourselves in one line (input problems) or re-raise it (anything else).
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)
    try:
        if args.dry_run:
            report = dry_run(config, options, progress=(lambda line: None) if as_json else _say)
            if as_json:
                _print_json_line({"event": "dry_run", **report})
            return 0
        result = run_discovery(
            config,
            options,
            progress=(lambda line: None) if as_json else _say,
            events=_print_json_line if as_json else None,
        )
    except InfeasiblePlanError as e:
        alternatives = "; ".join(a.description for a in getattr(e.plan, "alternatives", ()))
        message = f"privacy target infeasible: {e.plan.reason}"
        if alternatives:
            message += f". Alternatives: {alternatives} (details: triehh plan)"
        return _fail(message, 2)
    except (ConfigMismatchError, RecordFormatError, FileNotFoundError, StateError, BudgetExceededError,
            BadInputError) as e:
        return _fail(str(e), 2)
    except LeaseHeld as e:
        return _fail(f"another run is working on this state directory: {e}", 2)
    except ValueError as e:  # bad values that reach the driver (e.g. a bad pattern)
        return _fail(str(e), 2)
    except Exception as e:  # a worker's error, wrapped by a multi-process or remote runner
        wrapped = record_format_error_from(e)
        if wrapped is None:
            raise
        return _fail(str(wrapped), 2)
    if as_json:
        _print_json_line({
            "event": "summary",
            "heavy_hitters": result.heavy_hitters,
            "frequent_prefixes": result.frequent_prefixes,
            "rounds_run": result.rounds_run,
            "stop_reason": result.stop_reason,
            "output": result.output_path,
            "elapsed_seconds": round(time.monotonic() - started, 3),
        })
    else:
        _print_summary(result, time.monotonic() - started)
    return 0


def _print_summary(result, elapsed: float) -> None:
    plan = result.plan
    _say("")
    _say(f"discovered {len(result.heavy_hitters)} heavy hitters in {result.rounds_run} rounds "
         f"({result.stop_reason}), {elapsed:.1f} s:")
    for item in result.heavy_hitters:
        _say(f"  {item.hex() if isinstance(item, bytes) else item}")
    if result.frequent_prefixes:
        shown = [p.hex() if isinstance(p, bytes) else str(p) for p in result.frequent_prefixes]
        _say(f"frequent prefixes (not complete items): {', '.join(shown)}")
    if plan.no_guarantee:
        _say("privacy: NO DP GUARANTEE (theta and batch size fixed outside Theorem 1)")
    else:
        _say(f"privacy: ({plan.epsilon:.4g}, {plan.delta:.3g})-DP, user level, for all {plan.max_length} rounds; "
             f"n={plan.population:,}, theta={plan.theta}, m={plan.batch_size:,} per round")
    _say(f"results: {result.output_path}")


def register_discover(subparsers) -> None:
    parser = subparsers.add_parser(
        "discover",
        help="discover heavy hitters in device records (a Beam job per round)",
        description="Discover heavy hitters with TrieHH. Flags this command does not know are "
        "Beam pipeline options (e.g. --runner=DataflowRunner --project=... --temp_location=gs://...). "
        "The default runner is Beam's in-process runner.",
    )
    add_discover_arguments(parser)
    parser.set_defaults(handler=lambda args, extra: run(args, extra), accepts_beam_args=True)


def register_demo(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run discover on the bundled population of 200,000 users (one English word each)",
        description="Runs `triehh discover` on the bundled real-word population (words drawn "
        "from wordfreq's English frequencies), then compares what it found with the truth.",
    )
    add_discover_arguments(parser, demo=True)
    parser.set_defaults(handler=_run_demo, accepts_beam_args=True)


def _run_demo(args: argparse.Namespace, beam_args: List[str]) -> int:
    from triehh_beam.evaluation import demo

    path = demo.demo_population_path()
    _say(f"demo population: {path}")
    code = run(args, beam_args, input_pattern=path)
    if code != 0:
        return code
    import json
    import os

    with open(os.path.join(args.output, "heavy_hitters.json"), encoding="utf-8") as f:
        found = set(json.load(f)["heavy_hitters"])
    truth = demo.truth(path)
    n = sum(1 for _ in truth)
    _say("")
    _say("the truth (known here because the demo population is synthetic):")
    _say(f"  {'rank':>4}  {'word':<10} {'users':>7}  found")
    for rank, (word, users) in enumerate(truth[:25], start=1):
        _say(f"  {rank:>4}  {word:<10} {users:>7,}  {'yes' if word in found else '-'}")
    hits = sum(1 for word, _ in truth[:10] if word in found)
    _say(f"  recall of the true top 10: {hits}/10 ({n:,} distinct words in the population)")
    return 0
