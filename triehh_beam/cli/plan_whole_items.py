"""``triehh plan --protocol sample-threshold``: tau and p_s of one whole-item release, and how
many holders an item needs to be released.

Asks ``protocol.whole_items.plan_whole_items`` (the sample-and-threshold planner with one release,
L = 1; exact accounting unless ``--accounting bound``, the other's plan beside it) for p_s and
tau at the target (epsilon, delta) and gives the holders an item needs to be
released with 50/90/99% probability (``P(Binomial(holders, p_s share) >= tau)``), as aligned text
or one JSON-ready dict. An infeasible target (under the bound: epsilon > 1) is still a plan, shown
with the reason (exit code 0, as TrieHH's infeasible plans). SciPy is imported only when a plan is made.
"""

from __future__ import annotations

import textwrap
from typing import List

from triehh_beam.cli import plan_accounting
from triehh_beam.protocol.privacy import exact

__all__ = ["format_plan", "plan_report"]

_WIDTH = 96
_PROBABILITIES = (0.5, 0.9, 0.99)


def plan_report(population: int, epsilon: float, delta: float, max_length: int, unit_size: int,
                share: float, accounting: str = "exact") -> dict:
    """The whole-item plan and its release table, as one JSON-ready dict; the plan under the
    other accounting beside it."""
    from triehh_beam.protocol import sample_threshold as st
    from triehh_beam.protocol.whole_items import plan_whole_items

    def plan(how: str):
        return plan_whole_items(epsilon, delta, share=share, accounting=how)

    result = plan(accounting)
    report = result.to_dict()
    report.update(plan_accounting.accounting_report(result, plan, 1))
    report.update(protocol="sample-threshold", releases=1, population=population, unit_size=unit_size,
                  max_length=max_length, max_item_characters=(max_length - 1) * unit_size,
                  item_share=share, items_per_user=1 / share)
    rows = []
    if result.feasible:
        for p in _PROBABILITIES:
            count = st.min_holders(p, result.sampling_probability, result.tau, 1, share)
            rows.append({"probability": p, "count": count,
                         "fraction": None if count is None else count / population})
    report["release"] = rows
    return report


def _row(label: str, value: str) -> str:
    return f"  {label:<26}{value}"


def _wrap(text: str, indent: str = "  ") -> List[str]:
    return textwrap.wrap(text, width=_WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False)


def format_plan(r: dict) -> str:
    """The human report of ``plan_report``."""
    k = r["unit_size"]
    unit_word = "1 character" if k == 1 else f"{k} characters"
    lines = [
        "Sample-and-threshold plan, whole items, one release (Bharadwaj & Cormode; docs/protocol.md §2)",
        "",
        _row("population n", f"{r['population']:,} users (the guarantee does not depend on it)"),
        _row("max length L", f"{r['max_length']} units of {unit_word}, terminator included"),
        _row("", f"(items up to {r['max_item_characters']} characters; longer ones are dropped)"),
        _row("target epsilon", exact(r["target_epsilon"]) + (" (the bound needs epsilon <= 1)"
                                                             if r["accounting"] == "bound" else "")),
        _row("target delta", f"{r['target_delta']:.4g}"),
        _row("result", "FEASIBLE" if r["feasible"] else "INFEASIBLE"),
        "",
    ]
    if not r["feasible"]:
        # The other accounting's plan beside the refusal: the same target may be a plan under it.
        lines[-1:-1] = plan_accounting.accounting_lines(r, "release")
        return "\n".join(lines + ["Why:"] + _wrap(r["reason"]))
    p_s = r["sampling_probability"]
    lines += [
        _row("threshold tau", f"{r['tau']} reports"),
        _row("sample p_s", f"{100 * p_s:.6g}% of users, each independently, once "
                           f"(about {round(p_s * r['population']):,} of n)"),
        *([_row("alpha", f"{r['alpha']:.6g} (p_s = alpha (1 - e^-epsilon); C_alpha = ln(1/alpha) - "
                         f"1/(1+alpha) = {r['c_alpha']:.4g})")] if r["accounting"] == "bound" else []),
        _row("achieved epsilon", f"{r['epsilon']:.6g} (target {r['target_epsilon']:.6g})"),
        _row("achieved delta", f"{r['delta']:.6g}" + (" = exp(-C_alpha tau)" if r["accounting"] == "bound" else "")
             + f" (target {r['target_delta']:.4g})"),
        _row("chosen to minimise", f"the holders an item needs for {100 * r['objective']:g}% release"),
        *plan_accounting.accounting_lines(r, "release"),
        "",
        "Release of an item (its count and count / p_s are published with it):",
        f"  {'probability':<14}{'users holding it':>18}{'share of n':>14}",
    ]
    for row in r["release"]:
        label = f"{100 * row['probability']:.3g}%"
        if row["count"] is None:
            lines.append(f"  {label:<14}{'unreachable':>18}")
            continue
        lines.append(f"  {label:<14}{row['count']:>18,}{100 * row['fraction']:>13.4g}%")
    share = r["item_share"]
    lines += _wrap(
        "A holder is in the sample with probability p_s and then reports the item"
        + (f" with probability {share:.3g} (its share)" if share < 1 else "")
        + ", independently: reports ~ Binomial(holders, p_s" + (" x share" if share < 1 else "")
        + "), released when >= tau: exact (no trie, so no prefix shared with other items).")
    lines += _wrap("triehh discover --protocol sample-threshold runs it on the Beam pipeline; "
                   "triehh evaluate --engine simulate --protocol sample-threshold measures it.")
    return "\n".join(lines)
