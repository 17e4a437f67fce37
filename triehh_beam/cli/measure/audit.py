"""``triehh audit``: the empirical privacy audit of the real pipeline (``evaluation.audits.audit``). Parses
flags into a frozen ``AuditConfig``, reads D (``--input`` into memory, or a synthetic
population of ``--users``), runs ``run_audit`` with a progress line per release on stderr, and
prints the report or, with ``--json``, one JSON object. No audit logic lives here; SciPy and
Beam are imported only when the audit runs. Example: ``triehh audit --protocol sample-threshold
--epsilon 1 --delta 1e-3 --runs 20``. Exit codes: 0 when the audit ran (whatever it found: the
verdict is in the report and in ``verdict``); 2 bad arguments, an unusable input or an
infeasible job (one line on stderr); 1 a failure while running.
"""

from __future__ import annotations

import argparse
import json
import sys

from triehh_beam.cli import argtypes
from triehh_beam.job.settings.config import BY_NAME

__all__ = ["add_audit_arguments", "register_audit", "run"]


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``triehh audit``."""
    from triehh_beam.evaluation.audits.audit import EVENTS
    from triehh_beam.protocol.protocols import Protocol

    io = parser.add_argument_group("D, the population audited")
    io.add_argument("--input", metavar="PATTERN",
                    help="records: file, glob or gs:// path (comma-separate several), read into memory "
                         "(default: a synthetic population of --users users)")
    io.add_argument("--users", type=argtypes.positive_int, default=500, metavar="N",
                    help="users of the synthetic population, each holding one of a few short words "
                         "(default: %(default)s)")
    for name in ("input_format", "user_column", "item_column", "count_column"):
        BY_NAME[name].add_to(io)
    job = parser.add_argument_group("the job audited (as triehh discover runs it)")
    job.add_argument("--protocol", choices=[p.value for p in Protocol], default=Protocol.TRIEHH.value,
                     help="(default: %(default)s)")
    job.add_argument("--epsilon", type=argtypes.epsilon, default=4.0, help="target epsilon (default: %(default)s)")
    job.add_argument("--delta", type=argtypes.delta, default=1e-3, help="target delta (default: %(default)s)")
    job.add_argument("--max-length", type=argtypes.positive_int, default=3, metavar="L",
                     help="L in units, the end marker included (default: %(default)s)")
    job.add_argument("--estimate-frequencies", type=float, default=None, metavar="EPSILON_EST",
                     help="release noisy estimates too (TrieHH, TrieHH++), their epsilon added to the claim")
    job.add_argument("--selection-share", type=float, default=None, metavar="F",
                     help="--protocol partition-selection: the share of epsilon its selection spends (default: "
                          "discover's)")
    job.add_argument("--theta", type=argtypes.positive_int, default=None,
                     help="with --batch-size: run TrieHH at this fixed theta (with --allow-no-guarantee) and "
                          "test Theorem 1's claim for it at D's n, over the rounds the event observes")
    job.add_argument("--batch-size", type=argtypes.positive_int, default=None, metavar="M",
                     help="TrieHH's fixed m, with --theta")
    job.add_argument("--window", action="store_true",
                     help="audit discover --window 1h: --runs windows in one replay per population (one Beam job "
                          "each, much faster per release) instead of --runs batch jobs")
    audit = parser.add_argument_group("the audit")
    audit.add_argument("--runs", type=argtypes.positive_int, default=20, metavar="R",
                       help="releases (pairs, with --releases 2) on D and on D' each (default: %(default)s; "
                            "the report says how many would refute a violation)")
    audit.add_argument("--target", metavar="ITEM",
                       help="the item the extra user of D' holds (default: a one-unit item no user of D holds; "
                            "with --releases 2 the most held item of D)")
    audit.add_argument("--target-holders", type=argtypes.non_negative_int, default=0, metavar="F",
                       help="give D F more users holding only the target, so that D' has F + 1 (a count's worst "
                            "case: F = tau - 1 for sample-and-threshold's tau); one release per run "
                            "(default: %(default)s)")
    audit.add_argument("--event", choices=EVENTS, default=None,
                       help="published: the target published; estimate-at-least: its estimate (or count) >= "
                            "--at-least; differs: the second release differs from the first (--releases 2); "
                            "nothing-published: the release publishes nothing (round 1 keeps no prefix) "
                            "(default: differs with --releases 2, else published)")
    audit.add_argument("--at-least", type=float, default=None, metavar="T", help="t of estimate-at-least")
    audit.add_argument("--releases", type=int, choices=(1, 2), default=1,
                       help="2: each run releases D, then D or D' at the same paths (output and state deleted "
                            "in between, one seed file): finds keys reused across releases (default: %(default)s)")
    audit.add_argument("--seed", type=argtypes.non_negative_int, default=0,
                       help="public seed of the audit's seed file, shared by every release (default: %(default)s)")
    audit.add_argument("--confidence", type=float, default=0.95, help="of the verdict (default: %(default)s)")
    audit.add_argument("--violation", type=float, default=0.1, metavar="V",
                       help="report the runs that would refute a violation of this excess probability "
                            "(default: %(default)s)")
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    audit.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")


def _users_of(args: argparse.Namespace):
    """D: the input's users (ids as text), or the synthetic population."""
    from triehh_beam.evaluation.audits.audit import synthetic_population
    from triehh_beam.evaluation.population import load_population
    from triehh_beam.io.schema import RecordColumns

    if args.input is None:
        return synthetic_population(args.users, args.seed), None
    columns = RecordColumns(args.user_column, args.item_column, args.count_column or None)
    population = load_population(args.input, args.format, columns)
    users = {}
    for user, items in population.users.items():
        try:
            name = user.decode("utf-8")
        except UnicodeDecodeError:
            name = "hex:" + user.hex()
        users[name] = {str(item): int(count) for item, count in items.items()}
    return users, {"files": list(population.files), "records": population.records}


