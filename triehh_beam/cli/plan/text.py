"""The layout every ``triehh plan`` report shares: a labelled row, wrapped paragraphs, the header
a plan starts with (population, L, the target, feasible or not) and the table of how many holders
an item needs for 50/90/99% discovery (or release)."""

from __future__ import annotations

import textwrap
from typing import Callable, List, Optional

__all__ = ["PROBABILITIES", "WIDTH", "header", "holders_rows", "holders_table", "row", "wrap"]

WIDTH = 96
PROBABILITIES = (0.5, 0.9, 0.99)


def row(label: str, value: str) -> str:
    """``  label                     value``: the label in 26 columns."""
    return f"  {label:<26}{value}"


def wrap(text: str, indent: str = "  ", subsequent: Optional[str] = None, break_on_hyphens: bool = False) -> List[str]:
    """``text`` wrapped to ``WIDTH`` columns, each line indented (the first by ``indent``)."""
    return textwrap.wrap(text, width=WIDTH, initial_indent=indent,
                         subsequent_indent=indent if subsequent is None else subsequent,
                         break_on_hyphens=break_on_hyphens)


def header(title: str, r: dict, population: str, items: str, target_epsilon: str) -> List[str]:
    """A plan's first lines: its title, then n, L and its unit, the items it admits, the target
    and FEASIBLE or INFEASIBLE, then a blank line."""
    k = r["unit_size"]
    return [
        title,
        "",
        row("population n", population),
        row("max length L", f"{r['max_length']} units of {'1 character' if k == 1 else f'{k} characters'}, "
                            "terminator included"),
        row("", f"(items up to {r['max_item_characters']} characters; {items})"),
        row("target epsilon", target_epsilon),
        row("target delta", f"{r['target_delta']:.4g}"),
        row("result", "FEASIBLE" if r["feasible"] else "INFEASIBLE"),
        "",
    ]


def holders_rows(population: int, min_holders: Callable[[float], Optional[int]]) -> List[dict]:
    """For each of ``PROBABILITIES``, the holders ``min_holders(p)`` an item needs (None:
    unreachable) and their share of the population, as JSON-ready rows."""
    rows = []
    for p in PROBABILITIES:
        count = min_holders(p)
        rows.append({"probability": p, "count": count, "fraction": None if count is None else count / population})
    return rows


def holders_table(rows: List[dict], extra: Optional[Callable[[dict], str]] = None, heading: str = "") -> List[str]:
    """``holders_rows``' rows (or TrieHH's, which add columns through ``extra``) as aligned lines
    under a heading of probability, holders and share of n."""
    lines = [f"  {'probability':<14}{'users holding it':>18}{'share of n':>14}{heading}"]
    for entry in rows:
        label = f"{100 * entry['probability']:.3g}%"
        if entry["count"] is None:
            lines.append(f"  {label:<14}{'unreachable':>18}")
            continue
        share = f"{100 * entry['fraction']:.4g}%"
        lines.append(f"  {label:<14}{entry['count']:>18,}{share:>14}" + (extra(entry) if extra else ""))
    return lines
