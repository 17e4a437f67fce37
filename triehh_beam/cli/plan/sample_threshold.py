"""``triehh plan --protocol triehh++``: tau and p_s for the target over L rounds
(``protocol.planning.sample_threshold_planner``; exact accounting unless ``--accounting bound``, the other
beside it) and the holders an item needs for 50/90/99% discovery, as text or a JSON-ready dict;
``comparison_line`` is the line TrieHH's plan shows about it. SciPy only when a plan is made."""

from __future__ import annotations

from typing import List, Optional

from triehh_beam.cli.plan import accounting as plan_accounting
from triehh_beam.cli.plan.text import header, holders_rows, holders_table, row, wrap
from triehh_beam.protocol.accounting.privacy import exact

__all__ = ["comparison_line", "format_plan", "plan_report"]


def plan_report(population: int, epsilon: float, delta: float, max_length: int, unit_size: int,
                item_length: Optional[int], share: float, accounting: str = "exact") -> dict:
    """The TrieHH++ plan and its discovery table, as one JSON-ready dict; the plan under the
    other accounting beside it."""
    from triehh_beam.protocol.accounting import sample_threshold as st
    from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold

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
    report["discovery"] = holders_rows(population, lambda p: st.min_holders(
        p, result.sampling_probability, result.tau, length, share)) if result.feasible else []
    return report


def comparison_line(population: int, epsilon: float, delta: float, max_length: int,
                    item_length: Optional[int], share: float, triehh_count: Optional[int]) -> str:
    """One line for the TrieHH plan: what TrieHH++ needs for 90% at the same target."""
    from triehh_beam.protocol.accounting import sample_threshold as st
    from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold

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


def _alpha_rows(r: dict) -> List[str]:
    if r["accounting"] != "bound":
        return []
    return [row("alpha", f"{r['alpha']:.6g} (p_s = alpha (1 - e^-eps_r); C_alpha = ln(1/alpha) - "
                          f"1/(1+alpha) = {r['c_alpha']:.4g}, round delta exp(-C_alpha tau))")]


def format_plan(r: dict) -> str:
    """The human report of ``plan_report``."""
    L = r["max_length"]
    lines = header("TrieHH++ plan (sample-and-threshold, Bharadwaj & Cormode; docs/protocol.md §2)", r,
                   f"{r['population']:,} users (the guarantee does not depend on it)", f"at most {L} rounds",
                   exact(r["target_epsilon"]))
    if not r["feasible"]:
        # The other accounting's plan beside the refusal: the same target may be a plan under it.
        lines[-1:-1] = plan_accounting.accounting_lines(r, "discovery")
        return "\n".join(lines + ["Why:"] + wrap(r["reason"]))
    p_s = r["sampling_probability"]
    lines += [
        row("per round", f"eps_r = epsilon/L = {r['epsilon_round']:.6g}, "
                         f"delta_r <= delta/L = {r['delta_round_target']:.4g}"),
        row("threshold tau", f"{r['tau']} votes"),
        row("sample p_s", f"{100 * p_s:.6g}% of users per round, each independently "
                          f"(about {round(p_s * r['population']):,} of n)"),
        *_alpha_rows(r),
        row("per-round (eps, delta)", f"({r['epsilon_round']:.6g}, {r['round_delta']:.6g})"),
        row("achieved epsilon", f"{r['epsilon']:.6g} ({L} rounds composed; "
                                f"target {r['target_epsilon']:.6g})"),
        row("achieved delta", f"{r['delta']:.6g} (target {r['target_delta']:.4g})"),
        row("chosen to minimise", f"the holders an item of {r['length']} units needs for "
                                  f"{100 * r['objective']:g}% discovery"),
        *plan_accounting.accounting_lines(r, "discovery"),
        "",
        f"Worst-case discovery of an item of {r['item_length']} units"
        + (" = L, the worst case:" if r["item_length_is_worst_case"] else ":"),
    ]
    lines += holders_table(r["discovery"])
    share = r["item_share"]
    lines += wrap(
        "Each round a holder is in the sample with probability p_s and then votes for the item"
        + (f" with probability {share:.3g} (its share)" if share < 1 else "")
        + ", independently: votes ~ Binomial(holders, p_s"
        + (" x share" if share < 1 else "") + "), found when >= tau in every round. Assumes the "
        "item shares no prefix with any other item; real data does better.")
    lines += wrap("triehh discover --protocol triehh++ runs it on the Beam pipeline; "
                   "triehh evaluate --engine simulate --protocol triehh++ measures it.")
    return "\n".join(lines)