def run(args: argparse.Namespace) -> int:
    """Runs an audit for parsed flags; returns the exit code."""
    from triehh_beam.evaluation.audits import audit
    from triehh_beam.io.schema import RecordFormatError
    from triehh_beam.job.release.planning import InfeasiblePlanError

    def progress(line: str) -> None:
        if not args.no_progress:
            print(line, file=sys.stderr, flush=True)

    try:
        config = audit.AuditConfig(
            protocol=args.protocol, epsilon=args.epsilon, delta=args.delta, max_length=args.max_length,
            estimate_frequencies=args.estimate_frequencies, runs=args.runs, target=args.target,
            target_holders=args.target_holders, event=args.event,
            at_least=args.at_least, releases=args.releases, window=args.window, seed=args.seed,
            confidence=args.confidence, violation=args.violation, selection_share=args.selection_share,
            theta=args.theta, batch_size=args.batch_size)
        users, read = _users_of(args)
        result = audit.run_audit(config, users, progress)
    except (FileNotFoundError, RecordFormatError, InfeasiblePlanError, ValueError) as e:
        raise argtypes.UsageError(str(e)) from None
    if read is not None:
        result["input"] = read
    print(json.dumps(result, indent=2) if args.json else audit.format_audit(result))
    return 0


def register_audit(subparsers) -> None:
    """Adds ``audit`` to the ``triehh`` tool."""
    parser = subparsers.add_parser(
        "audit",
        help="run the real pipeline many times on D and D plus one user, and test its (epsilon, delta) claim",
        description="Runs triehh discover (the real driver, in process; every release a fresh output and state at the "
        "same paths, one seed file) --runs times on D and on D' (D plus one user holding only a target item), "
        "and tests the claimed (epsilon, delta) on one event, both ways round (Clopper-Pearson): 'violated' "
        "when the runs refute the claim, else 'inconclusive', with the runs that would refute a violation of "
        "--violation. --releases 2 audits two releases at the same paths (finds keys reused across releases). "
        "A measurement, not a release: run it on synthetic or public data.",
    )
    add_audit_arguments(parser)
    parser.set_defaults(handler=lambda args, extra: run(args))
