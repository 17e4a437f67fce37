"""``triehh plan --protocol partition-selection``: the split of one optimal partition-selection
release (``protocol.central.partition_selection``), the holders an item needs to be released with
50/90/99% probability, the noise on its count, and beside it what every protocol needs for the
same target and which trust model each fits, as text or a JSON-ready dict. SciPy only when a
plan is made."""

from __future__ import annotations

from typing import Optional

from triehh_beam.cli.plan.text import PROBABILITIES, header, holders_table, row, wrap
from triehh_beam.protocol.protocols import Protocol

__all__ = ["NOISY_ALPHABET", "NOISY_FRONTIER", "TRUST_MODELS", "compare_protocols", "format_plan", "plan_report",
           "protocols_lines", "release_lines"]

#: The noisy prefix rounds (docs/protocol.md §8).
NOISY_ROUNDS = Protocol.NOISY_ROUNDS
#: The alphabet and frontier the noisy rounds' row assumes: a-z, 100 prefixes per round.
NOISY_ALPHABET, NOISY_FRONTIER = "abcdefghijklmnopqrstuvwxyz", 100

#: Which ways in each protocol fits (docs/privacy.md, "The protocols side by side").
TRUST_MODELS = {
    NOISY_ROUNDS: "central only (discover)",
    Protocol.PARTITION_SELECTION: "central only (discover)",
    Protocol.WHOLE_ITEMS: "central (discover)",
    Protocol.TRIEHH_PP: "central or federated",
    Protocol.TRIEHH: "central or federated",
}


def compare_protocols(population: int, epsilon: float, delta: float, max_length: int, unit_size: int = 1) -> list:
    """Holders an item of L - 1 units needs for a 50% and a 90% release under each protocol at
    ``(epsilon, delta)`` (one item per user; the trie protocols' worst case: no shared prefix;
    the noisy rounds' candidates: units of ``unit_size`` letters a-z, 100 frontier prefixes
    after the first round), with the trust model each fits; None where a plan is infeasible."""
    from triehh_beam.protocol.accounting import sample_threshold as st
    from triehh_beam.protocol.central.partition_selection import plan_partition_selection
    from triehh_beam.protocol.central.whole_items import plan_whole_items
    from triehh_beam.protocol.planning import planner, utility
    from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold

    rows = []
    for share, label in ((1.0, "items only"), (0.5, "with counts, even split")):
        plan = plan_partition_selection(epsilon, delta, 1, share)
        rows.append((Protocol.PARTITION_SELECTION, label, plan.holders_for(0.5), plan.holders_for(0.9)))
    whole = plan_whole_items(epsilon, delta)
    rows.append((Protocol.WHOLE_ITEMS, "with counts", *(
        st.min_holders(p, whole.sampling_probability, whole.tau, 1) if whole.feasible else None for p in (0.5, 0.9))))
    rounds = plan_sample_threshold(epsilon, delta, max_length)
    rows.append(_noisy_rounds_row(epsilon, delta, max_length, unit_size))
    rows.append((Protocol.TRIEHH_PP, f"{max_length} rounds", *(
        st.min_holders(p, rounds.sampling_probability, rounds.tau, max_length) if rounds.feasible else None
        for p in (0.5, 0.9))))
    triehh = planner.plan(population, epsilon, delta, max_length)

    def triehh_holders(p: float) -> Optional[int]:
        need = utility.min_frequency_for_plan(triehh, p, max_length, 1.0) if triehh.feasible else None
        return None if need is None else need.count

    rows.append((Protocol.TRIEHH, f"{max_length} rounds, n = {population:,}", triehh_holders(0.5),
                 triehh_holders(0.9)))
    return [{"protocol": str(p), "variant": variant, "holders_50": h50, "holders_90": h90,
             "trust_model": TRUST_MODELS[p]} for p, variant, h50, h90 in rows]


def _noisy_rounds_row(epsilon: float, delta: float, max_length: int, unit_size: int) -> tuple:
    from triehh_beam.protocol.central.noisy_release import candidate_units
    from triehh_beam.protocol.central.noisy_rounds import plan_noisy_rounds

    plan = plan_noisy_rounds(epsilon, delta, max_length)
    units = len(candidate_units(NOISY_ALPHABET, unit_size))
    candidates = [units - 1] + [NOISY_FRONTIER * units] * (max_length - 1)
    return (NOISY_ROUNDS, f"{max_length} rounds, a-z, frontier {NOISY_FRONTIER}",
            *(plan.holders_for(p, candidates) for p in (0.5, 0.9)))


