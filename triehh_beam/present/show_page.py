"""The picture of a discovered trie and the one-file HTML page of a result (``triehh show``):
``layout`` places the trie's radix view left to right, a column per round, each node at the round
that kept its last unit and each complete item's ``end`` box at the round that kept its end (the
round the tables give); ``draw_trie`` draws it with matplotlib (imported only then), each leaf
followed by the item or prefix it spells; ``write_image`` saves PNG or SVG; ``write_page`` writes
one self-contained HTML file with the summary, both tables, the picture as inline SVG (its text
stays text) and the text tree.
"""

from __future__ import annotations

import dataclasses
import html
import io
import os
from typing import Dict, List, Optional, Tuple

from triehh_beam.present.plots import pyplot
from triehh_beam.present.result import Entry, PublishedResult, display, node_label
from triehh_beam.present.show import FREQUENT_PREFIX_NOTE, ORDER, render_tree, summary_lines
from triehh_beam.protocol.items.encoding import ItemKind
from triehh_beam.protocol.rounds.trie import RadixNode, Trie

__all__ = ["END_LABEL", "MAX_LEAVES_DRAWN", "Box", "draw_trie", "layout", "page_html", "write_image", "write_page"]

# A picture of more leaves is too tall to read (about 4 mm a leaf): the page then shows the text.
MAX_LEAVES_DRAWN = 2000
_ITEM_COLOUR = "#1f5fa8"
_PREFIX_COLOUR = "#7a7a7a"
_INNER_COLOUR = "#eef1f5"


@dataclasses.dataclass(frozen=True)
class Box:
    """One box of the drawing: ``column`` the round that kept its last unit (an item's end box:
    the round that kept its terminator, as the tables say), ``row`` its row (leaves on
    consecutive rows, a parent centred on its children), ``parent`` the (column, row) its line
    comes from, ``kind`` ``"inner"``, ``"item"`` (an item's end) or ``"prefix"`` (a frequent
    prefix), and ``whole`` the item or prefix a leaf spells (None for inner boxes)."""

    column: int
    row: float
    label: str
    kind: str
    parent: Tuple[int, float]
    whole: Optional[str] = None


END_LABEL = "end"


def layout(trie: Trie) -> Tuple[List[Box], int]:
    """The boxes of the drawing of ``trie``'s radix view and the number of leaves (rows). A
    complete item ends in its own box, one column after its last unit: the round that kept its
    end, so the drawing and the tables give every entry the same round."""
    encoder = trie.encoder
    rows: Dict[int, float] = {}  # id(node) -> its row
    end_rows: Dict[int, float] = {}  # id(node) -> the row of its item's end box
    leaves = 0

    def leaf_row() -> float:
        nonlocal leaves
        leaves += 1
        return float(leaves - 1)

    def place(node: RadixNode) -> float:
        below = []
        if node.terminal:  # the item's end: a leaf of its own, one round later
            end_rows[id(node)] = leaf_row()
            below.append(end_rows[id(node)])
        below += [place(child) for child in node.children]
        rows[id(node)] = (below[0] + below[-1]) / 2 if below else leaf_row()
        return rows[id(node)]

    boxes: List[Box] = []

    def emit(node: RadixNode, parent: Tuple[int, float]) -> None:
        column, row = len(node.prefix), rows[id(node)]
        if node.children or node.terminal:
            boxes.append(Box(column, row, node_label(node), "inner", parent))
        else:  # a frequent prefix (an integer prefix shows its bits, an ellipsis and its range already)
            whole = display(encoder.decode(node.prefix), encoder, complete=False)
            whole += "" if encoder.kind is ItemKind.INT else "\u2026"
            boxes.append(Box(column, row, node_label(node), "prefix", parent, whole))
        if node.terminal:
            whole = display(encoder.decode(node.prefix + (encoder.eos,)), encoder)
            boxes.append(Box(column + 1, end_rows[id(node)], END_LABEL, "item", (column, row), whole))
        for child in node.children:
            emit(child, (column, row))

    tops = trie.radix().children
    for child in tops:
        place(child)
    for child in tops:
        emit(child, (0, (leaves - 1) / 2))
    return boxes, leaves


_STYLES = {
    "item": dict(color="white", fontweight="bold",
                 bbox=dict(boxstyle="round,pad=0.25", fc=_ITEM_COLOUR, ec=_ITEM_COLOUR)),
    "prefix": dict(color=_PREFIX_COLOUR, fontstyle="italic",
                   bbox=dict(boxstyle="round,pad=0.25", fc="white", ec=_PREFIX_COLOUR, ls="--")),
    "inner": dict(color="#333333", bbox=dict(boxstyle="round,pad=0.25", fc=_INNER_COLOUR, ec="#c9d0d8")),
}


def draw_trie(trie: Trie):
    """The radix view of ``trie`` as a matplotlib figure (``layout``: a column is a round), or
    None when it has no node or more than ``MAX_LEAVES_DRAWN`` leaves."""
    boxes, leaves = layout(trie)
    if not boxes or leaves > MAX_LEAVES_DRAWN:
        return None
    plt = pyplot()
    depth = max(box.column for box in boxes)
    fig, ax = plt.subplots(figsize=(1.1 * depth + 2.6, 0.24 * leaves + 0.9))
    for box in boxes:
        px, prow = box.parent
        elbow = px + 0.5
        ax.plot([px, elbow, elbow, box.column], [prow, prow, box.row, box.row], color="#b8bec6", lw=0.8, zorder=1)
        ax.text(box.column, box.row, box.label, ha="center", va="center", fontsize=9, zorder=3, **_STYLES[box.kind])
        if box.whole is not None:
            ax.text(depth + 0.7, box.row, box.whole, ha="left", va="center", fontsize=8,
                    color=_ITEM_COLOUR if box.kind == "item" else _PREFIX_COLOUR, zorder=3)
    ax.plot([0], [(leaves - 1) / 2], marker="o", color="#333333", ms=4, zorder=3)
    ax.set_xlim(-0.4, depth + 2.2)
    ax.set_ylim(leaves - 0.4, -1.2)
    ax.set_xticks(range(1, depth + 1), [f"round {r}" for r in range(1, depth + 1)], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([])
    for side in ("left", "right", "bottom", "top"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="x", length=0)
    ax.set_title(f"the trie, radix view: \u25a0 end of a complete item "
                 f"({len(trie.heavy_hitter_sequences())})   "
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
        "node. Each column is a round; a node sits at the round that kept its last unit, and a complete "
        "item ends in an 'end' box at the round that kept its end (the round the tables give).</p>",
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
