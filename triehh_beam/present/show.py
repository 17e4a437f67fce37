"""A discovery's published result, read back and rendered for a person (``triehh show``).

``load_result`` reads an output directory (``heavy_hitters.json`` and ``trie.pb``, checked
against each other) or either file alone: the trie from ``trie.pb``, or rebuilt from the JSON's
items and frequent prefixes (every node of the trie is a prefix of one of them), the job's
target, rounds and stop reason from the JSON. ``render_text`` lays out what a person needs: the
heavy hitters as a table, the frequent prefixes apart with why each stopped, and the trie's
radix view (``render_tree``). TrieHH publishes no counts, so nothing here is a ranking by
frequency: entries are listed in the order the discovery found them (``ORDER``); a job run with
``--estimate-frequencies`` published each entry's noisy estimate of its weighted users and the
95% interval of them, shown beside it. Only the
published files are read, never the private state, so this is safe on a published result.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import textwrap
import unicodedata
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from triehh_beam.protocol.encoding import ItemEncoder, ItemKind, Units
from triehh_beam.protocol.messages import TrieFormatError
from triehh_beam.protocol.tokenize import TOKENIZER_ID
from triehh_beam.protocol.trie import RadixNode, Trie

__all__ = [
    "HEAVY_HITTERS_NAME",
    "ORDER",
    "TRIE_NAME",
    "Entry",
    "PublishedResult",
    "ResultError",
    "display",
    "entry_order",
    "load_result",
    "ordered_items",
    "render_text",
    "render_tree",
    "summary_lines",
    "table",
    "trie_from_document",
]

HEAVY_HITTERS_NAME = "heavy_hitters.json"
TRIE_NAME = "trie.pb"
RELEASED_MARKER = "_RELEASED"  # a window's last file (job.windowed, which imports Beam)

# How entries are listed, said once for the command's help, the text and the HTML page.
ORDER = (
    "TrieHH publishes no counts, so this is not a ranking by frequency: entries are listed in "
    "the order the discovery found them, by round (an item of k units is found in round k+1, "
    "when its end is kept), then alphabetically ignoring case, then by code point"
)
ORDER_WITH_ESTIMATES = (
    "Listed in the order the discovery found them, by round, then alphabetically ignoring case, "
    "then by code point; not ranked by the estimates (noisy counts released after the rounds)"
)
FREQUENT_PREFIX_NOTE = (
    "A frequent prefix is the start of items that together reached the threshold theta in "
    "its round, but of which no single continuation (a next unit, or the end of an item) did in "
    "the next round: several items begin this way, none frequent enough on its own. It is not "
    "an item."
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


class ResultError(ValueError):
    """A path that holds no readable result, or files that disagree; the message names them."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One discovered item or frequent prefix.

    Attributes:
      sequence: its units (a complete item ends with the terminator).
      value: the item (str, bytes or int) or, for a prefix, the decoded prefix (str, bytes,
        or for integers the bits as a str).
      complete: a discovered item (a heavy hitter), not a frequent prefix.
      round: the round that kept its last unit: ``len(sequence)``.
      text: how it is shown (``display``).
    """

    sequence: Units
    value: Union[str, bytes, int]
    complete: bool
    round: int
    text: str


@dataclasses.dataclass(frozen=True)
class PublishedResult:
    """A published result: the trie and, when it was read, ``heavy_hitters.json``.

    Attributes:
      trie: the discovered trie.
      document: the parsed ``heavy_hitters.json``, or None when only ``trie.pb`` was read.
      sources: the files read.
    """

    trie: Trie
    document: Optional[dict]
    sources: Tuple[str, ...]

    @property
    def encoder(self) -> ItemEncoder:
        return self.trie.encoder

    def heavy_hitters(self) -> List[Entry]:
        """The discovered items, in ``ORDER``."""
        sequences = self.trie.heavy_hitter_sequences()
        return sorted((_entry(s, self.encoder, True) for s in sequences), key=entry_order)

    def frequent_prefixes(self) -> List[Entry]:
        """The frequent prefixes (leaves that are not items), in ``ORDER``."""
        sequences = self.trie.frequent_prefix_sequences()
        return sorted((_entry(s, self.encoder, False) for s in sequences), key=entry_order)

    def estimates(self) -> Dict[Units, Tuple[int, int, int]]:
        """Each entry's (estimate, low, high) when the job released frequency estimates
        (``--estimate-frequencies``), by sequence; empty otherwise."""
        if self.document is None or "frequency_estimates" not in self.document:
            return {}
        found = {}
        for key, sequence_of in (("heavy_hitters", _item_sequence), ("frequent_prefixes", _prefix_sequence)):
            for value in self.document[key]:
                low, high = value["interval"]
                found[sequence_of(value, self.encoder)] = (value["estimate"], low, high)
        return found

    def why_stopped(self, entry: Entry) -> str:
        """Why the trie does not go on below a frequent prefix, in a few words."""
        if entry.round >= self.encoder.max_length:
            return f"reached L={self.encoder.max_length} units: longer items were cut there"
        return f"round {entry.round + 1} kept none of its continuations"


def entry_order(entry: Entry) -> Tuple[Any, ...]:
    """The sort key of ``ORDER``: round, then case-insensitive text, then code point (bytes as
    they are, integers by value)."""
    value = entry.value
    if isinstance(value, str):
        return (entry.round, 0, value.casefold(), value)
    if isinstance(value, bytes):
        return (entry.round, 1, value, value)
    return (entry.round, 2, value, value)


def display(value: Union[str, bytes, int], encoder: ItemEncoder, complete: bool = True) -> str:
    """An item or prefix as a person reads it, unambiguous about what it holds.

    Text as it is, unless it holds white space at an end or a character that does not print
    (then as a Python literal, ``'new york '``); bytes as hex, with the text when it is
    printable ASCII; integers as numbers; an integer prefix as its bits and the values it
    covers.
    """
    if isinstance(value, int):
        return str(value)
    if isinstance(value, bytes):
        shown = value.hex()
        if value and all(32 <= b < 127 for b in value) and value == value.strip():
            shown += f' ("{value.decode("ascii")}")'
        return shown
    if encoder.kind is ItemKind.INT and not complete:  # an integer prefix: its bits
        units = tuple(value[i:i + encoder.unit_size].encode("ascii")
                      for i in range(0, len(value), encoder.unit_size))
        low, high = encoder.prefix_range(units)
        return f"{value}\u2026 (values {low} to {high})"
    if value and value.isprintable() and value == value.strip():
        return value
    return repr(value)


def _entry(sequence: Units, encoder: ItemEncoder, complete: bool) -> Entry:
    value = encoder.decode(sequence)
    return Entry(sequence=sequence, value=value, complete=complete, round=len(sequence),
                 text=display(value, encoder, complete))


# ---------------------------------------------------------------------------------------------
# Reading.


def _is_remote(path: str) -> bool:
    return "://" in path


def _read(path: str) -> bytes:
    try:
        if _is_remote(path):  # gs://...: through Beam's FileSystems, imported only here
            from apache_beam.io.filesystems import FileSystems

            with FileSystems.open(path, compression_type="uncompressed") as f:
                return f.read()
        with open(path, "rb") as f:
            return f.read()
    except (OSError, IOError) as e:
        raise ResultError(f"{path}: cannot read it ({getattr(e, 'strerror', None) or e})") from None


def _check_released(path: str, exists) -> None:
    """A windowed job's window directory (``window=<start>``) is a result only once its
    ``_RELEASED`` marker (``job.windowed.RELEASED_MARKER``) is written after its files."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name.startswith("window=") and not exists(path.rstrip("/") + "/" + RELEASED_MARKER):
        raise ResultError(f"{path}: this window is not released (no {RELEASED_MARKER} marker yet): its "
                          "files may be partial; wait for the marker")


