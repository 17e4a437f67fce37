"""The planner's pictures, ``triehh plan --plot DIR``: worst-case discovery (Proposition 1)
against the item's frequency for several ε, against the population size, and the population
needed for 90% discovery against frequency."""

from __future__ import annotations

import os
from typing import List, Optional, Sequence

import numpy as np

from triehh_beam.present.plots import colour, epsilon_label, pyplot, save
from triehh_beam.protocol.planning import parameters, planner, utility

__all__ = ["write_planning_plots"]


def write_planning_plots(
    out_dir: str,
    n: int,
    epsilons: Sequence[float],
    delta: float,
    max_length: int,
    rule: str = "authors",
    length: Optional[int] = None,
) -> List[str]:
    """The planner's plots for ``triehh plan --plot DIR`` (Proposition 1, worst case).

    Args:
      out_dir: where the PNGs go (created).
      n: the population.
      epsilons: one curve per ε (infeasible ones are named in the legend and not drawn).
      delta, max_length, rule: the privacy target and planning rule.
      length: the item length in units with terminator (default L, the worst case).

    Returns:
      The paths of ``planning_discovery_vs_frequency.png``,
      ``planning_discovery_vs_population.png`` and ``planning_population_for_90pct.png``.

    Raises:
      ValueError: for an invalid target (the planner's messages).
    """
    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    epsilons = sorted(set(float(e) for e in epsilons))
    if not epsilons:
        raise ValueError("give at least one epsilon")
    length = max_length if length is None else int(length)
    if not 1 <= length <= max_length:
        raise ValueError(f"length must be in [1, {max_length}], got {length}")
    for eps in epsilons:
        parameters.PrivacyTarget(n, eps, delta, max_length)
    worst = " (worst case: length L)" if length == max_length else ""
    setting = f"δ = {delta:g}, L = {max_length}, item length {length} units{worst}"
    paths = []

    # 1. Discovery probability vs frequency at n.
    fig, ax = plt.subplots(figsize=(6.6, 4.2))
    plans = [planner.plan(n, eps, delta, max_length, rule, with_alternatives=False) for eps in epsilons]
    # Zoom on where the curves rise: from below the 1% point to above the 99.9% point.
    low, high = 1.0, 1.0 / n
    for plan in plans:
        if plan.feasible:
            start = utility.min_frequency(0.01, n, plan.batch_size, plan.theta, length)
            end = utility.min_frequency(0.999, n, plan.batch_size, plan.theta, length)
            if start is not None:
                low = min(low, start.fraction)
            high = max(high, end.fraction if end is not None else 1.0)
    if low >= high:
        low, high = 1.0 / n, 1.0
    fractions = np.geomspace(max(low / 2, 1.0 / n), min(high * 2, 1.0), 400)
    for index, (eps, plan) in enumerate(zip(epsilons, plans)):
        if not plan.feasible:
            ax.plot([], [], color=colour(index), label=f"{epsilon_label(eps)}: infeasible at this n")
            continue
        counts = sorted({utility.count_for_fraction(f, n) for f in fractions})
        probs = [utility.discovery_probability(c, n, plan.batch_size, plan.theta, length) for c in counts]
        ax.plot(np.array(counts) / n, probs, color=colour(index),
                label=f"{epsilon_label(eps)} (θ = {plan.theta}, m = {plan.batch_size:,})")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("item frequency (share of users holding it)")
    ax.set_ylabel("discovery probability (Proposition 1)")
    ax.set_title(f"Worst-case discovery vs frequency, n = {n:,}\n{setting}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    paths.append(save(fig, os.path.join(out_dir, "planning_discovery_vs_frequency.png")))

    # 2. Discovery probability vs population, for a few frequencies.
    fig, ax = plt.subplots(figsize=(6.6, 4.2))
    populations = np.unique(np.geomspace(1_000, max(1e8, 100.0 * n), 100).astype(np.int64))
    styles = ((1e-2, "-"), (1e-3, "--"), (1e-4, ":"))
    for index, eps in enumerate(epsilons):
        for fraction, style in styles:
            probs = []
            for pop in populations:
                plan = planner.plan(int(pop), eps, delta, max_length, rule, with_alternatives=False)
                probs.append(0.0 if not plan.feasible else utility.discovery_probability_for_fraction(
                    fraction, int(pop), plan.batch_size, plan.theta, length))
            ax.plot(populations, probs, style, color=colour(index),
                    label=f"{epsilon_label(eps)}, frequency {fraction * 100:g}%")
    ax.axvline(n, color="#888888", linewidth=0.9)
    ax.annotate(f"n = {n:,}", (n, 0.75), rotation=90, fontsize=8, color="#555555",
                xytext=(3, 0), textcoords="offset points", va="center")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("population size n (users)")
    ax.set_ylabel("discovery probability (Proposition 1)")
    ax.set_title(f"Worst-case discovery vs population size\n{setting}; infeasible n count as 0",
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    paths.append(save(fig, os.path.join(out_dir, "planning_discovery_vs_population.png")))

    # 3. Population needed for 90% discovery vs frequency.
    fig, ax = plt.subplots(figsize=(6.6, 4.2))
    fractions = np.geomspace(1e-4, 0.2, 25)
    for index, eps in enumerate(epsilons):
        needed = []
        for fraction in fractions:
            requirement = utility.min_population(float(fraction), 0.9, eps, delta, max_length,
                                                 rule=rule, length=length)
            needed.append(np.nan if requirement is None else requirement.n)
        ax.plot(fractions, needed, "-o", markersize=3, color=colour(index), label=epsilon_label(eps))
    ax.axhline(n, color="#888888", linewidth=0.9, linestyle="--", label=f"n = {n:,}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("item frequency (share of users holding it)")
    ax.set_ylabel("users needed")
    ax.set_title(f"Population needed to discover an item with probability 90%\n{setting}", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(save(fig, os.path.join(out_dir, "planning_population_for_90pct.png")))
    return paths
