"""The evaluation's report: the table of each method's recall, F1 or NCR per K (``summary_rows``,
also what ``triehh evaluate`` prints) and ``report.html``, which embeds the pictures
(``evaluation_plots``, as base64 data URIs so the file travels alone) beside the parameters, the
privacy guarantees and the data source (``write_report``)."""

from __future__ import annotations

import base64
import html
import os
from typing import Dict, List, Optional, Sequence, Tuple

from triehh_beam.io.drops import DROP_REASONS
from triehh_beam.job.release.wording import counted
from triehh_beam.present import evaluation_plots as plots

__all__ = ["summary_rows", "write_report"]


def _dropped(counts: dict) -> str:
    """The reader's drops as the text report words them (``io.drops.describe_drops``): "reason
    count, ..." for the reasons that dropped any, in the order records are checked, or "none"."""
    order = {reason: i for i, reason in enumerate(DROP_REASONS)}
    ranked = sorted(counts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    return ", ".join(f"{reason} {count:,}" for reason, count in ranked if count) or "none"


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

    def cells(config: dict) -> List[str]:
        by_k = {b["k"]: b for b in config["metrics"]}
        return [_cell(by_k.get(k), name) for k in ks]

    def central(p: dict) -> str:
        return f"({p['epsilon']:.3g}, {p['delta']:.2g})-DP central"

    rows = []
    for key, method in (("triehh", "TrieHH"), ("triehh_pp", "TrieHH++")):
        for config in sorted(result.get(key, ()), key=lambda c: (c["epsilon"], c["unit_size"])):
            rows.append((f"{method} ε={config['epsilon']:g}, unit size {config['unit_size']} "
                         f"(L={config['max_length']})", central(config["privacy"]), cells(config)))
    for config in sorted(result.get("sample_threshold", ()), key=lambda c: c["epsilon"]):
        rows.append((f"sample-and-threshold, whole items ε={config['epsilon']:g} (tau={config['privacy']['tau']})",
                     central(config["privacy"]), cells(config)))
    for config in result["rivals"].get("pem", {}).get("configurations", ()):
        rows.append((f"PEM ε={config['epsilon']:g}", f"{config['epsilon']:g}-LDP", cells(config)))
    for config in result["rivals"].get("pipelinedp", {}).get("configurations", ()):
        rows.append((f"PipelineDP partition selection ε={config['epsilon']:g} "
                     f"({config['released']['mean']:,.0f} items released)", central(config), cells(config)))
        ours = config.get("partition_selection")
        if ours:  # triehh-beam's --protocol partition-selection on the same rows and budget
            rows.append((f"triehh-beam partition selection ε={config['epsilon']:g} "
                         f"({ours['released']['mean']:,.0f} items released)", central(config), cells(ours)))
    exact = result["rivals"].get("exact")
    if exact:
        rows.append(("exact top-K", "none", cells(exact)))
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
        f"<li>input: <code>{esc(source['input'])}</code> ({counted(len(source['files']), 'file')})</li>",
        f"<li>{source['users']:,} users, {source['records']:,} records, "
        f"{source['distinct_items']:,} distinct items; users with several items: "
        f"{source['users_with_several_items']:,}</li>",
        f"<li>records dropped by the reader: {esc(_dropped(source['records_dropped']))}</li>",
        "</ul>",
        "<h2>Parameters</h2><ul>",
        f"<li>ε: {', '.join(f'{e:g}' for e in params['epsilons'])}; TrieHH δ = {params['delta']:g}; "
        f"rule {esc(params['rule'])}</li>",
        f"<li>items of up to {params['max_characters']} characters: L = "
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
        path = plots.plot_recall_at_k(result, os.path.join(out_dir, "recall_at_k.png"))
        written["recall_at_k"] = path
        images.append((path, "Recall@K per ε: TrieHH (solid), PEM (dashed), PipelineDP (dash-dot, when run), "
                             "exact top-K (dotted)."))
    for unit in params["unit_sizes"]:
        path = plots.plot_discovery_rate(result, unit, os.path.join(out_dir, f"discovery_rate_u{unit}.png"))
        if path:
            written[f"discovery_rate_u{unit}"] = path
            images.append((path, f"Discovery rate vs frequency, unit size {unit}: grey points are items, the "
                                 "line and band the binned mean and its CI, the dashed line the Proposition 1 "
                                 "bound averaged over the same items (it is exact only for items that share "
                                 "no prefix; shared prefixes make discovery easier)."))
    if result["triehh"]:
        path = plots.plot_recall_vs_unit_size(result, os.path.join(out_dir, "recall_vs_unit_size.png"))
        written["recall_vs_unit_size"] = path
        images.append((path, "Recall@K vs unit size, per ε."))
        path = plots.plot_growth(result, os.path.join(out_dir, "trie_growth.png"))
        written["trie_growth"] = path
        images.append((path, "Prefixes kept per round (the trie's growth)."))
    report = os.path.join(out_dir, "report.html")
    with open(report, "w", encoding="utf-8") as f:
        f.write(_html(result, images))
    written["report"] = report
    return written