def _files_at(path: str) -> List[str]:
    """The result files ``path`` names: itself if it is a file, else the directory's (local
    paths, or any Beam filesystem: gs://)."""
    if _is_remote(path):
        from apache_beam.io.filesystems import FileSystems

        if FileSystems.exists(path) and not path.endswith("/"):
            return [path]
        _check_released(path, FileSystems.exists)
        inside = [FileSystems.join(path, name) for name in (HEAVY_HITTERS_NAME, TRIE_NAME)]
        found = [p for p in inside if FileSystems.exists(p)]
        if not found:
            raise ResultError(f"{path}: holds neither {HEAVY_HITTERS_NAME} nor {TRIE_NAME}, and is "
                              "no file")
        return found
    if os.path.isdir(path):
        _check_released(path, os.path.exists)
        inside = [os.path.join(path, name) for name in (HEAVY_HITTERS_NAME, TRIE_NAME)]
        found = [p for p in inside if os.path.isfile(p)]
        if not found:
            raise ResultError(f"{path}: holds neither {HEAVY_HITTERS_NAME} nor {TRIE_NAME} "
                              "(give the --output directory of triehh discover, or one of those files)")
        return found
    if os.path.isfile(path):
        return [path]
    raise ResultError(f"{path}: no such file or directory")


