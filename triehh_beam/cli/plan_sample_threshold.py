"""``triehh plan --protocol triehh++``: TrieHH++'s tau and p_s for a target, and what they find.

Asks the sample-and-threshold planner (``protocol.sample_threshold_planner``, exact accounting
unless ``--accounting bound``; the other's plan beside it) for p_s and tau at the target
(epsilon, delta) over L rounds and the worst-case holders an item needs for
50/90/99% discovery (``protocol.sample_threshold.min_holders``), and renders them as aligned
text or one JSON-ready dict; ``comparison_line`` is the one line the default TrieHH plan shows
about it. An infeasible target is still a plan, shown with the reason.
SciPy is imported only when a plan is made, never by the parser.
"""

from __future__ import annotations

import textwrap
from typing import List, Optional

from triehh_beam.cli import plan_accounting
from triehh_beam.protocol.privacy import exact

__all__ = ["comparison_line", "format_plan", "plan_report"]

_WIDTH = 96
_PROBABILITIES = (0.5, 0.9, 0.99)


def plan_report(population: int, epsilon: float, delta: float, max_length: int, unit_size: int,
                item_length: Optional[int], share: float, accounting: str = "exact") -> dict:
    """The TrieHH++ plan and its discovery table, as one JSON-ready dict; the plan under the
    other accounting beside it."""
    from triehh_beam.protocol import sample_threshold as st
    from triehh_beam.protocol.sample_threshold_planner import plan_sample_threshold

    length = max_length if item_length is None else item_length

    def plan(how: str):
        return plan_sample_threshold(epsilon, delta, max_length, length=length, share=share, accounting=how)

    result = plan(accounting)
    report = result.to_dict()
    report.update(plan_accounting.accounting_report(result, plan, max_length))
    report.update(population=population, unit_size=unit_size,
                  max_item_characters=(max_length - 1) * unit_size, item_length=length,
                  item_length_is_worst_case=length == max_length, item_share=share,
                  items_per_user=1 / share)
    rows = []
    if result.feasible:
        for p in _PROBABILITIES:
            count = st.min_holders(p, result.sampling_probability, result.tau, length, share)
            rows.append({"probability": p, "count": count,
                         "fraction": None if count is None else count / population})
    report["discovery"] = rows
    return report


def comparison_line(population: int, epsilon: float, delta: float, max_length: int,
                    item_length: Optional[int], share: float, triehh_count: Optional[int]) -> str:
    """One line for the TrieHH plan: what TrieHH++ needs for 90% at the same target."""
    from triehh_beam.protocol import sample_threshold as st
    from triehh_beam.protocol.sample_threshold_planner import plan_sample_threshold

    length = max_length if item_length is None else item_length
    result = plan_sample_threshold(epsilon, delta, max_length, length=length, share=share)
    if not result.feasible:
        return (f"TrieHH++ (sample-and-threshold) cannot certify this target "
                f"(triehh plan --protocol triehh++ says why)")
    count = st.min_holders(0.9, result.sampling_probability, result.tau, length, share)
    versus = "" if triehh_count is None else f" (TrieHH: {triehh_count:,})"
    return (f"TrieHH++ (sample-and-threshold) at the same target needs {count:,} holders for 90%"
            f"{versus}, with tau = {result.tau} and p_s = {100 * result.sampling_probability:.3g}% "
            f"per round: triehh plan --protocol triehh++ shows its plan (triehh evaluate --engine "
            f"simulate measures it; triehh discover --protocol triehh++ runs it)")


def _row(label: str, value: str) -> str:
    return f"  {label:<26}{value}"


def _wrap(text: str, indent: str = "  ") -> List[str]:
    return textwrap.wrap(text, width=_WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False)


def _alpha_rows(r: dict) -> List[str]:
    if r["accounting"] != "bound":
        return []
    return [_row("alpha", f"{r['alpha']:.6g} (p_s = alpha (1 - e^-eps_r); C_alpha = ln(1/alpha) - "
                          f"1/(1+alpha) = {r['c_alpha']:.4g}, round delta exp(-C_alpha tau))")]


def format_plan(r: dict) -> str:
    """The human report of ``plan_report``."""
    k = r["unit_size"]
    unit_word = "1 character" if k == 1 else f"{k} characters"
    L = r["max_length"]
    lines = [
        "TrieHH++ plan (sample-and-threshold, Bharadwaj & Cormode; docs/protocol.md §2)",
        "",
        _row("population n", f"{r['population']:,} users (the guarantee does not depend on it)"),
        _row("max length L", f"{L} units of {unit_word}, terminator included"),
        _row("", f"(items up to {r['max_item_characters']} characters; at most {L} rounds)"),
        _row("target epsilon", exact(r["target_epsilon"])),
        _row("target delta", f"{r['target_delta']:.4g}"),
        _row("result", "FEASIBLE" if r["feasible"] else "INFEASIBLE"),
        "",
    ]
    if not r["feasible"]:
        # The other accounting's plan beside the refusal: the same target may be a plan under it.
        lines[-1:-1] = plan_accounting.accounting_lines(r, "discovery")
        return "\n".join(lines + ["Why:"] + _wrap(r["reason"]))
    p_s = r["sampling_probability"]
    lines += [
        _row("per round", f"eps_r = epsilon/L = {r['epsilon_round']:.6g}, "
                          f"delta_r <= delta/L = {r['delta_round_target']:.4g}"),
        _row("threshold tau", f"{r['tau']} votes"),
        _row("sample p_s", f"{100 * p_s:.6g}% of users per round, each independently "
                           f"(about {round(p_s * r['population']):,} of n)"),
        *_alpha_rows(r),
        _row("per-round (eps, delta)", f"({r['epsilon_round']:.6g}, {r['round_delta']:.6g})"),
        _row("achieved epsilon", f"{r['epsilon']:.6g} ({L} rounds composed; "
                                 f"target {r['target_epsilon']:.6g})"),
        _row("achieved delta", f"{r['delta']:.6g} (target {r['target_delta']:.4g})"),
        _row("chosen to minimise", f"the holders an item of {r['length']} units needs for "
                                   f"{100 * r['objective']:g}% discovery"),
        *plan_accounting.accounting_lines(r, "discovery"),
        "",
        f"Worst-case discovery of an item of {r['item_length']} units"
        + (" = L, the worst case:" if r["item_length_is_worst_case"] else ":"),
        f"  {'probability':<14}{'users holding it':>18}{'share of n':>14}",
    ]
    for row in r["discovery"]:
        label = f"{100 * row['probability']:.3g}%"
        if row["count"] is None:
            lines.append(f"  {label:<14}{'unreachable':>18}")
            continue
        share_of_n = f"{100 * row['fraction']:.4g}%"
        lines.append(f"  {label:<14}{row['count']:>18,}{share_of_n:>14}")
    share = r["item_share"]
    lines += _wrap(
        "Each round a holder is in the sample with probability p_s and then votes for the item"
        + (f" with probability {share:.3g} (its share)" if share < 1 else "")
        + ", independently: votes ~ Binomial(holders, p_s"
        + (" x share" if share < 1 else "") + "), found when >= tau in every round. Assumes the "
        "item shares no prefix with any other item; real data does better.")
    lines += _wrap("triehh discover --protocol triehh++ runs it on the Beam pipeline; "
                   "triehh evaluate --engine simulate --protocol triehh++ measures it.")
    return "\n".join(lines)