def plan_report(population: int, epsilon: float, delta: float, max_length: int, unit_size: int,
                max_items: int, selection_share: float) -> dict:
    """The partition-selection plan, its release table and the protocols beside it."""
    from triehh_beam.protocol.central.partition_selection import plan_partition_selection
    from triehh_beam.protocol.estimates.count_intervals import LEVEL
    from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric

    plan = plan_partition_selection(epsilon, delta, max_items, selection_share)
    release = []
    for p in PROBABILITIES:
        count = plan.holders_for(p)
        release.append({"probability": p, "count": count, "fraction": count / population,
                        "user_equivalents": count, "achieved_probability": plan.keep_probability(count)})
    noise = plan.count_noise_epsilon
    return {
        "protocol": Protocol.PARTITION_SELECTION.value, "feasible": True, "population": population,
        "target_epsilon": epsilon, "target_delta": delta, "max_length": max_length, "unit_size": unit_size,
        "max_item_characters": (max_length - 1) * unit_size, "max_items_per_user": max_items,
        "selection_share": selection_share, "selection_epsilon": plan.selection_epsilon,
        "count_epsilon": plan.count_epsilon, "item_epsilon": plan.item_epsilon, "item_delta": plan.item_delta,
        "count_half_width": TwoSidedGeometric(noise).half_width(LEVEL) if noise else None,
        "release": release, "trust_model": TRUST_MODELS[Protocol.PARTITION_SELECTION],
        "protocols": compare_protocols(population, epsilon, delta, max_length, unit_size),
    }


def release_lines(r: dict, how_to_run: str) -> list:
    """A plan report's release table, every protocol beside it and the note under them, ending
    with ``how_to_run`` (after "triehh discover --protocol ")."""
    return holders_table(r["release"]) + protocols_lines(r["protocols"]) + wrap(
        "The trie protocols' figures are their worst case (no prefix shared with another item; real data "
        f"does better) and TrieHH's depend on n. triehh discover --protocol {how_to_run}")


def protocols_lines(protocols: list) -> list:
    """``compare_protocols``' rows as aligned lines under a heading."""
    lines = ["", "Every protocol at this target (holders of an item of L - 1 units, one item per user):"]
    width = max(len(f"{c['protocol']} ({c['variant']})") for c in protocols)
    lines.append(f"  {'protocol':<{width}}  {'50%':>7}  {'90%':>7}  trust model")
    for c in protocols:
        shown = [f"{c[h]:>7,}" if c[h] is not None else f"{'-':>7}" for h in ("holders_50", "holders_90")]
        lines.append(f"  {c['protocol'] + ' (' + c['variant'] + ')':<{width}}  {shown[0]}  {shown[1]}  "
                     f"{c['trust_model']}")
    return lines


def format_plan(r: dict) -> str:
    """The human report of ``plan_report``."""
    lines = header("Optimal partition selection, whole items, one release (Desfontaines et al.; "
                   "docs/protocol.md §7)", r, f"{r['population']:,} users (the guarantee does not depend on it)",
                   "longer ones are dropped", f"{r['target_epsilon']:.6g}")
    k = r["max_items_per_user"]
    lines += [
        row("items per user", f"up to {k} distinct, drawn by local frequency"),
        row("selection", f"epsilon {r['selection_epsilon']:.6g}, delta {r['target_delta']:.4g}; each item "
                         f"({r['item_epsilon']:.6g}, {r['item_delta']:.4g})"),
        row("counts", "none published" if not r["count_epsilon"] else
            f"epsilon {r['count_epsilon']:.6g}: two-sided geometric noise, 95% within +-{r['count_half_width']}"),
        row("trust model", r["trust_model"] + ": the server reads every user's items, so triehh "
                           "federated refuses it"),
        "",
        "Release of an item (contributing users; kept with the optimal probability pi(n)):",
    ]
    return "\n".join(lines + release_lines(r, "partition-selection runs it."))
