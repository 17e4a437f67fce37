"""The ``triehh`` command-line tool: one entry point, one subcommand per task.

Each subcommand is registered by a small ``_register_<name>(subparsers)`` function that adds its
parser and sets ``func`` to the function that runs it (``args -> exit code``); add yours to
``_SUBCOMMANDS``. Runners only parse, call the library and print: the logic lives in the
protocol modules.

Exit codes: 0 when the command did its job (``plan`` prints a plan, feasible or not), 2 for
invalid arguments (a one-line message on stderr, no traceback).

    triehh plan --population 100000 --epsilon 4 --delta 1e-10 --max-length 10
    triehh discover --input 'records/*.parquet' --output out --epsilon 4 --delta 1e-10 --max-length 10
    triehh demo

``discover`` and ``demo`` live in ``triehh_beam/cli/discover.py`` (entry points parse and wire).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from typing import Callable, List, Optional, Sequence

from triehh_beam.protocol import parameters, planner, utility

__all__ = ["build_parser", "main"]

_EXIT_USAGE = 2
_WIDTH = 96
_DISCOVERY_PROBABILITIES = (0.5, 0.9, 0.99)


class _UsageError(Exception):
    """Invalid arguments found by a runner: one line on stderr, exit code 2."""


class _ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block) and exit code 2."""

    def error(self, message):  # noqa: D102 (argparse API)
        self.exit(_EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --------------------------------------------------------------------------------------------
# Argument types: each returns the value or raises ArgumentTypeError with a one-line message.


from triehh_beam.cli.argtypes import (  # noqa: E402  (kept under their old names here)
    delta as _delta,
    epsilon as _epsilon,
    population as _population,
    positive_int as _positive_int,
)

# --------------------------------------------------------------------------------------------
# triehh plan


def _register_plan(subparsers) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="choose theta and the batch size for a privacy target (Theorem 1)",
        description=(
            "Choose the vote threshold theta and the per-round batch size m that make a TrieHH "
            "run (epsilon, delta)-DP for N users (Theorem 1), and show the worst-case "
            "frequency needed to be discovered (Proposition 1). Infeasible targets are "
            "reported as such, with the alternatives that exist."
        ),
    )
    parser.add_argument("--population", "-n", type=_population, required=True, metavar="N",
                        help="number of users (devices); 1e5 is accepted")
    parser.add_argument("--epsilon", type=_epsilon, required=True, metavar="E",
                        help="target epsilon for the whole run (all rounds), > 0")
    parser.add_argument("--delta", type=_delta, required=True, metavar="D",
                        help="target delta, in (0, 1); 1/N^2 or smaller is customary")
    parser.add_argument("--max-length", type=_positive_int, required=True, metavar="L",
                        help="L: the maximum item length in units, terminator included; "
                             "also the number of rounds")
    parser.add_argument("--unit-size", type=_positive_int, default=1, metavar="K",
                        help="characters (or bytes) per unit, recorded in the output: L counts "
                             "units of K characters, so items of up to (L-1)*K characters fit "
                             "(default 1)")
    parser.add_argument("--rule", choices=parameters.RULES, default="authors",
                        help="'authors' (default): the smallest theta with delta(theta) <= D, "
                             "exactly; 'corollary1': the paper's Corollary 1 (theta >= 10)")
    parser.add_argument("--item-length", type=_positive_int, default=None, metavar="LEN",
                        help="item length in units, terminator included, for the discovery "
                             "table (default: L, the worst case)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--plot", metavar="DIR", default=None,
                        help="also write the planning plots (PNG) into DIR: worst-case discovery vs "
                             "frequency at epsilon/2, epsilon and 2*epsilon, vs population size, and "
                             "the population needed for 90%% discovery")
    parser.set_defaults(func=_run_plan)


def _plan_report(args) -> dict:
    """The plan and its discovery table, as one JSON-ready dict."""
    result = planner.plan(args.population, args.epsilon, args.delta, args.max_length, args.rule)
    item_length = args.max_length if args.item_length is None else args.item_length
    report = result.to_dict()
    report["population"] = result.n
    report["unit_size"] = args.unit_size
    report["max_item_characters"] = (args.max_length - 1) * args.unit_size
    report["item_length"] = item_length
    report["item_length_is_worst_case"] = item_length == args.max_length
    rows = []
    if result.feasible:
        for p in _DISCOVERY_PROBABILITIES:
            need = utility.min_frequency_for_plan(result, p, item_length)
            rows.append({
                "probability": p,
                "count": None if need is None else need.count,
                "fraction": None if need is None else need.fraction,
                "achieved_probability": None if need is None else need.probability,
            })
    report["discovery"] = rows
    return report


