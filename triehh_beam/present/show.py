"""A discovery's published result as text for a person (``triehh show``): a summary of the job,
the heavy hitters as a table, the frequent prefixes apart with why each stopped, and the trie's
radix view (``render_tree``); a whole-item release shows its released items instead
(``show_release``). The rounds publish no counts, so nothing here is a ranking by frequency: entries
are listed in the order the discovery found them (``ORDER``), with each entry's noisy estimate
and 95% interval beside it when the job released frequency estimates.
"""

from __future__ import annotations

import datetime
from typing import List, Mapping, Optional, Sequence, Tuple

from triehh_beam.present.result import (HEAVY_HITTERS_NAME, TRIE_NAME, Entry, PublishedResult, display,
                                        is_whole_item_release, node_label)
from triehh_beam.present.show_release import whole_item_lines
from triehh_beam.present.text import columns, wrap
from triehh_beam.protocol.items.encoding import ItemKind, Units
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.protocol.rounds.trie import RadixNode, Trie

__all__ = [
    "FREQUENT_PREFIX_NOTE",
    "ITEM_MARK",
    "ORDER",
    "PREFIX_MARK",
    "render_text",
    "render_tree",
    "summary_lines",
    "table",
]

# How entries are listed, said once for the command's help, the text and the HTML page.
ORDER = (
    "The rounds publish no counts, so this is not a ranking by frequency: entries are listed in "
    "the order the discovery found them, by round (an item of k units is found in round k+1, "
    "when its end is kept), then alphabetically ignoring case, then by code point"
)
ORDER_WITH_ESTIMATES = (
    "Listed in the order the discovery found them, by round, then alphabetically ignoring case, "
    "then by code point; not ranked by the estimates (noisy counts released after the rounds)"
)
NOISY_COUNTS_NOTE = (
    "estimates: each entry's noisy count from its round (noisy prefix rounds: its votes plus discrete "
    "Laplace noise, released because it reached the round's threshold, so biased upward near it); the "
    "interval is the noise's alone (+-{half_width:,} at 95%); a kept prefix may be held by nobody "
    "(at most false_prefixes of them per release in expectation)"
)
ORDER_WITH_NOISY_COUNTS = (
    "Listed in the order the discovery found them, by round, then alphabetically ignoring case, "
    "then by code point; not ranked by the noisy counts"
)
FREQUENT_PREFIX_NOTE = (
    "A frequent prefix is the start of items that together reached the threshold (TrieHH's "
    "theta, TrieHH++'s tau) in its round, but of which no single continuation (a next unit, or "
    "the end of an item) did in the next round: several items begin this way, none frequent "
    "enough on its own. It is not an item."
)
ESTIMATES_NOTE = (
    "estimates: weighted users of each entry, each user counted once, for one of its discovered "
    "entries drawn by its share of its records on them (the users holding the entry when each "
    "holds one discovered entry, fewer when holders spread their records), with two-sided "
    "geometric noise (epsilon_est={epsilon:g}): unbiased, may be negative; the 95% interval holds "
    "the weighted users, the users' draws and the noise both counted (the noise alone is "
    "+-{half_width:,})"
)
#: Results published before the intervals counted the users' draws (no ``quantity`` field).
ESTIMATES_NOTE_NOISE_ONLY = (
    "estimates: each user counted once, for one of its discovered entries drawn by its share of "
    "its records on them, with two-sided geometric noise (epsilon_est={epsilon:g}): unbiased for "
    "the weighted users (the users holding the entry only when each holds one discovered entry); "
    "this result's interval (+-{half_width:,}) covers the noise alone: it holds the release's exact "
    "count with probability {coverage:.2%}, not the weighted users when users hold several entries"
)
ITEM_MARK = "\u25cf"  # a complete item (heavy hitter)
PREFIX_MARK = "\u2026"  # a frequent prefix: the trie stops here, the items go on


