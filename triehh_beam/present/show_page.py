"""The picture of a discovered trie and the one-file HTML page of a result (``triehh show``).

``draw_trie`` lays out the trie's radix view as a tree read left to right (matplotlib): each
node sits at the round that kept its last unit, so a column is a round; complete items are
filled, frequent prefixes dashed with an ellipsis, each leaf followed by the whole item or
prefix it spells. ``write_image`` saves it as PNG or SVG; ``write_page`` writes one HTML file
holding the summary, both tables (``show.table``'s content), the picture as inline SVG (its
text stays text, so the browser's fonts draw any script) and the text tree, with no other file
to carry along. matplotlib is imported only when a picture is drawn.
"""

from __future__ import annotations

import html
import io
import os
from typing import List, Optional, Tuple

from triehh_beam.present.plots import pyplot
from triehh_beam.present.result import Entry, PublishedResult, display, node_label
from triehh_beam.present.show import FREQUENT_PREFIX_NOTE, ORDER, render_tree, summary_lines
from triehh_beam.protocol.encoding import ItemKind
from triehh_beam.protocol.trie import RadixNode, Trie

__all__ = ["MAX_LEAVES_DRAWN", "draw_trie", "page_html", "write_image", "write_page"]

# A picture of more leaves is too tall to read (about 4 mm a leaf): the page then shows the text.
MAX_LEAVES_DRAWN = 2000
_ITEM_COLOUR = "#1f5fa8"
_PREFIX_COLOUR = "#7a7a7a"
_INNER_COLOUR = "#eef1f5"


def _layout(root: RadixNode) -> Tuple[List[Tuple[RadixNode, float, Optional[RadixNode]]], int]:
    """Each node with its row (leaves on consecutive rows, a parent centred on its children)
    and its parent; and the number of leaves."""
    placed: List[Tuple[RadixNode, float, Optional[RadixNode]]] = []
    leaves = 0

    def place(node: RadixNode, parent: Optional[RadixNode]) -> float:
        nonlocal leaves
        if node.children:
            child_rows = [place(child, node) for child in node.children]
            row = (child_rows[0] + child_rows[-1]) / 2
        else:
            row = float(leaves)
            leaves += 1
        placed.append((node, row, parent))
        return row

    for child in root.children:
        place(child, None)
    return placed, leaves


