"""What ``triehh plan`` says about a sample-and-threshold plan's accounting (TrieHH++ and whole
items): how its delta was certified, how to recompute it, and the plan under the other
accounting beside it."""

from __future__ import annotations

from typing import Callable, List

from triehh_beam.cli.plan.text import wrap

__all__ = ["accounting_lines", "accounting_report", "other_accounting"]

_RECOMPUTE = ("python -c \"from triehh_beam.protocol.accounting.exact_accountant import release_delta; "
              "print(release_delta({eps_r!r}, {p!r}, {tau}).delta)\"")


def other_accounting(accounting: str) -> str:
    return "bound" if accounting == "exact" else "exact"


def accounting_report(result, plan: Callable[[str], object], rounds: int) -> dict:
    """The JSON fields about ``result``'s accounting: how to recompute its per-round delta (exact)
    and, under ``other_accounting``, the plan ``plan(accounting)`` makes, in brief."""
    out = {"accounting": result.accounting}
    if result.feasible and result.accounting == "exact":
        out["recompute_round_delta"] = _RECOMPUTE.format(eps_r=result.epsilon_round, p=result.sampling_probability,
                                                        tau=result.tau)
        out["rounds"] = rounds
    other = plan(other_accounting(result.accounting))
    out["other_accounting"] = {
        "accounting": other.accounting,
        "feasible": other.feasible,
        "tau": other.tau,
        "sampling_probability": other.sampling_probability,
        "epsilon": other.epsilon,
        "delta": other.delta,
        "holders": other.holders,
        "reason": other.reason,
    }
    return out


def accounting_lines(r: dict, what: str) -> List[str]:
    """Rows for the human plan: the accounting and the other one's plan beside it. ``what``
    names the objective ("release" or "discovery")."""
    if r["accounting"] == "exact":
        how = ("exact: one count's hockey-stick divergence, worst case over the other holders "
               "(docs/protocol.md §2, Exact accounting)")
        if r.get("composition") == "pld":
            how += f"; rounds by dp-accounting's PLD ({r['pld_delta']:.6g}; basic {r['basic_delta']:.6g})"
        elif r.get("pld_delta") is not None and r.get("rounds", 1) > 1:
            how += f"; rounds by basic composition (PLD: {r['pld_delta']:.6g})"
    else:
        how = "bound: the paper's delta = exp(-C_alpha tau), eps_r <= 1 (docs/protocol.md §2)"
    lines = _wrapped("accounting", how)
    other = r["other_accounting"]
    if other["feasible"]:
        lines += _wrapped(f"under {other['accounting']}", (
            f"tau = {other['tau']}, p_s = {100 * other['sampling_probability']:.4g}%, delta = {other['delta']:.4g}: "
            f"{other['holders']:,} holders for {100 * r['objective']:g}% {what}"))
    else:
        lines += _wrapped(f"under {other['accounting']}", f"infeasible: {other['reason']}")
    return lines


def _wrapped(label: str, text: str) -> List[str]:
    return wrap(text, f"  {label:<26}", " " * 28)