def render_tree(trie: Trie) -> str:
    """The trie's radix view (chains of single-child nodes merged) as a text tree: each line a
    node's units; a complete item ends its line with ``●`` and the item, a frequent prefix with
    ``…`` and the prefix."""
    encoder = trie.encoder
    rows: List[Tuple[str, str]] = []

    def walk(node: RadixNode, lead: str, last: bool) -> None:
        branch = "\u2514\u2500 " if last else "\u251c\u2500 "
        right = ""
        if node.terminal:
            right = f"{ITEM_MARK} {display(encoder.decode(node.prefix + (encoder.eos,)), encoder)}"
        elif node.is_frequent_prefix:
            right = f"{PREFIX_MARK} {display(encoder.decode(node.prefix), encoder, complete=False)}"
        rows.append((lead + branch + node_label(node), right))
        below = lead + ("   " if last else "\u2502  ")
        for i, child in enumerate(node.children):
            walk(child, below, i == len(node.children) - 1)

    root = trie.radix()
    for i, child in enumerate(root.children):
        walk(child, "", i == len(root.children) - 1)
    if not rows:
        return "(empty trie: nothing was discovered)"
    lines = [f"(root)   {ITEM_MARK} complete item   {PREFIX_MARK} frequent prefix"]
    return "\n".join(lines + columns(rows, "<", indent=""))


def _when(created_at: str) -> str:
    try:
        moment = datetime.datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        return str(created_at)
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _joined(*parts: str) -> str:
    return ", ".join(part for part in parts if part)


def _sample_threshold(privacy: Mapping, per: str = "") -> str:
    """A sample-and-threshold release's tau and p_s (``per``: " per round"), a missing one left out."""
    tau, p_s = privacy.get("tau", privacy.get("theta")), privacy.get("sample_probability")
    return _joined(f"tau={tau}" if tau is not None else "",
                   f"p_s={100 * float(p_s):.4g}%{per}" if p_s is not None else "")


def _rounds_parameters(privacy: Mapping, max_length: int) -> str:
    """A trie's protocol parameters as ``discover`` prints them: TrieHH++'s tau and p_s per round,
    or TrieHH's theta and rule; a value the document lacks is left out, never shown as None."""
    if privacy.get("protocol") == Protocol.TRIEHH_PP or privacy.get("tau") is not None:
        return "TrieHH++: " + _joined(_sample_threshold(privacy, " per round"), f"L={max_length}")
    theta, rule = privacy.get("theta"), privacy.get("rule")
    return _joined(f"theta={theta}" if theta is not None else "", f"L={max_length}",
                   f"rule {rule}" if rule else "")


def summary_lines(result: PublishedResult) -> List[str]:
    """What the result is: the files, the job, its privacy target, the rounds and the encoding."""
    document, encoder, trie = result.document, result.encoder, result.trie
    unit = {ItemKind.TEXT: "character", ItemKind.BYTES: "byte", ItemKind.INT: "bit"}[encoder.kind]
    units = f"{encoder.unit_size} {unit}{'' if encoder.unit_size == 1 else 's'}"
    lines = [f"read: {', '.join(result.sources)}"]
    if document is None:
        lines.append(f"job: not recorded in {TRIE_NAME} (its privacy target, rounds and stop "
                     f"reason are in {HEAVY_HITTERS_NAME})")
    else:
        privacy = document.get("privacy", {})
        lines.append(f"job: {str(document.get('job_id', '?'))[:8]}, started "
                     f"{_when(document.get('created_at'))}")
        if str(privacy.get("guarantee", "")).startswith("none"):
            target = "NO DP GUARANTEE (theta and m fixed outside Theorem 1)"
        elif privacy.get("population_public"):
            target = (f"({privacy['epsilon']:.4g}, {privacy['delta']:.3g})-DP, user level, "
                      f"n={privacy['population']:,} declared public")
        else:
            target = (f"within the target ({privacy['target_epsilon']:.4g}, "
                      f"{privacy['target_delta']:.3g})-DP, user level")
        if privacy.get("protocol") == Protocol.NOISY_ROUNDS:
            lines.append(f"privacy: {target}; noisy prefix rounds: every user votes, discrete Laplace per round "
                         f"(epsilon {privacy.get('round_epsilon'):.4g}), alphabet {privacy.get('alphabet')!r}, "
                         f"{privacy.get('accounting')} composition, L={encoder.max_length}")
        elif privacy.get("protocol") == Protocol.PARTITION_SELECTION:
            lines.append(f"privacy: {target}; one partition-selection release: up to "
                         f"{privacy.get('max_items_per_user')} items per user, selection epsilon "
                         f"{privacy.get('selection_epsilon'):.4g}, counts epsilon {privacy.get('count_epsilon'):.4g}")
        elif is_whole_item_release(document):
            lines.append(f"privacy: {target}; one whole-item sample-and-threshold release: "
                         f"{_sample_threshold(privacy)}")
        else:
            lines.append(f"privacy: {target}; {_rounds_parameters(privacy, encoder.max_length)}")
        if privacy.get("estimate_epsilon"):
            lines.append(f"         + frequency estimates, epsilon_est={privacy['estimate_epsilon']:.4g} "
                         f"(total target epsilon {privacy['total_target_epsilon']:.4g}, basic composition)")
        lines.append(f"rounds: {document.get('rounds_run')} run, stopped: {document.get('stop_reason')}")
    kind = encoder.kind.value + (", case folded" if encoder.case_fold else "") + (
        ", tokenized into words" if encoder.tokenizer_id else "")
    lines.append(f"items: {kind}; units of {units}; the trie has {trie.node_count:,} nodes in "
                 f"{trie.depth} levels")
    return lines


