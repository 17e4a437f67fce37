"""A discovery's published result read back (``triehh show``): ``load_result`` reads an output
directory (``heavy_hitters.json`` and ``trie.pb``, checked against each other) or either file
alone, rebuilding the trie from the JSON when ``trie.pb`` is absent; ``Entry`` and ``display`` say
how each item or frequent prefix reads. Entries come in the order the discovery found them (by
round, then ignoring case, then by code point: ``entry_order``). Only published files are read,
never the private state.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind, Units
from triehh_beam.protocol.items.tokenize import TOKENIZER_ID
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.protocol.rounds.trie import RadixNode, Trie
from triehh_beam.protocol.rounds.wire import TrieFormatError

__all__ = [
    "HEAVY_HITTERS_NAME",
    "TRIE_NAME",
    "WANTED",
    "Entry",
    "PublishedResult",
    "ResultError",
    "display",
    "entry_order",
    "is_whole_item_release",
    "item_sequence",
    "load_result",
    "node_label",
    "ordered_items",
    "prefix_sequence",
    "trie_from_document",
]

HEAVY_HITTERS_NAME = "heavy_hitters.json"
TRIE_NAME = "trie.pb"
RELEASED_MARKER = "_RELEASED"  # a window's last file (job.windows.windowed, which imports Beam)


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
        """The discovered items, in ``entry_order``."""
        sequences = self.trie.heavy_hitter_sequences()
        return sorted((_entry(s, self.encoder, True) for s in sequences), key=entry_order)

    def frequent_prefixes(self) -> List[Entry]:
        """The frequent prefixes (leaves that are not items), in ``entry_order``."""
        sequences = self.trie.frequent_prefix_sequences()
        return sorted((_entry(s, self.encoder, False) for s in sequences), key=entry_order)

    def estimates(self) -> Dict[Units, Tuple[int, int, int]]:
        """Each entry's (estimate, low, high) when the job released frequency estimates
        (``--estimate-frequencies``), or its noisy counts (``--protocol noisy-rounds``: the noise's
        interval), by sequence; empty otherwise."""
        if self.document is not None and "noisy_rounds" in self.document:
            block, found = self.document["noisy_rounds"], {}
            for key, sequence_of in (("heavy_hitters", item_sequence), ("frequent_prefixes", prefix_sequence)):
                for value in block[key]:
                    count = value["noisy_count"]
                    found[sequence_of(value, self.encoder)] = (count, count - block["half_width"],
                                                               count + block["half_width"])
            return found
        if self.document is None or "frequency_estimates" not in self.document:
            return {}
        found = {}
        for key, sequence_of in (("heavy_hitters", item_sequence), ("frequent_prefixes", prefix_sequence)):
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
    """The order the discovery found entries in: round, then case-insensitive text, then code point (bytes as
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


def node_label(node: RadixNode) -> str:
    """A radix node's own units as the tree views show them (bytes as hex; text as it is unless
    it has white space at an end or a character that does not print, then as a literal)."""
    label = node.label
    if isinstance(label, bytes):
        return label.hex()
    return label if label and label.isprintable() and label == label.strip() else repr(label)


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
    ``_RELEASED`` marker (``job.windows.windowed.RELEASED_MARKER``) is written after its files."""
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
        raise ResultError(f"{source}: not a heavy_hitters.json of triehh-beam (its encoding: {e}); "
                          f"{WANTED}") from None


def _chunks(value, size: int) -> Units:
    return tuple(value[i:i + size] for i in range(0, len(value), size))


def _sequence(item: Union[str, bytes, int], encoder: ItemEncoder) -> Units:
    """The sequence of a decoded item (as ``Trie.heavy_hitters`` gives it)."""
    if encoder.kind is ItemKind.INT:
        return encoder.units(item) + (encoder.eos,)
    return _chunks(item, encoder.unit_size) + (encoder.eos,)


def item_sequence(value: Any, encoder: ItemEncoder) -> Units:
    """The sequence of a published item (text as is, bytes as hex, integers as numbers; with
    frequency estimates, under the entry's ``"item"``)."""
    if isinstance(value, dict):
        value = value["item"]
    return _sequence(bytes.fromhex(value) if encoder.kind is ItemKind.BYTES else value, encoder)


def ordered_items(items: Sequence[Union[str, bytes, int]], encoder: ItemEncoder) -> List[Entry]:
    """Decoded items (``Trie.heavy_hitters()``, a ``DiscoveryResult``'s) as entries in the order the discovery found them (``entry_order``)."""
    return sorted((_entry(_sequence(item, encoder), encoder, True) for item in items), key=entry_order)


def prefix_sequence(value: Any, encoder: ItemEncoder) -> Units:
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
        leaves = [item_sequence(v, encoder) for v in document["heavy_hitters"]]
        leaves += [prefix_sequence(v, encoder) for v in document["frequent_prefixes"]]
        depth = max((len(s) for s in leaves), default=0)
        levels = [{s[:r] for s in leaves if len(s) >= r} for r in range(1, depth + 1)]
        return Trie(encoder, levels)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ResultError(f"{source}: its items do not form a trie ({e})") from None


def _same_entries(trie: Trie, document: dict) -> bool:
    rebuilt = trie_from_document(document)
    return rebuilt.levels == trie.levels and rebuilt.encoder == trie.encoder


WANTED = (f"triehh show wants the --output directory of triehh discover, or its {HEAVY_HITTERS_NAME} "
          f"or {TRIE_NAME}")


def _looks_like_json(data: bytes) -> bool:
    """A JSON document, whatever white space or byte-order mark comes before it."""
    return data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def _read_document(source: str, data: bytes) -> dict:
    """The parsed ``heavy_hitters.json`` at ``source``.

    Raises:
      ResultError: not JSON, or JSON of something else (an evaluation, any other document): one
        line saying what the file is and which file ``show`` wants.
    """
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultError(f"{source}: not valid JSON ({e}); {WANTED}") from None
    if isinstance(document, dict) and "heavy_hitters" in document:
        return document
    if isinstance(document, dict) and str(document.get("schema", "")).startswith("triehh-beam/evaluation/"):
        what = "an evaluation (triehh evaluate's evaluation.json: its report.html is beside it)"
    else:
        what = f"a JSON {'object' if isinstance(document, dict) else 'document'} with no heavy_hitters"
    raise ResultError(f"{source}: not a heavy_hitters.json of triehh-beam but {what}; {WANTED}")


def _read_trie(source: str, data: bytes) -> Trie:
    """The ``trie.pb`` at ``source``.

    Raises:
      ResultError: an empty file, a text file, or binary data that is no trie of a supported
        version: one line saying what the file is and which file ``show`` wants.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if not data:
        raise ResultError(f"{source}: not a result of triehh discover but an empty file; {WANTED}")
    if text is not None and all(c.isprintable() or c.isspace() for c in text):
        start = text.strip().splitlines()[0][:40] if text.strip() else ""
        raise ResultError(f"{source}: not a result of triehh discover but a text file (it starts {start!r}); "
                          f"{WANTED}")
    try:
        return Trie.from_bytes(data, source)
    except TrieFormatError as e:
        raise ResultError(f"{e}; {WANTED}") from None


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
        if _looks_like_json(data):
            document = _read_document(source, data)
        else:
            trie = _read_trie(source, data)
    if trie is None:
        trie = trie_from_document(document, found[0])
    elif document is not None and not _same_entries(trie, document):
        raise ResultError(f"{found[0]} and {found[1]} describe different tries (files of two "
                          "different jobs?)")
    return PublishedResult(trie=trie, document=document, sources=tuple(found))


def is_whole_item_release(document: Optional[Mapping]) -> bool:
    """A ``--protocol sample-threshold`` (or ``partition-selection``) result: released items, no trie."""
    return bool(document) and document.get("privacy", {}).get("protocol") in (
        Protocol.WHOLE_ITEMS, Protocol.PARTITION_SELECTION)
