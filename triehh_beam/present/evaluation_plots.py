"""The evaluation's pictures, from the dict ``evaluation.experiment.run_evaluation`` returns (or
``evaluation.json`` read back): each item's discovery rate against its frequency beside the
Proposition 1 bound (one file per unit size, one panel per ε), recall@K against K for TrieHH and
its rivals, recall@K against the unit size, and the trie's growth per round."""

from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from triehh_beam.present.plots import colour, epsilon_label, grid, pyplot, save

__all__ = ["plot_discovery_rate", "plot_growth", "plot_recall_at_k", "plot_recall_vs_unit_size"]


def _t_band(rows: np.ndarray, confidence: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over runs (axis 0) and a t-interval band; rows: (runs, points)."""
    from scipy import stats

    mean = rows.mean(axis=0)
    if rows.shape[0] < 2:
        return mean, mean, mean
    half = stats.t.ppf((1 + confidence) / 2, rows.shape[0] - 1) * rows.std(axis=0, ddof=1) / math.sqrt(rows.shape[0])
    return mean, np.clip(mean - half, 0, None), mean + half


def epsilon_label(eps: float) -> str:
    return f"ε = {eps:g}"


# --------------------------------------------------------------------------------------------
# Evaluation plots.


def plot_discovery_rate(result: dict, unit_size: int, path: str) -> Optional[str]:
    """Each item's discovery rate against its holders at ``unit_size``, binned means with their
    band beside the Proposition 1 bound, one panel per ε; saved at ``path`` (None: no TrieHH
    configuration at that unit size)."""
    plt = pyplot()
    configs = [c for c in result["triehh"] if c["unit_size"] == unit_size]
    if not configs:
        return None
    confidence = result["parameters"]["confidence"]
    rows, cols = grid(len(configs))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False, sharey=True)
    n = result["data_source"]["users"]
    for index, config in enumerate(configs):
        ax = axes[index // cols][index % cols]
        privacy_block = config["privacy"]
        theta = privacy_block["theta"]
        items = [i for i in config["items"] if i["users"] >= theta]
        if not items:
            ax.set_visible(False)
            continue
        users = np.array([i["users"] for i in items], dtype=float)
        rates = np.array([i["rate"] for i in items])
        bounds = np.array([i["bound"] for i in items])
        ax.scatter(users, rates, s=6, alpha=0.25, color="#555555", linewidths=0,
                   label="an item's discovery rate")
        edges = np.geomspace(theta, users.max() * 1.0001, 16)
        which = np.clip(np.searchsorted(edges, users, side="right") - 1, 0, len(edges) - 2)
        found_sets = [set(run["heavy_hitters"]) for run in config["runs"]]
        names = [i["item"] for i in items]
        centres, means, lows, highs, bound_means = [], [], [], [], []
        for b in range(len(edges) - 1):
            members = np.flatnonzero(which == b)
            if len(members) == 0:
                continue
            per_run = np.array([[np.mean([names[m] in found for m in members])] for found in found_sets])
            mean, lo, hi = _t_band(per_run, confidence)
            centres.append(math.sqrt(edges[b] * edges[b + 1]))
            means.append(mean[0])
            lows.append(lo[0])
            highs.append(min(hi[0], 1.0))
            bound_means.append(bounds[members].mean())
        hue = colour(index)
        ax.fill_between(centres, lows, highs, color=hue, alpha=0.25, linewidth=0,
                        label=f"{int(confidence * 100)}% CI of the binned mean")
        ax.plot(centres, means, "-o", color=hue, markersize=3.5, label="measured (binned mean)")
        ax.plot(centres, bound_means, "--", color="black", linewidth=1.3,
                label="Proposition 1 bound (same items)")
        ax.axvline(theta, color="#999999", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"{epsilon_label(config['epsilon'])}: θ = {theta}, m = {privacy_block['batch_size']:,}", fontsize=10)
        ax.set_xlabel(f"users holding the item (of n = {n:,})")
        if index % cols == 0:
            ax.set_ylabel("discovery rate (fraction of runs)")
        ax.grid(True, which="major", alpha=0.3)
    for extra in range(len(configs), rows * cols):
        axes[extra // cols][extra % cols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8.5, frameon=False,
               bbox_to_anchor=(0.5, -0.04 if rows > 1 else -0.09))
    runs = result["parameters"]["runs"]
    fig.suptitle(f"TrieHH discovery rate vs frequency (unit size {unit_size}, {runs} runs, "
                 f"{result['parameters']['engine']} engine)", fontsize=11)
    fig.tight_layout()
    return save(fig, path)


def _metric(block: dict, name: str = "recall") -> Tuple[float, float, float]:
    value = block[name]
    mean = value["mean"]
    lo, hi = value["ci"] if value["ci"] else (mean, mean)
    return mean, lo, hi


def _errorbar(ax, xs, blocks, **style) -> None:
    """Each block's mean recall at ``xs`` with its interval as error bars."""
    stats_ = [_metric(b) for b in blocks]
    ax.errorbar(xs, [s[0] for s in stats_], yerr=[[s[0] - s[1] for s in stats_], [s[2] - s[0] for s in stats_]],
                capsize=3, **style)


def _triehh(result: dict, epsilon: float, unit_size: int) -> Optional[dict]:
    """The TrieHH configuration run at ``epsilon`` and ``unit_size``, if any (it may be infeasible)."""
    return next((c for c in result["triehh"] if c["epsilon"] == epsilon and c["unit_size"] == unit_size), None)


def _rival(result: dict, name: str, epsilon: float) -> Optional[dict]:
    """The rival ``name``'s configuration at ``epsilon``, if it ran."""
    rival = result["rivals"].get(name)
    return next((c for c in rival["configurations"] if c["epsilon"] == epsilon), None) if rival else None


def _row_of_panels(count: int, panel_width: float):
    """A figure of ``count`` panels side by side sharing the y axis: (figure, panels)."""
    fig, axes = pyplot().subplots(1, count, figsize=(panel_width * count + 1.2, 3.6), squeeze=False, sharey=True)
    return fig, list(axes[0])


def _finish(fig, first_panel, legend_size: float, title: str, path: str) -> str:
    """The first panel's legend at the right, the title, and the figure saved at ``path``."""
    handles, labels = first_panel.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=legend_size, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save(fig, path)


def plot_recall_at_k(result: dict, path: str) -> str:
    """recall@K against K per ε: TrieHH solid, PEM dashed, PipelineDP dash-dot, the exact top-K
    dotted; saved at ``path``."""
    plt = pyplot()
    params = result["parameters"]
    unit_size = params["unit_sizes"][0]
    ks = params["top_k"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    epsilons = params["epsilons"]
    offsets = np.linspace(-0.03, 0.03, max(len(epsilons), 1))
    for index, eps in enumerate(epsilons):
        hue = colour(index)
        config = _triehh(result, eps, unit_size)
        if config is not None:
            _errorbar(ax, np.array(ks, dtype=float) * (1 + offsets[index]), config["metrics"],
                      fmt="-o", color=hue, markersize=5, label=f"TrieHH {epsilon_label(eps)}")
        block = _rival(result, "pem", eps)
        if block:
            _errorbar(ax, np.array(ks, dtype=float) * (1 - offsets[index]), block["metrics"],
                      fmt="--s", color=hue, markersize=4, alpha=0.85, markerfacecolor="white",
                      label=f"PEM {epsilon_label(eps)} (LDP)")
        block = _rival(result, "pipelinedp", eps)
        if block:
            _errorbar(ax, ks, block["metrics"], fmt="-.^", color=hue, markersize=4, alpha=0.85,
                      label=f"PipelineDP {epsilon_label(eps)} (central)")
    exact = result["rivals"].get("exact")
    if exact:
        ax.plot(ks, [b["recall"]["mean"] for b in exact["metrics"]], ":", color="black", linewidth=1.5,
                label="exact top-K (non-private)")
    ax.set_xscale("log")
    ax.set_xticks(ks)
    ax.set_xticklabels([str(k) for k in ks])
    ax.minorticks_off()
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel("K")
    ax.set_ylabel("recall@K (mean over runs, 95% CI)")
    ax.set_title(f"Recall of the true top-K (unit size {unit_size}, {params['runs']} runs)", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7.5, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return save(fig, path)


def plot_recall_vs_unit_size(result: dict, path: str) -> str:
    """recall@K against the unit size per ε, one panel per K; saved at ``path``."""
    params = result["parameters"]
    ks = params["top_k"]
    units = params["unit_sizes"]
    fig, axes = _row_of_panels(len(ks), 3.6)
    for ax, k in zip(axes, ks):
        for index, eps in enumerate(params["epsilons"]):
            ran = [(unit, config) for unit in units if (config := _triehh(result, eps, unit)) is not None]
            if ran:
                _errorbar(ax, [unit for unit, _ in ran],
                          [next(b for b in config["metrics"] if b["k"] == k) for _, config in ran],
                          fmt="-o", color=colour(index), markersize=5, label=f"TrieHH {epsilon_label(eps)}")
        ax.set_xticks(units)
        ax.set_ylim(-0.03, 1.05)
        ax.set_xlabel("unit size (characters per unit)")
        ax.set_title(f"recall@{k}", fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("recall@K (mean, 95% CI)")
    return _finish(fig, axes[0], 8, f"TrieHH recall vs unit size (items of up to {params['max_characters']} "
                                    f"characters, {params['runs']} runs)", path)


def plot_growth(result: dict, path: str) -> str:
    """Prefixes kept per round (mean and band) per ε, one panel per unit size; saved at ``path``."""
    params = result["parameters"]
    units = params["unit_sizes"]
    fig, axes = _row_of_panels(len(units), 4.6)
    for ax, unit in zip(axes, units):
        for index, eps in enumerate(params["epsilons"]):
            config = _triehh(result, eps, unit)
            if config is None:
                continue
            rounds = [g["round"] for g in config["growth"]]
            mean = [g["mean"] for g in config["growth"]]
            lo = [g["ci"][0] if g["ci"] else g["mean"] for g in config["growth"]]
            hi = [g["ci"][1] if g["ci"] else g["mean"] for g in config["growth"]]
            hue = colour(index)
            ax.fill_between(rounds, lo, hi, color=hue, alpha=0.2, linewidth=0)
            ax.plot(rounds, mean, "-o", color=hue, markersize=3.5, label=f"{epsilon_label(eps)}")
        ax.set_xlabel("round (= prefix length in units)")
        ax.set_title(f"unit size {unit}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0].set_ylabel("prefixes kept (mean, 95% CI)")
    return _finish(fig, axes[0], 8.5, f"Trie growth per round ({params['runs']} runs; a stopped run counts 0)", path)