def table(entries: Sequence[Entry], heading: str, why=None,
          estimates: Optional[Mapping[Units, Tuple[int, int, int]]] = None) -> List[str]:
    """An aligned table of entries: position, the entry, the round found, complete or not, with
    ``estimates`` each entry's estimate and its 95% interval and, for prefixes, ``why(entry)``."""
    rows = [("#", heading, "round", "complete") + (("estimate", "95% interval") if estimates else ())
            + (("why it stops there",) if why else ())]
    for i, entry in enumerate(entries, start=1):
        row = (str(i), entry.text, str(entry.round), "yes" if entry.complete else "no")
        if estimates:
            estimate, low, high = estimates[entry.sequence]
            row += (f"{estimate:,}", f"{low:,} to {high:,}")
        rows.append(row + ((why(entry),) if why else ()))
    return columns(rows, "><><" + ("><" if estimates else ""))


def render_text(result: PublishedResult, tree: bool = True) -> str:
    """The whole result as text: summary, heavy hitters, frequent prefixes and the trie (a
    whole-item release: its items with their counts and estimates; it has no trie)."""
    if is_whole_item_release(result.document):
        return "\n".join(summary_lines(result)[:-1] + whole_item_lines(result.document, result.encoder))
    items, prefixes = result.heavy_hitters(), result.frequent_prefixes()
    estimates = result.estimates()
    lines = summary_lines(result)
    if estimates and "noisy_rounds" in result.document:
        lines += wrap(NOISY_COUNTS_NOTE.format(**result.document["noisy_rounds"]), indent="")
    elif estimates:
        block = result.document["frequency_estimates"]
        note = ESTIMATES_NOTE if "quantity" in block else ESTIMATES_NOTE_NOISE_ONLY
        lines += wrap(note.format(**block), indent="")
    lines += ["", f"{len(items)} heavy hitter{'' if len(items) == 1 else 's'} (complete items):"]
    noisy = bool(estimates) and "noisy_rounds" in result.document
    lines += wrap((ORDER_WITH_NOISY_COUNTS if noisy else ORDER_WITH_ESTIMATES if estimates else ORDER) + ".")
    if items:
        lines += table(items, "item", estimates=estimates)
    lines += ["", f"{len(prefixes)} frequent prefix{'' if len(prefixes) == 1 else 'es'} (not items):"]
    if prefixes:
        lines += wrap(FREQUENT_PREFIX_NOTE)
        lines += table(prefixes, "prefix", result.why_stopped, estimates=estimates)
    if tree:
        lines += ["", "the trie (radix view: chains of single-child nodes merged):", render_tree(result.trie)]
    return "\n".join(lines)