def _encoder_of(document: dict, source: str) -> ItemEncoder:
    """The encoder ``heavy_hitters.json`` records (its encoding and the plan's L)."""
    try:
        encoding = document["encoding"]
        return ItemEncoder(
            kind=ItemKind(encoding["kind"]),
            unit_size=int(encoding["unit_size"]),
            max_length=int(document["privacy"]["max_length"]),
            case_fold=bool(encoding.get("case_fold")),
            int_bits=encoding.get("int_bits"),
            tokenize=encoding.get("tokenizer") == TOKENIZER_ID,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ResultError(f"{source}: not a heavy_hitters.json of triehh-beam (its encoding: {e})") from None


def _chunks(value, size: int) -> Units:
    return tuple(value[i:i + size] for i in range(0, len(value), size))


def _sequence(item: Union[str, bytes, int], encoder: ItemEncoder) -> Units:
    """The sequence of a decoded item (as ``Trie.heavy_hitters`` gives it)."""
    if encoder.kind is ItemKind.INT:
        return encoder.units(item) + (encoder.eos,)
    return _chunks(item, encoder.unit_size) + (encoder.eos,)


def _item_sequence(value: Any, encoder: ItemEncoder) -> Units:
    """The sequence of a published item (text as is, bytes as hex, integers as numbers; with
    frequency estimates, under the entry's ``"item"``)."""
    if isinstance(value, dict):
        value = value["item"]
    return _sequence(bytes.fromhex(value) if encoder.kind is ItemKind.BYTES else value, encoder)


def ordered_items(items: Sequence[Union[str, bytes, int]], encoder: ItemEncoder) -> List[Entry]:
    """Decoded items (``Trie.heavy_hitters()``, a ``DiscoveryResult``'s) as entries in ``ORDER``."""
    return sorted((_entry(_sequence(item, encoder), encoder, True) for item in items), key=entry_order)


def _prefix_sequence(value: Any, encoder: ItemEncoder) -> Units:
    """The sequence of a published frequent prefix (integers: ``{"bits": ..., "range": ...}``;
    with frequency estimates, under the entry's ``"prefix"``)."""
    if isinstance(value, dict) and "prefix" in value:
        value = value["prefix"]
    if encoder.kind is ItemKind.INT:
        return _chunks(value["bits"].encode("ascii"), encoder.unit_size)
    if encoder.kind is ItemKind.BYTES:
        value = bytes.fromhex(value)
    return _chunks(value, encoder.unit_size)


def trie_from_document(document: dict, source: str = HEAVY_HITTERS_NAME) -> Trie:
    """The trie ``heavy_hitters.json`` describes: every prefix of its items and frequent
    prefixes, level by level (each node of a trie is a prefix of one of its leaves, and the
    leaves are exactly the items and the frequent prefixes).

    Raises:
      ResultError: the document is not a result of this package, or its entries cannot form a
        trie of its encoding; the message names ``source``.
    """
    encoder = _encoder_of(document, source)
    try:
        leaves = [_item_sequence(v, encoder) for v in document["heavy_hitters"]]
        leaves += [_prefix_sequence(v, encoder) for v in document["frequent_prefixes"]]
        depth = max((len(s) for s in leaves), default=0)
        levels = [{s[:r] for s in leaves if len(s) >= r} for r in range(1, depth + 1)]
        return Trie(encoder, levels)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ResultError(f"{source}: its items do not form a trie ({e})") from None


def _same_entries(trie: Trie, document: dict) -> bool:
    rebuilt = trie_from_document(document)
    return rebuilt.levels == trie.levels and rebuilt.encoder == trie.encoder


def load_result(path: str) -> PublishedResult:
    """Reads a published result: an output directory, its ``heavy_hitters.json`` or its
    ``trie.pb``, local or on any Beam filesystem (``gs://``). In a directory both files are read
    (at least one must be there) and must describe the same trie; a file is read alone.

    Raises:
      ResultError: nothing readable at ``path``, a file that is not a result, or two files
        that disagree (from two different jobs); the message names the files.
    """
    found = _files_at(path)
    document = trie = None
    for source in found:
        data = _read(source)
        if data[:1] == b"{":
            try:
                document = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ResultError(f"{source}: not valid JSON ({e})") from None
            if not isinstance(document, dict) or "heavy_hitters" not in document:
                raise ResultError(f"{source}: not a heavy_hitters.json of triehh-beam")
        else:
            try:
                trie = Trie.from_bytes(data, source)
            except TrieFormatError as e:
                raise ResultError(str(e)) from None
    if trie is None:
        trie = trie_from_document(document, found[0])
    elif document is not None and not _same_entries(trie, document):
        raise ResultError(f"{found[0]} and {found[1]} describe different tries (files of two "
                          "different jobs?)")
    return PublishedResult(trie=trie, document=document, sources=tuple(found))


# ---------------------------------------------------------------------------------------------
# Text.


def _width(text: str) -> int:
    """Terminal columns ``text`` takes (wide East Asian characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _label(node: RadixNode, encoder: ItemEncoder) -> str:
    label = node.label
    if isinstance(label, bytes):
        return label.hex()
    if label and label.isprintable() and label == label.strip():
        return label
    return repr(label)


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
        rows.append((lead + branch + _label(node, encoder), right))
        below = lead + ("   " if last else "\u2502  ")
        for i, child in enumerate(node.children):
            walk(child, below, i == len(node.children) - 1)

    root = trie.radix()
    for i, child in enumerate(root.children):
        walk(child, "", i == len(root.children) - 1)
    if not rows:
        return "(empty trie: nothing was discovered)"
    width = max(_width(left) for left, _ in rows) + 2
    lines = [f"(root)   {ITEM_MARK} complete item   {PREFIX_MARK} frequent prefix"]
    lines += [(_pad(left, width) + right).rstrip() for left, right in rows]
    return "\n".join(lines)


def _when(created_at: str) -> str:
    try:
        moment = datetime.datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        return str(created_at)
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


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
        if is_whole_item_release(document):
            lines.append(f"privacy: {target}; one whole-item sample-and-threshold release: tau="
                         f"{privacy.get('tau', privacy.get('theta'))}, p_s={100 * float(privacy.get('sample_probability') or 0):.4g}%")
        else:
            lines.append(f"privacy: {target}; theta={privacy.get('theta')}, L={encoder.max_length}, "
                         f"rule {privacy.get('rule')}")
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
    columns = 6 if estimates else 4
    rows = [("#", heading, "round", "complete") + (("estimate", "95% interval") if estimates else ())
            + (("why it stops there",) if why else ())]
    for i, entry in enumerate(entries, start=1):
        row = (str(i), entry.text, str(entry.round), "yes" if entry.complete else "no")
        if estimates:
            estimate, low, high = estimates[entry.sequence]
            row += (f"{estimate:,}", f"{low:,} to {high:,}")
        rows.append(row + ((why(entry),) if why else ()))
    widths = [max(_width(row[c]) for row in rows) for c in range(columns)]
    lines = []
    for row in rows:
        cells = [row[0].rjust(widths[0]), _pad(row[1], widths[1]), row[2].rjust(widths[2]), _pad(row[3], widths[3])]
        if estimates:
            cells += [row[4].rjust(widths[4]), _pad(row[5], widths[5])]
        lines.append(("  " + "  ".join(cells + list(row[columns:]))).rstrip())
    return lines


def _wrap(text: str, indent: str = "  ", width: int = 96) -> List[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent)


def is_whole_item_release(document: Optional[Mapping]) -> bool:
    """A ``--protocol sample-threshold`` result: released items with counts, no trie."""
    return bool(document) and document.get("privacy", {}).get("protocol") == "sample-threshold"


def render_text(result: PublishedResult, tree: bool = True) -> str:
    """The whole result as text: summary, heavy hitters, frequent prefixes and the trie (a
    whole-item release: its items with their counts and estimates; it has no trie)."""
    if is_whole_item_release(result.document):
        from triehh_beam.present.show_release import whole_item_lines

        return "\n".join(summary_lines(result)[:-1] + whole_item_lines(result.document, result.encoder))
    items, prefixes = result.heavy_hitters(), result.frequent_prefixes()
    estimates = result.estimates()
    lines = summary_lines(result)
    if estimates:
        block = result.document["frequency_estimates"]
        note = ESTIMATES_NOTE if "quantity" in block else ESTIMATES_NOTE_NOISE_ONLY
        lines += _wrap(note.format(**block), indent="")
    lines += ["", f"{len(items)} heavy hitter{'' if len(items) == 1 else 's'} (complete items):"]
    lines += _wrap((ORDER_WITH_ESTIMATES if estimates else ORDER) + ".")
    if items:
        lines += table(items, "item", estimates=estimates)
    lines += ["", f"{len(prefixes)} frequent prefix{'' if len(prefixes) == 1 else 'es'} (not items):"]
    if prefixes:
        lines += _wrap(FREQUENT_PREFIX_NOTE)
        lines += table(prefixes, "prefix", result.why_stopped, estimates=estimates)
    if tree:
        lines += ["", "the trie (radix view: chains of single-child nodes merged):", render_tree(result.trie)]
    return "\n".join(lines)
