"""Plots and a self-contained HTML report of an evaluation, and the planner's plots.

``write_report(result, out_dir)`` draws, from the dict ``evaluation.run_evaluation`` returns
(or ``evaluation.json`` loaded back):

* ``discovery_rate_u<k>.png`` (one per unit size): each item's discovery rate against its
  frequency, binned means with their confidence band, and the Proposition 1 bound averaged
  over the same items; one panel per ε;
* ``recall_at_k.png``: recall@K against K per ε, TrieHH beside PEM, PipelineDP (when run) and the
  exact top-K;
* ``recall_vs_unit_size.png``: recall@K against the unit size, per ε, one panel per K;
* ``trie_growth.png``: prefixes kept per round (mean and band), per ε, one panel per unit size;

and ``report.html``, which embeds them (base64 data URIs, so the file travels alone) with the
parameters, the privacy guarantees and the data source.

``write_planning_plots(...)`` draws what ``triehh plan --plot DIR`` shows: worst-case discovery
(Proposition 1) against frequency for several ε, against the population size, and the
population needed for 90% discovery against frequency.

matplotlib with the Agg backend (no display needed), imported when a function is called.
"""

from __future__ import annotations

import base64
import html
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from triehh_beam.protocol import parameters, planner, utility

__all__ = ["summary_rows", "write_planning_plots", "write_report"]

_DPI = 110
# One colour per epsilon (matplotlib's tab10 order); PEM reuses the colour with a dashed line.
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _colour(i: int) -> str:
    return _COLOURS[i % len(_COLOURS)]


