"""``triehh ledger``: a population's privacy ledger (in a state directory or a shared
``--ledger``), one line per job and their basic sequential composition, or one JSON object; with
a lifetime budget, what remains; with ``--budget-period``, the spend (and what remains) of every
period a release touches. An unreadable ledger or a bad budget exits with code 2 and one line on
stderr."""

from __future__ import annotations

import json
import math
import os

from triehh_beam.cli import argtypes
from triehh_beam.cli.argtypes import UsageError

__all__ = ["register_ledger"]


def register_ledger(subparsers) -> None:
    """Adds ``ledger`` to the ``triehh`` tool."""
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
    parser.add_argument("--budget-epsilon", type=argtypes.epsilon, help="show what is left of this lifetime epsilon")
    parser.add_argument("--budget-delta", type=argtypes.delta, help="show what is left of this lifetime delta")
    parser.add_argument("--budget-period", metavar="DURATION",
                        help="the budget is per period of event time (1d: each UTC day): show the spend, and "
                        "what is left, of every period a release touches")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=lambda args, extra: _run_ledger(args))


def _run_ledger(args) -> int:
    from triehh_beam.job.state import cas, ledger

    flag, where = ("--ledger", args.ledger) if args.ledger else ("--state", args.state)
    if "://" not in where and not os.path.isdir(where):  # a typo would read as an empty ledger
        raise UsageError(f"{flag} {where}: no such directory (give the directory a job's --ledger named, "
                         "or --state, its state directory)")
    from triehh_beam.job.settings.setting import parse_duration

    try:
        period = None if args.budget_period is None else parse_duration(args.budget_period)
        budget = ledger.Budget(args.budget_epsilon, args.budget_delta, period)
        book = ledger.Ledger(args.ledger or args.state, budget)
        records = book.records()
    except (ValueError, cas.CasError) as err:
        raise UsageError(str(err)) from None
    total = book.total(records)
    left = ledger.remaining(budget, total)
    per_period = [(ledger.period_start(k, period), spent, ledger.remaining(budget, spent))
                  for k, spent in book.spent_per_period(records)]
    if args.json:
        document = {
            "ledger": book.path,
            "records": records,
            "spent": {"epsilon": _finite_or_none(total.epsilon), "delta": _finite_or_none(total.delta)},
            "remaining": {"epsilon": _finite_or_none(left.epsilon), "delta": _finite_or_none(left.delta)},
        }
        if period is not None:
            del document["remaining"]  # a period budget has no lifetime remainder
            document["per_period"] = [
                {"period_start": start, "spent": _amounts_json(s), "remaining": _amounts_json(r)}
                for start, s, r in per_period]
        print(json.dumps(document, indent=2))
        return 0
    print(f"privacy ledger {book.path}: {len(records)} job(s)")
    print(f"  {'time':<25} {'job':<10} {'epsilon':>10} {'delta':>10}  input")
    for r in records:
        eps = "unbounded" if r.get("epsilon") is None else f"{r['epsilon']:.6g}"
        delta = "unbounded" if r.get("delta") is None else f"{r['delta']:.3g}"
        parts = ""
        if r.get("estimate_epsilon"):  # --estimate-frequencies: which part of epsilon is theirs
            discovery = "unbounded" if r.get("discovery_epsilon") is None else f"{r['discovery_epsilon']:.6g}"
            parts = f"  (epsilon: discovery {discovery} + frequency estimates {r['estimate_epsilon']:.6g})"
        print(f"  {r.get('time', ''):<25} {str(r.get('job_id', r.get('record_id')))[:8]:<10} "
              f"{eps:>10} {delta:>10}  {r.get('input', '')}{parts}")
    print(f"  total (basic composition): epsilon {total.epsilon:.6g}, delta {total.delta:.3g}")
    if period is not None:
        print(f"  spend per {ledger.describe_period(period)} (the budget's unit: {budget.unit}):")
        for start, spent, remaining in per_period:
            print(f"    from {start}: epsilon {_amount(spent.epsilon, '.6g')}, delta {_amount(spent.delta, '.3g')}; "
                  f"remaining epsilon {_amount(remaining.epsilon, '.6g')}, delta {_amount(remaining.delta, '.3g')}")
    elif budget.limited:
        print(f"  remaining of the budget:   epsilon {_amount(left.epsilon, '.6g')}, delta {_amount(left.delta, '.3g')}")
    return 0



def _amount(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) else "unlimited"


def _amounts_json(spend) -> dict:
    return {"epsilon": _finite_or_none(spend.epsilon), "delta": _finite_or_none(spend.delta)}


def _finite_or_none(x: float):
    return x if math.isfinite(x) else None