def _run_plan(args) -> int:
    if args.item_length is not None and args.item_length > args.max_length:
        raise _UsageError(
            f"--item-length {args.item_length} exceeds --max-length {args.max_length}"
        )
    try:  # what the argument types cannot see alone (e.g. epsilon/L too large)
        parameters.PrivacyTarget(args.population, args.epsilon, args.delta, args.max_length)
    except ValueError as err:
        raise _UsageError(str(err)) from None
    report = _plan_report(args)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        print(_format_plan(report))
    if args.plot:
        from triehh_beam.evaluation.report import write_planning_plots

        epsilons = sorted({args.epsilon / 2, args.epsilon, args.epsilon * 2})
        try:
            paths = write_planning_plots(args.plot, args.population, epsilons, args.delta,
                                         args.max_length, rule=args.rule, length=args.item_length)
        except ValueError as err:
            raise _UsageError(str(err)) from None
        for path in paths:
            print(f"plot: {path}", file=sys.stderr)
    return 0


def _num(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}"


def _users(k: int) -> str:
    return f"{k:,}"


def _percent(x: float, digits: int = 3) -> str:
    return f"{100 * x:.{digits}g}%"


def _row(label: str, value: str) -> str:
    return f"  {label:<26}{value}"


def _wrap(text: str, indent: str) -> List[str]:
    return textwrap.wrap(text, width=_WIDTH, initial_indent=indent, subsequent_indent=indent)


def _format_plan(r: dict) -> str:
    """The human report: aligned text for a design doc."""
    k = r["unit_size"]
    unit_word = "1 character" if k == 1 else f"{k} characters"
    lines = [
        f"TrieHH plan (Theorem 1; rule: {r['rule']})",
        "",
        _row("population n", f"{_users(r['n'])} users"),
        _row("max length L", f"{r['max_length']} units of {unit_word}, terminator included"),
        _row("", f"(items up to {r['max_item_characters']} characters; "
                 f"at most {r['max_length']} rounds)"),
        _row("target epsilon", _num(r["target_epsilon"], 6)),
        _row("target delta", _num(r["target_delta"])),
        _row("result", "FEASIBLE" if r["feasible"] else "INFEASIBLE"),
        "",
    ]
    if r["feasible"]:
        m = _users(r["batch_size"])
        lines += [
            _row("threshold theta", str(r["theta"])),
            _row("gamma", f"{_num(r['gamma'])} (rule); m/sqrt(n) = "
                          f"{_num(r['effective_gamma'])} after flooring m"),
            _row("batch size m", f"{m} users per round ({_percent(r['sampling_rate'])} of n), "
                                 f"sampled fresh each round"),
            _row("THETACEIL", f"{_num(r['theta_ceiling'])} (largest theta with gamma >= 1)"),
            _row("achieved epsilon", f"{_num(r['epsilon'], 6)} (Theorem 1 at m = {m}; "
                                     f"target {_num(r['target_epsilon'], 6)})"),
            _row("achieved delta", f"{_num(r['delta'])} (target {_num(r['target_delta'])})"),
        ]
        for note in r["notes"]:
            lines += _wrap(f"note: {note}", "  ")
        worst = " = L, the worst case" if r["item_length_is_worst_case"] else ""
        lines += [
            "",
            f"Worst-case discovery (Proposition 1) of an item of {r['item_length']} units"
            f"{worst}:",
            f"  {'probability':<14}{'users holding it':>18}{'share of n':>14}",
        ]
        for row in r["discovery"]:
            if row["count"] is None:
                lines.append(f"  {_percent(row['probability']):<14}{'unreachable':>18}")
                continue
            lines.append(
                f"  {_percent(row['probability']):<14}{_users(row['count']):>18}"
                f"{_percent(row['fraction'], 4):>14}"
            )
        lines += _wrap(
            "Assumes the item shares no prefix with any other item; real data, where items "
            "share prefixes, does better. Use --item-length for shorter items.",
            "  ",
        )
        return "\n".join(lines)

    lines += [
        _row("theta (for delta)", str(r["theta"])),
        _row("THETACEIL", f"{_num(r['theta_ceiling'])} (largest theta with gamma >= 1)"),
        _row("batch size m", f"{_users(r['batch_size'])} (m/sqrt(n) = "
                             f"{_num(r['effective_gamma'])})"),
        "",
        "Why:",
    ]
    lines += _wrap(r["reason"], "  ")
    lines += ["", "Alternatives (each certified by Theorem 1):"]
    if not r["alternatives"]:
        lines.append("  none")
    for i, alt in enumerate(r["alternatives"], 1):
        lines += textwrap.wrap(alt["description"], width=_WIDTH, initial_indent=f"  {i}. ",
                               subsequent_indent="     ")
        effective_gamma = alt["batch_size"] / math.sqrt(alt["n"])
        lines += [
            f"     n = {_users(alt['n'])}, theta = {alt['theta']}, "
            f"m = {_users(alt['batch_size'])}, "
            f"gamma = {_num(alt['gamma'])} (m/sqrt(n) = {_num(effective_gamma)})",
            f"     Theorem 1 gives epsilon = {_num(alt['epsilon'], 6)}, "
            f"delta {'= ' + _num(alt['delta']) if alt['delta'] > 0 else '< 1e-308'}",
        ]
    for note in r["notes"]:
        lines += _wrap(f"note: {note}", "  ")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The tool.