def _save(fig, path: str) -> str:
    fig.savefig(path, dpi=_DPI, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def _grid(count: int) -> Tuple[int, int]:
    cols = 1 if count == 1 else 2
    return math.ceil(count / cols), cols


def _t_band(rows: np.ndarray, confidence: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over runs (axis 0) and a t-interval band; rows: (runs, points)."""
    from scipy import stats

    mean = rows.mean(axis=0)
    if rows.shape[0] < 2:
        return mean, mean, mean
    half = stats.t.ppf((1 + confidence) / 2, rows.shape[0] - 1) * rows.std(axis=0, ddof=1) / math.sqrt(rows.shape[0])
    return mean, np.clip(mean - half, 0, None), mean + half


def _fmt_eps(eps: float) -> str:
    return f"ε = {eps:g}"


# --------------------------------------------------------------------------------------------
# Evaluation plots.


def _plot_discovery_rate(result: dict, unit_size: int, path: str) -> Optional[str]:
    plt = _pyplot()
    configs = [c for c in result["triehh"] if c["unit_size"] == unit_size]
    if not configs:
        return None
    confidence = result["parameters"]["confidence"]
    rows, cols = _grid(len(configs))
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
        colour = _colour(index)
        ax.fill_between(centres, lows, highs, color=colour, alpha=0.25, linewidth=0,
                        label=f"{int(confidence * 100)}% CI of the binned mean")
        ax.plot(centres, means, "-o", color=colour, markersize=3.5, label="measured (binned mean)")
        ax.plot(centres, bound_means, "--", color="black", linewidth=1.3,
                label="Proposition 1 bound (same items)")
        ax.axvline(theta, color="#999999", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"{_fmt_eps(config['epsilon'])}: θ = {theta}, m = {privacy_block['batch_size']:,}", fontsize=10)
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
    return _save(fig, path)


def _metric(block: dict, name: str = "recall") -> Tuple[float, float, float]:
    value = block[name]
    mean = value["mean"]
    lo, hi = value["ci"] if value["ci"] else (mean, mean)
    return mean, lo, hi


def _plot_recall_at_k(result: dict, path: str) -> str:
    plt = _pyplot()
    params = result["parameters"]
    unit_size = params["unit_sizes"][0]
    ks = params["top_k"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    epsilons = params["epsilons"]
    offsets = np.linspace(-0.03, 0.03, max(len(epsilons), 1))
    for index, eps in enumerate(epsilons):
        colour = _colour(index)
        config = next((c for c in result["triehh"] if c["epsilon"] == eps and c["unit_size"] == unit_size), None)
        if config is not None:
            stats_ = [_metric(b) for b in config["metrics"]]
            x = np.array(ks, dtype=float) * (1 + offsets[index])
            means = [s[0] for s in stats_]
            ax.errorbar(x, means, yerr=[[s[0] - s[1] for s in stats_], [s[2] - s[0] for s in stats_]],
                        fmt="-o", color=colour, capsize=3, markersize=5, label=f"TrieHH {_fmt_eps(eps)}")
        pem = result["rivals"].get("pem")
        if pem:
            block = next((c for c in pem["configurations"] if c["epsilon"] == eps), None)
            if block:
                stats_ = [_metric(b) for b in block["metrics"]]
                x = np.array(ks, dtype=float) * (1 - offsets[index])
                ax.errorbar(x, [s[0] for s in stats_],
                            yerr=[[s[0] - s[1] for s in stats_], [s[2] - s[0] for s in stats_]],
                            fmt="--s", color=colour, capsize=3, markersize=4, alpha=0.85,
                            markerfacecolor="white", label=f"PEM {_fmt_eps(eps)} (LDP)")
        pipelinedp = result["rivals"].get("pipelinedp")
        block = next((c for c in pipelinedp["configurations"] if c["epsilon"] == eps), None) if pipelinedp else None
        if block:
            stats_ = [_metric(b) for b in block["metrics"]]
            ax.errorbar(ks, [s[0] for s in stats_], yerr=[[s[0] - s[1] for s in stats_], [s[2] - s[0] for s in stats_]],
                        fmt="-.^", color=colour, capsize=3, markersize=4, alpha=0.85,
                        label=f"PipelineDP {_fmt_eps(eps)} (central)")
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
    return _save(fig, path)


def _plot_recall_vs_unit_size(result: dict, path: str) -> str:
    plt = _pyplot()
    params = result["parameters"]
    ks = params["top_k"]
    units = params["unit_sizes"]
    fig, axes = plt.subplots(1, len(ks), figsize=(3.6 * len(ks) + 1.2, 3.6), squeeze=False, sharey=True)
    for kindex, k in enumerate(ks):
        ax = axes[0][kindex]
        for index, eps in enumerate(params["epsilons"]):
            xs, stats_ = [], []
            for unit in units:
                config = next((c for c in result["triehh"] if c["epsilon"] == eps and c["unit_size"] == unit), None)
                if config is None:
                    continue
                xs.append(unit)
                stats_.append(_metric(next(b for b in config["metrics"] if b["k"] == k)))
            if not xs:
                continue
            ax.errorbar(xs, [s[0] for s in stats_], yerr=[[s[0] - s[1] for s in stats_], [s[2] - s[0] for s in stats_]],
                        fmt="-o", color=_colour(index), capsize=3, markersize=5, label=f"TrieHH {_fmt_eps(eps)}")
        ax.set_xticks(units)
        ax.set_ylim(-0.03, 1.05)
        ax.set_xlabel("unit size (characters per unit)")
        ax.set_title(f"recall@{k}", fontsize=10)
        ax.grid(True, alpha=0.3)
        if kindex == 0:
            ax.set_ylabel("recall@K (mean, 95% CI)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.suptitle(f"TrieHH recall vs unit size (items of up to {params['max_length'] - 1} characters, "
                 f"{params['runs']} runs)", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def _plot_growth(result: dict, path: str) -> str:
    plt = _pyplot()
    params = result["parameters"]
    units = params["unit_sizes"]
    fig, axes = plt.subplots(1, len(units), figsize=(4.6 * len(units) + 1.2, 3.6), squeeze=False, sharey=True)
    for uindex, unit in enumerate(units):
        ax = axes[0][uindex]
        for index, eps in enumerate(params["epsilons"]):
            config = next((c for c in result["triehh"] if c["epsilon"] == eps and c["unit_size"] == unit), None)
            if config is None:
                continue
            rounds = [g["round"] for g in config["growth"]]
            mean = [g["mean"] for g in config["growth"]]
            lo = [g["ci"][0] if g["ci"] else g["mean"] for g in config["growth"]]
            hi = [g["ci"][1] if g["ci"] else g["mean"] for g in config["growth"]]
            colour = _colour(index)
            ax.fill_between(rounds, lo, hi, color=colour, alpha=0.2, linewidth=0)
            ax.plot(rounds, mean, "-o", color=colour, markersize=3.5, label=f"{_fmt_eps(eps)}")
        ax.set_xlabel("round (= prefix length in units)")
        ax.set_title(f"unit size {unit}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if uindex == 0:
            ax.set_ylabel("prefixes kept (mean, 95% CI)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8.5, frameon=False)
    fig.suptitle(f"Trie growth per round ({params['runs']} runs; a stopped run counts 0)", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------------------------
# HTML.


def _cell(block: Optional[dict], name: str = "recall") -> str:
    if block is None:
        return "–"
    value = block[name]
    if value["mean"] is None:
        return "–"
    if not value["ci"]:
        return f"{value['mean']:.3f}"
    lo, hi = value["ci"]
    return f"{value['mean']:.3f} [{lo:.3f}, {hi:.3f}]"


def summary_rows(result: dict, name: str = "recall") -> List[Tuple[str, str, List[str]]]:
    """(method, privacy, cells per K) rows of the results table, in display order."""
    ks = result["parameters"]["top_k"]
    rows = []
    for config in sorted(result["triehh"], key=lambda c: (c["epsilon"], c["unit_size"])):
        by_k = {b["k"]: b for b in config["metrics"]}
        p = config["privacy"]
        rows.append((
            f"TrieHH ε={config['epsilon']:g}, unit size {config['unit_size']} (L={config['max_length']})",
            f"({p['epsilon']:.3g}, {p['delta']:.2g})-DP central",
            [_cell(by_k.get(k), name) for k in ks],
        ))
    for config in sorted(result.get("triehh_pp", ()), key=lambda c: (c["epsilon"], c["unit_size"])):
        by_k = {b["k"]: b for b in config["metrics"]}
        p = config["privacy"]
        rows.append((
            f"TrieHH++ ε={config['epsilon']:g}, unit size {config['unit_size']} (L={config['max_length']})",
            f"({p['epsilon']:.3g}, {p['delta']:.2g})-DP central",
            [_cell(by_k.get(k), name) for k in ks],
        ))
    for config in sorted(result.get("sample_threshold", ()), key=lambda c: c["epsilon"]):
        by_k = {b["k"]: b for b in config["metrics"]}
        p = config["privacy"]
        rows.append((
            f"sample-and-threshold, whole items ε={config['epsilon']:g} (tau={p['tau']})",
            f"({p['epsilon']:.3g}, {p['delta']:.2g})-DP central",
            [_cell(by_k.get(k), name) for k in ks],
        ))
    pem = result["rivals"].get("pem")
    if pem:
        for config in pem["configurations"]:
            by_k = {b["k"]: b for b in config["metrics"]}
            rows.append((f"PEM ε={config['epsilon']:g}", f"{config['epsilon']:g}-LDP",
                         [_cell(by_k.get(k), name) for k in ks]))
    pipelinedp = result["rivals"].get("pipelinedp")
    if pipelinedp:
        for config in pipelinedp["configurations"]:
            by_k = {b["k"]: b for b in config["metrics"]}
            rows.append((f"PipelineDP partition selection ε={config['epsilon']:g} "
                         f"({config['released']['mean']:,.0f} items released)",
                         f"({config['epsilon']:.3g}, {config['delta']:.2g})-DP central",
                         [_cell(by_k.get(k), name) for k in ks]))
    exact = result["rivals"].get("exact")
    if exact:
        by_k = {b["k"]: b for b in exact["metrics"]}
        rows.append(("exact top-K", "none", [_cell(by_k.get(k), name) for k in ks]))
    return rows


def _table(result: dict, name: str) -> str:
    ks = result["parameters"]["top_k"]
    head = "".join(f"<th>{html.escape(name)}@{k}</th>" for k in ks)
    body = []
    for method, guarantee, cells in summary_rows(result, name):
        tds = "".join(f"<td>{html.escape(c)}</td>" for c in cells)
        body.append(f"<tr><td>{html.escape(method)}</td><td>{html.escape(guarantee)}</td>{tds}</tr>")
    return f"<table><tr><th>method</th><th>privacy</th>{head}</tr>{''.join(body)}</table>"


def _img(path: str, alt: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(alt)}</figcaption></figure>'


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
img { max-width: 100%; }
figure { margin: 1.2em 0; }
figcaption { font-size: 0.85em; color: #555; }
code { background: #f6f6f6; padding: 0 0.2em; }
"""


def _html(result: dict, images: Sequence[Tuple[str, str]]) -> str:
    params = result["parameters"]
    source = result["data_source"]
    esc = html.escape
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<title>triehh-beam evaluation</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>TrieHH evaluation</h1>",
        f"<p>Created {esc(result['created_at'])} in {result['seconds']:.0f} s; schema "
        f"<code>{esc(result['schema'])}</code>.</p>",
        "<h2>Data source</h2><ul>",
        f"<li>input: <code>{esc(source['input'])}</code> ({len(source['files'])} file(s))</li>",
        f"<li>{source['users']:,} users, {source['records']:,} records, "
        f"{source['distinct_items']:,} distinct items; users with several items: "
        f"{source['users_with_several_items']:,}</li>",
        f"<li>records dropped by the reader: {esc(str({k: v for k, v in source['records_dropped'].items() if v}) or 'none')}</li>",
        "</ul>",
        "<h2>Parameters</h2><ul>",
        f"<li>ε: {', '.join(f'{e:g}' for e in params['epsilons'])}; TrieHH δ = {params['delta']:g}; "
        f"rule {esc(params['rule'])}</li>",
        f"<li>items of up to {params['max_length'] - 1} characters: L = "
        + ", ".join(f"{v} units at unit size {k}" for k, v in params["max_length_by_unit_size"].items())
        + "</li>",
        f"<li>{params['runs']} runs per configuration, engine <b>{esc(params['engine'])}</b> "
        f"({'the real Beam pipeline, in-process runner unless options said otherwise' if params['engine'] == 'pipeline' else 'the keyed simulation: the same draws as the pipeline for the same seed'}); "
        f"public evaluation seed {params['seed']}</li>",
        f"<li>K: {', '.join(str(k) for k in params['top_k'])}; rivals: {esc(', '.join(params['rivals']) or 'none')}</li>",
        f"<li>intervals: {esc(params['ci_method'])}, {params['confidence']:.0%}</li>",
        "</ul>",
        "<h2>Privacy</h2><ul>",
        "<li><b>TrieHH</b>: central (ε, δ)-differential privacy with user-level adjacency (adding or "
        "removing all of one user's records), by Theorem 1 of Zhu et al. (sampling m users per round "
        "and keeping prefixes with at least θ votes; no noise). The ε, δ below are each run's "
        "achieved values for all L rounds. Repeating R runs on the same users composes to (Rε, Rδ): "
        "evaluate on data whose privacy is not at stake.</li>",
        "<li><b>PEM</b>: ε-local differential privacy: each user sends one OLH report of one prefix "
        "(users are divided into groups, the budget is not).</li>",
        "<li><b>exact top-K</b>: no privacy; the ceiling.</li>",
    ]
    if result["rivals"].get("pipelinedp"):
        rival = result["rivals"]["pipelinedp"]
        parts.append(
            f"<li><b>PipelineDP</b> ({esc(rival['library'])}, {esc(rival['backend'])}): central (ε, δ)-differential "
            f"privacy at TrieHH's ε and δ by private partition selection ({esc(rival['strategy'])}), each user "
            "contributing one item; the server reads raw records, as <code>triehh discover</code>'s does.</li>")
    parts.append("</ul>")
    if result["triehh"]:
        parts.append("<table><tr><th>TrieHH configuration</th><th>θ</th><th>m</th><th>ε achieved</th>"
                     "<th>δ achieved</th><th>rounds (mean)</th></tr>")
        for c in result["triehh"]:
            p = c["privacy"]
            parts.append(
                f"<tr><td>ε={c['epsilon']:g}, unit size {c['unit_size']}, L={c['max_length']}</td>"
                f"<td>{p['theta']}</td><td>{p['batch_size']:,}</td><td>{p['epsilon']:.4g}</td>"
                f"<td>{p['delta']:.3g}</td><td>{c['rounds']['mean']:.2f}</td></tr>")
        parts.append("</table>")
    if result["infeasible"]:
        parts.append("<h3>Skipped (infeasible for this population)</h3><ul>")
        for s in result["infeasible"]:
            parts.append(f"<li>ε={s['epsilon']:g}, unit size {s['unit_size']}: {esc(s['reason'])}</li>")
        parts.append("</ul>")
    if result["warnings"]:
        parts.append("<h3>Warnings</h3><ul>" + "".join(f"<li>{esc(w)}</li>" for w in result["warnings"]) + "</ul>")
    parts.append("<h2>Results</h2><p>Mean over runs [95% CI].</p>")
    for name in ("recall", "f1", "ncr"):
        parts.append(f"<h3>{name}@K</h3>" + _table(result, name))
    for path, alt in images:
        parts.append(_img(path, alt))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(result: dict, out_dir: str) -> Dict[str, str]:
    """Writes the PNGs and ``report.html`` into ``out_dir`` (created); returns name -> path."""
    os.makedirs(out_dir, exist_ok=True)
    written: Dict[str, str] = {}
    images: List[Tuple[str, str]] = []
    params = result["parameters"]
    if result["triehh"] or result["rivals"]:
        path = _plot_recall_at_k(result, os.path.join(out_dir, "recall_at_k.png"))
        written["recall_at_k"] = path
        images.append((path, "Recall@K per ε: TrieHH (solid), PEM (dashed), PipelineDP (dash-dot, when run), "
                             "exact top-K (dotted)."))
    for unit in params["unit_sizes"]:
        path = _plot_discovery_rate(result, unit, os.path.join(out_dir, f"discovery_rate_u{unit}.png"))
        if path:
            written[f"discovery_rate_u{unit}"] = path
            images.append((path, f"Discovery rate vs frequency, unit size {unit}: grey points are items, the "
                                 "line and band the binned mean and its CI, the dashed line the Proposition 1 "
                                 "bound averaged over the same items (it is exact only for items that share "
                                 "no prefix; shared prefixes make discovery easier)."))
    if result["triehh"]:
        path = _plot_recall_vs_unit_size(result, os.path.join(out_dir, "recall_vs_unit_size.png"))
        written["recall_vs_unit_size"] = path
        images.append((path, "Recall@K vs unit size, per ε."))
        path = _plot_growth(result, os.path.join(out_dir, "trie_growth.png"))
        written["trie_growth"] = path
        images.append((path, "Prefixes kept per round (the trie's growth)."))
    report = os.path.join(out_dir, "report.html")
    with open(report, "w", encoding="utf-8") as f:
        f.write(_html(result, images))
    written["report"] = report
    return written


# --------------------------------------------------------------------------------------------
# Planning plots.


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
    plt = _pyplot()
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
            ax.plot([], [], color=_colour(index), label=f"{_fmt_eps(eps)}: infeasible at this n")
            continue
        counts = sorted({utility.count_for_fraction(f, n) for f in fractions})
        probs = [utility.discovery_probability(c, n, plan.batch_size, plan.theta, length) for c in counts]
        ax.plot(np.array(counts) / n, probs, color=_colour(index),
                label=f"{_fmt_eps(eps)} (θ = {plan.theta}, m = {plan.batch_size:,})")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("item frequency (share of users holding it)")
    ax.set_ylabel("discovery probability (Proposition 1)")
    ax.set_title(f"Worst-case discovery vs frequency, n = {n:,}\n{setting}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    paths.append(_save(fig, os.path.join(out_dir, "planning_discovery_vs_frequency.png")))

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
            ax.plot(populations, probs, style, color=_colour(index),
                    label=f"{_fmt_eps(eps)}, frequency {fraction * 100:g}%")
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
    paths.append(_save(fig, os.path.join(out_dir, "planning_discovery_vs_population.png")))

    # 3. Population needed for 90% discovery vs frequency.
    fig, ax = plt.subplots(figsize=(6.6, 4.2))
    fractions = np.geomspace(1e-4, 0.2, 25)
    for index, eps in enumerate(epsilons):
        needed = []
        for fraction in fractions:
            requirement = utility.min_population(float(fraction), 0.9, eps, delta, max_length,
                                                 rule=rule, length=length)
            needed.append(np.nan if requirement is None else requirement.n)
        ax.plot(fractions, needed, "-o", markersize=3, color=_colour(index), label=_fmt_eps(eps))
    ax.axhline(n, color="#888888", linewidth=0.9, linestyle="--", label=f"n = {n:,}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("item frequency (share of users holding it)")
    ax.set_ylabel("users needed")
    ax.set_title(f"Population needed to discover an item with probability 90%\n{setting}", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(_save(fig, os.path.join(out_dir, "planning_population_for_90pct.png")))
    return paths