def draw_trie(trie: Trie):
    """The radix view of ``trie`` as a matplotlib figure, or None when it has no node or more
    than ``MAX_LEAVES_DRAWN`` leaves."""
    root = trie.radix()
    placed, leaves = _layout(root)
    if not placed or leaves > MAX_LEAVES_DRAWN:
        return None
    encoder = trie.encoder
    plt = pyplot()
    depth = max(len(node.prefix) for node, _, _ in placed)
    fig, ax = plt.subplots(figsize=(1.1 * depth + 2.6, 0.24 * leaves + 0.9))
    row_of = {id(node): row for node, row, _ in placed}
    for node, row, parent in placed:
        x = len(node.prefix)
        px, prow = (0, (leaves - 1) / 2) if parent is None else (len(parent.prefix), row_of[id(parent)])
        elbow = px + 0.5
        ax.plot([px, elbow, elbow, x], [prow, prow, row, row], color="#b8bec6", lw=0.8, zorder=1)
        if node.terminal:
            style = dict(color="white", fontweight="bold",
                         bbox=dict(boxstyle="round,pad=0.25", fc=_ITEM_COLOUR, ec=_ITEM_COLOUR))
        elif node.is_frequent_prefix:
            style = dict(color=_PREFIX_COLOUR, fontstyle="italic",
                         bbox=dict(boxstyle="round,pad=0.25", fc="white", ec=_PREFIX_COLOUR, ls="--"))
        else:
            style = dict(color="#333333", bbox=dict(boxstyle="round,pad=0.25", fc=_INNER_COLOUR, ec="#c9d0d8"))
        ax.text(x, row, node_label(node), ha="center", va="center", fontsize=9, zorder=3, **style)
        if not node.children:
            if node.terminal:
                whole = display(encoder.decode(node.prefix + (encoder.eos,)), encoder)
            else:  # an integer prefix shows its bits with an ellipsis and its range already
                whole = display(encoder.decode(node.prefix), encoder, complete=False)
                whole += "" if encoder.kind is ItemKind.INT else "\u2026"
            ax.text(depth + 0.7, row, whole, ha="left", va="center", fontsize=8,
                    color=_ITEM_COLOUR if node.terminal else _PREFIX_COLOUR, zorder=3)
    ax.plot([0], [(leaves - 1) / 2], marker="o", color="#333333", ms=4, zorder=3)
    ax.set_xlim(-0.4, depth + 2.2)
    ax.set_ylim(leaves - 0.4, -1.2)
    ax.set_xticks(range(1, depth + 1), [f"round {r}" for r in range(1, depth + 1)], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([])
    for side in ("left", "right", "bottom", "top"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="x", length=0)
    ax.set_title(f"the trie, radix view: \u25a0 complete item ({len(trie.heavy_hitter_sequences())})   "
                 f"\u2b1a frequent prefix ({len(trie.frequent_prefix_sequences())})",
                 fontsize=9, loc="left", color="#333333")
    fig.tight_layout()
    return fig


def _svg(fig) -> str:
    """The figure as an ``<svg>`` element: text kept as text, no date (the same trie gives the
    same bytes)."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "triehh"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def write_image(trie: Trie, path: str) -> Optional[str]:
    """Saves the picture of ``trie`` (PNG, or SVG when ``path`` ends in .svg); returns the path,
    or None when there is nothing to draw (see ``draw_trie``)."""
    fig = draw_trie(trie)
    if fig is None:
        return None
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    if path.lower().endswith(".svg"):
        with open(path, "w", encoding="utf-8") as f:
            f.write(_svg(fig))
    else:
        fig.savefig(path, dpi=110, metadata={"Software": None})
    pyplot().close(fig)
    return path


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 1.4em; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
td.n { text-align: right; }
th { background: #f3f3f3; }
p.note { color: #555; max-width: 52em; }
svg { max-width: 100%; height: auto; }
pre { font-size: 0.85em; line-height: 1.25; }
"""


def _table(entries: List[Entry], heading: str, why=None) -> str:
    head = ["#", heading, "round", "complete"] + (["why it stops there"] if why else [])
    parts = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for i, entry in enumerate(entries, start=1):
        cells = [f"<td class='n'>{i}</td>", f"<td><code>{html.escape(entry.text)}</code></td>",
                 f"<td class='n'>{entry.round}</td>", f"<td>{'yes' if entry.complete else 'no'}</td>"]
        if why:
            cells.append(f"<td>{html.escape(why(entry))}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(parts) + "</table>"


def page_html(result: PublishedResult) -> str:
    """The result as one self-contained HTML page."""
    esc = html.escape
    items, prefixes = result.heavy_hitters(), result.frequent_prefixes()
    fig = draw_trie(result.trie)
    if fig is None:
        picture = (f"<p class='note'>No picture: the trie has no node, or more than "
                   f"{MAX_LEAVES_DRAWN:,} leaves (too tall to read); the text view below has it all.</p>")
    else:
        picture = _svg(fig)
        pyplot().close(fig)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>triehh show: {esc(result.sources[0])}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>TrieHH result</h1>",
        "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in summary_lines(result)) + "</ul>",
        f"<h2>{len(items)} heavy hitters (complete items)</h2>",
        f"<p class='note'>{esc(ORDER)}.</p>",
        _table(items, "item") if items else "",
        f"<h2>{len(prefixes)} frequent prefixes (not items)</h2>",
        f"<p class='note'>{esc(FREQUENT_PREFIX_NOTE)}</p>" if prefixes else "",
        _table(prefixes, "prefix", result.why_stopped) if prefixes else "",
        "<h2>The trie</h2>",
        "<p class='note'>The radix view: chains of nodes with one child each are merged into one "
        "node. Each column is a round; a node sits at the round that kept its last unit.</p>",
        picture,
        "<details><summary>as text</summary><pre>" + esc(render_tree(result.trie)) + "</pre></details>",
        "</body></html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


def write_page(result: PublishedResult, path: str) -> str:
    """Writes ``page_html(result)`` to ``path`` (its directory created); returns the path."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page_html(result))
    return path
