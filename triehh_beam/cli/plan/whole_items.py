"""``triehh plan --protocol sample-threshold``: tau and p_s of one whole-item release
(``protocol.central.whole_items``; exact accounting unless ``--accounting bound``, the other beside it)
and the holders an item needs to be released with 50/90/99% probability, as text or a JSON-ready
dict; an infeasible target is still a plan. SciPy only when a plan is made."""

from __future__ import annotations

from triehh_beam.cli.plan import accounting as plan_accounting
from triehh_beam.cli.plan.text import header, holders_rows, holders_table, row, wrap
from triehh_beam.protocol.accounting.privacy import exact
from triehh_beam.protocol.protocols import Protocol

__all__ = ["format_plan", "plan_report"]


def plan_report(population: int, epsilon: float, delta: float, max_length: int, unit_size: int,
                share: float, accounting: str = "exact") -> dict:
    """The whole-item plan and its release table, as one JSON-ready dict; the plan under the
    other accounting beside it."""
    from triehh_beam.protocol.accounting import sample_threshold as st
    from triehh_beam.protocol.central.whole_items import plan_whole_items

    def plan(how: str):
        return plan_whole_items(epsilon, delta, share=share, accounting=how)

    result = plan(accounting)
    report = result.to_dict()
    report.update(plan_accounting.accounting_report(result, plan, 1))
    report.update(protocol=Protocol.WHOLE_ITEMS.value, releases=1, population=population, unit_size=unit_size,
                  max_length=max_length, max_item_characters=(max_length - 1) * unit_size,
                  item_share=share, items_per_user=1 / share)
    report["release"] = holders_rows(population, lambda p: st.min_holders(
        p, result.sampling_probability, result.tau, 1, share)) if result.feasible else []
    return report


def format_plan(r: dict) -> str:
    """The human report of ``plan_report``."""
    bound = r["accounting"] == "bound"
    lines = header("Sample-and-threshold plan, whole items, one release (Bharadwaj & Cormode; docs/protocol.md §2)",
                   r, f"{r['population']:,} users (the guarantee does not depend on it)", "longer ones are dropped",
                   exact(r["target_epsilon"]) + (" (the bound needs epsilon <= 1)" if bound else ""))
    if not r["feasible"]:
        # The other accounting's plan beside the refusal: the same target may be a plan under it.
        lines[-1:-1] = plan_accounting.accounting_lines(r, "release")
        return "\n".join(lines + ["Why:"] + wrap(r["reason"]))
    p_s = r["sampling_probability"]
    lines += [
        row("threshold tau", f"{r['tau']} reports"),
        row("sample p_s", f"{100 * p_s:.6g}% of users, each independently, once "
                          f"(about {round(p_s * r['population']):,} of n)"),
        *([row("alpha", f"{r['alpha']:.6g} (p_s = alpha (1 - e^-epsilon); C_alpha = ln(1/alpha) - "
                        f"1/(1+alpha) = {r['c_alpha']:.4g})")] if r["accounting"] == "bound" else []),
        row("achieved epsilon", f"{r['epsilon']:.6g} (target {r['target_epsilon']:.6g})"),
        row("achieved delta", f"{r['delta']:.6g}" + (" = exp(-C_alpha tau)" if r["accounting"] == "bound" else "")
            + f" (target {r['target_delta']:.4g})"),
        row("chosen to minimise", f"the holders an item needs for {100 * r['objective']:g}% release"),
        *plan_accounting.accounting_lines(r, "release"),
        "",
        "Release of an item (its count and count / p_s are published with it):",
    ]
    lines += holders_table(r["release"])
    share = r["item_share"]
    lines += wrap(
        "A holder is in the sample with probability p_s and then reports the item"
        + (f" with probability {share:.3g} (its share)" if share < 1 else "")
        + ", independently: reports ~ Binomial(holders, p_s" + (" x share" if share < 1 else "")
        + "), released when >= tau: exact (no trie, so no prefix shared with other items).")
    lines += wrap("triehh discover --protocol sample-threshold runs it on the Beam pipeline; "
                   "triehh evaluate --engine simulate --protocol sample-threshold measures it.")
    return "\n".join(lines)
