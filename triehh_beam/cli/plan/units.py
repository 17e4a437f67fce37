"""``triehh plan --compare-units`` (or ``--unit-size auto``): every unit size (1-4 and the whole
item) under TrieHH and TrieHH++ at the target (``protocol.planning.unit_advice``), for items of up to
``(L - 1) * K`` characters, and the recommendation for ``--find-frequency``, as a table or a
JSON-ready dict. SciPy only when the table is made."""

from __future__ import annotations

from typing import List, Optional, Sequence

from triehh_beam.cli.plan.text import wrap
from triehh_beam.protocol.protocols import Protocol

__all__ = ["format_units", "units_report"]


def units_report(population: int, epsilon: float, delta: float, max_characters: int,
                 protocols: Sequence[str], rule: str, share: float,
                 find_frequency: Optional[float]) -> dict:
    """The comparison and its recommendations, as one JSON-ready dict."""
    from triehh_beam.protocol.planning.unit_advice import compare_units

    advice = compare_units(epsilon, delta, max_characters, population, protocols=protocols,
                           rule=rule, share=share, find_frequency=find_frequency)
    return {"compare_units": True, **advice.to_dict()}


def _name(protocol: str) -> str:
    return "TrieHH" if Protocol.parse(protocol) is Protocol.TRIEHH else "TrieHH++"


def _percent(fraction: float) -> str:
    from triehh_beam.protocol.planning.unit_advice import percent

    return percent(fraction)


def _label(row: dict) -> str:
    return "whole item" if row["whole_item"] else f"unit {row['unit_size']}"


def _counts(row: dict) -> str:
    return " / ".join("-" if h["count"] is None else f"{h['count']:,}" for h in row["holders"])


def _ninety(row: dict) -> dict:
    return next(h for h in row["holders"] if h["probability"] == 0.9)


def format_units(r: dict) -> str:
    """The human report of ``units_report``."""
    n = r["population"]
    c = r["max_characters"]
    lines = [
        f"Unit sizes compared: items up to {c} characters, epsilon = {r['epsilon']:.6g}, "
        f"delta = {r['delta']:.4g}, n = {n:,}",
        "",
        f"  {'protocol':<10}{'unit':<11}{'L':>3}  {'reveals':<9}{'sample/round':<18}"
        f"{'threshold':<10}{'holders 50/90/99%':>21}{'90% of n':>10}",
    ]
    reasons: List[str] = []
    for row in r["options"]:
        reveals = f"{row['reveals']} char" + ("s" if row["reveals"] > 1 else "")
        head = (f"  {_name(row['protocol']):<10}{_label(row):<11}{row['max_length']:>3}  "
                f"{reveals:<9}")
        if not row["feasible"]:
            reasons.append(f"{_name(row['protocol'])}, {_label(row)} (L = {row['max_length']}): "
                           f"{row['reason']}")
            lines.append(f"{head}INFEASIBLE (reason {len(reasons)} below)")
            continue
        if Protocol.parse(row["protocol"]) is Protocol.TRIEHH:
            sample = f"m {row['batch_size']:,} ({_percent(row['sampling_rate'])})"
            threshold = f"theta {row['threshold']}"
        else:
            sample = f"p_s {_percent(row['sampling_rate'])}"
            threshold = f"tau {row['threshold']}"
        ninety = _ninety(row)
        share = "-" if ninety["fraction"] is None else _percent(ninety["fraction"])
        lines.append(f"{head}{sample:<18}{threshold:<10}{_counts(row):>21}{share:>10}")
    lines += [""]
    lines += wrap(
        "Holders: the fewest users holding an item of " + f"{c} characters" + " that find it with "
        "probability 50 / 90 / 99% in the worst case (no prefix shared with another item): "
        "Proposition 1 for TrieHH, its sample-and-threshold analogue for TrieHH++ "
        "(docs/protocol.md). Every row spends the same target (epsilon, delta); a sampled user "
        "reveals one unit of its item per round, so a larger unit reveals more characters per "
        "round, and the whole item reveals all of it in round 1.", "")
    if r["item_share"] < 1:
        lines += wrap(f"Holders give the item at least {r['item_share']:.3g} of their records "
                       "(--items-per-user).", "")
    for i, reason in enumerate(reasons, 1):
        lines += wrap(f"{i}. {reason}", "  ", "     ")
    lines += [""]
    f = r["find_frequency"]
    if f is None:
        lines += wrap("Fewest holders for 90% (--find-frequency F recommends a unit size for "
                       "items held by a share F of users):", "")
    else:
        target = r["recommendations"][0]["target_count"]
        lines += wrap(f"Recommendation for items held by {_percent(f)} of users "
                       f"(ceil(F n) = {target:,} holders), found with 90% probability:", "")
    by_unit = {(o["protocol"], o["unit_size"]): o for o in r["options"]}
    for rec in r["recommendations"]:
        name = f"{_name(rec['protocol'])}:"
        if rec["unit_size"] is None:
            closest = rec["closest_unit_size"]
            if closest is None:
                text = "no unit size is feasible at this target"
            else:
                row = by_unit[(rec["protocol"], closest)]
                text = (f"no unit size finds it; the closest is {_label(row)} (--unit-size "
                        f"{row['unit_size']} --max-length {row['max_length']}), "
                        f"{_ninety(row)['count']:,} holders")
        else:
            row = by_unit[(rec["protocol"], rec["unit_size"])]
            ninety = _ninety(row)
            whole = " (whole item)" if row["whole_item"] else ""
            text = (f"--unit-size {row['unit_size']} --max-length {row['max_length']}{whole}: "
                    f"{ninety['count']:,} holders ({_percent(ninety['fraction'])} of n)")
        lines += wrap(f"{name:<10}{text}", "  ", " " * 12)
    if f is not None:
        lines += wrap(
            "The rule: the smallest unit size whose 90% holders are at most ceil(F n). Every unit "
            "size that qualifies finds such items; among them a smaller unit reveals fewer "
            "characters of a user's item per round.", "")
    return "\n".join(lines)