def _register_discover(subparsers) -> None:
    from triehh_beam.cli import discover

    discover.register_discover(subparsers)


def _register_demo(subparsers) -> None:
    from triehh_beam.cli import discover

    discover.register_demo(subparsers)


def _register_ledger(subparsers) -> None:
    parser = subparsers.add_parser(
        "ledger",
        help="print a population's privacy ledger: every job's spend and the total",
        description="Prints the privacy ledger kept in a state directory (or a shared --ledger "
        "directory): one record per job, with its (epsilon, delta), and their basic sequential "
        "composition.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--state", metavar="DIR", help="a job's state directory (its default ledger)")
    where.add_argument("--ledger", metavar="DIR", help="a shared ledger directory")
    parser.add_argument("--budget-epsilon", type=_epsilon, help="show what is left of this lifetime epsilon")
    parser.add_argument("--budget-delta", type=_delta, help="show what is left of this lifetime delta")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=_run_ledger)


def _run_ledger(args) -> int:
    from triehh_beam.job import cas, ledger

    try:
        budget = ledger.Budget(args.budget_epsilon, args.budget_delta)
        book = ledger.Ledger(args.ledger or args.state, budget)
        records = book.records()
    except (ValueError, cas.CasError) as err:
        raise _UsageError(str(err))
    total = book.total(records)
    left = ledger.remaining(budget, total)
    if args.json:
        print(json.dumps({
            "ledger": book.path,
            "records": records,
            "spent": {"epsilon": _finite_or_none(total.epsilon), "delta": _finite_or_none(total.delta)},
            "remaining": {"epsilon": _finite_or_none(left.epsilon), "delta": _finite_or_none(left.delta)},
        }, indent=2))
        return 0
    print(f"privacy ledger {book.path}: {len(records)} job(s)")
    print(f"  {'time':<25} {'job':<10} {'epsilon':>10} {'delta':>10}  input")
    for r in records:
        eps = "unbounded" if r.get("epsilon") is None else f"{r['epsilon']:.6g}"
        delta = "unbounded" if r.get("delta") is None else f"{r['delta']:.3g}"
        print(f"  {r.get('time', ''):<25} {str(r.get('job_id', r.get('record_id')))[:8]:<10} "
              f"{eps:>10} {delta:>10}  {r.get('input', '')}")
    print(f"  total (basic composition): epsilon {total.epsilon:.6g}, delta {total.delta:.3g}")
    if budget.limited:
        print(f"  remaining of the budget:   epsilon {_amount(left.epsilon, '.6g')}, delta {_amount(left.delta, '.3g')}")
    return 0


def _amount(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) else "unlimited"


def _finite_or_none(x: float):
    return x if math.isfinite(x) else None


def _register_evaluate(subparsers) -> None:
    from triehh_beam.cli import evaluate

    evaluate.register_evaluate(subparsers)


def _register_scheduled(subparsers) -> None:
    from triehh_beam.cli import scheduled

    scheduled.register_scheduled(subparsers)


_SUBCOMMANDS: Sequence[Callable] = (
    _register_plan,
    _register_discover,
    _register_demo,
    _register_ledger,
    _register_scheduled,
    _register_evaluate,
)


def build_parser() -> argparse.ArgumentParser:
    """The ``triehh`` parser with every registered subcommand."""
    parser = _ArgumentParser(
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
        # Commands that run Beam jobs pass the flags they do not know to Beam as pipeline
        # options (--runner, --project, ...); the others refuse unknown flags.
        args, beam_args = parser.parse_known_args(argv)
        if beam_args and not getattr(args, "accepts_beam_args", False):
            parser.error(f"unrecognized arguments: {' '.join(beam_args)}")
    except SystemExit as exit_:  # argparse exits on errors and on --help
        return exit_.code if isinstance(exit_.code, int) else _EXIT_USAGE
    try:
        if getattr(args, "handler", None) is not None:
            return args.handler(args, beam_args)
        return args.func(args)
    except _UsageError as err:
        print(f"triehh {args.command}: error: {err}", file=sys.stderr)
        return _EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
