"""``triehh audit``: the empirical privacy audit of TrieHH on an input (``evaluation.audit``).

Parses flags (the input and item settings shared with ``discover`` come from ``job.config``)
into a frozen ``AuditConfig``, reads the input into memory (``evaluation.population``), runs
``run_audit`` with a progress line per tenth of the runs on stderr, and prints the report or,
with ``--json``, one JSON object. No audit logic lives here; SciPy and Beam are imported only
when the audit runs. Example: ``triehh audit --input records.parquet --epsilon 4 --delta 1e-10
--max-length 10 --runs 1000``. Exit codes: 0 when the audit ran (whatever it found: the
verdict is in the report and in ``violated``); 2 bad arguments, an unusable input, an
infeasible target or a bad ``--canary`` (one line on stderr); 1 a failure while running.
"""

from __future__ import annotations

import argparse
import json
import sys

from triehh_beam.cli import argtypes
from triehh_beam.job.config import BY_NAME

__all__ = ["add_audit_arguments", "register_audit", "run"]


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``triehh audit``."""
    io = parser.add_argument_group("input")
    io.add_argument("--input", required=True, metavar="PATTERN",
                    help="records: file, glob or gs:// path (comma-separate several), read into memory")
    for name in ("input_format", "user_column", "item_column", "count_column"):
        BY_NAME[name].add_to(io)
    target = parser.add_argument_group("the plan audited (as triehh discover would make it)")
    target.add_argument("--epsilon", type=argtypes.epsilon, required=True, help="target epsilon")
    target.add_argument("--delta", type=argtypes.delta, required=True, help="target delta")
    for name in ("max_length", "unit_size", "rule", "case_fold", "truncate_long_items"):
        BY_NAME[name].add_to(target)
    audit = parser.add_argument_group("the audit")
    audit.add_argument("--runs", type=argtypes.positive_int, default=1000, metavar="R",
                       help="runs on D0 and on each D1, at least 2 (default: %(default)s)")
    audit.add_argument("--canary", metavar="ITEM",
                       help="the item the extra user of D1 holds (default: a random string nobody holds); "
                            "the worst-case canary is always audited too")
    audit.add_argument("--seed", type=argtypes.non_negative_int, default=0,
                       help="public seed of the random canary and of every run's seed (default: %(default)s)")
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    audit.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    expert = parser.add_argument_group("expert: audit a configuration the planner did not choose")
    expert.add_argument("--theta", type=argtypes.positive_int, default=None,
                        help="run this threshold instead of the plan's; the claim stays the plan's "
                             "(--theta 1 shows what a broken configuration looks like)")
    expert.add_argument("--batch-size", type=argtypes.positive_int, default=None, metavar="M",
                        help="sample this many users per round instead of the plan's m; the claim stays the plan's")


def _progress(enabled: bool):
    def report(done: int, total: int) -> None:
        if enabled and (done == total or done % max(1, total // 10) == 0):
            print(f"audit: {done:,}/{total:,} runs", file=sys.stderr, flush=True)
    return report


def run(args: argparse.Namespace) -> int:
    """Runs an audit for parsed flags; returns the exit code."""
    from triehh_beam.evaluation import audit
    from triehh_beam.evaluation.population import load_population
    from triehh_beam.io.schema import RecordColumns, RecordFormatError

    try:
        config = audit.AuditConfig(
            epsilon=args.epsilon, delta=args.delta, max_length=args.max_length, runs=args.runs,
            canary=args.canary, seed=args.seed, unit_size=args.unit_size, case_fold=args.case_fold,
            truncate_long_items=args.truncate_long_items, rule=args.rule, theta=args.theta,
            batch_size=args.batch_size)
        columns = RecordColumns(args.user_column, args.item_column, args.count_column or None)
        population = load_population(args.input, args.format, columns)
        result = audit.run_audit(config, population.users, _progress(not args.no_progress))
    except (FileNotFoundError, RecordFormatError, ValueError) as e:
        raise argtypes.UsageError(str(e)) from None
    result["input"] = {"files": list(population.files), "records": population.records}
    print(json.dumps(result, indent=2) if args.json else audit.format_audit(result))
    return 0


def register_audit(subparsers) -> None:
    """Adds ``audit`` to the ``triehh`` tool."""
    parser = subparsers.add_parser(
        "audit",
        help="measure a lower bound on the epsilon TrieHH delivers, beside the one it claims",
        description="Runs TrieHH R times on the input (D0) and R times on each neighbour D1 (D0 plus one "
        "user holding only a canary item: a random or given one, and the worst case), with the plan "
        "discover would make, and reports the lower bound on epsilon that the best distinguishing event "
        "proves at 95% confidence (Clopper-Pearson), beside the claimed epsilon. The runs are the keyed "
        "simulation (the pipeline's exact draws). Like triehh evaluate, it is a measurement, not a "
        "release: run it on synthetic or public data, or data whose privacy is not at stake.",
    )
    add_audit_arguments(parser)
    parser.set_defaults(handler=lambda args, extra: run(args))
