"""The server's trie of discovered prefixes (docs/protocol.md §1, step 4): an immutable ``Trie``
holding, for each round, the prefixes it kept (``with_level`` returns one level deeper), from
which the frontier broadcast is cut, which the driver commits after every round and a job
publishes (never counts), persisted with ``to_bytes``/``from_bytes`` and read with the checks of
:mod:`triehh_beam.protocol.rounds.wire`; ``radix`` gives the path-compressed view."""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple, Union

from triehh_beam.proto import trie_pb2, vote_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder, Unit, Units, is_terminated
from triehh_beam.protocol.rounds.wire import (SCHEMA_VERSION, TrieFormatError, as_prefix, check_version,
                                              encoding_from_proto, encoding_to_proto, parse_message,
                                              unit_from_bytes)

__all__ = ["RadixNode", "Trie"]


# ---------------------------------------------------------------------------------------------
# The radix view.


@dataclasses.dataclass(frozen=True)
class RadixNode:
    """A node of the path-compressed trie: a chain of single-child, non-terminal trie nodes
    merged into one.

    Attributes:
      units: the units this node adds to its parent's path (``()`` for the root); never holds
        the terminator.
      prefix: the full path from the root to the end of this node, without terminator.
      terminal: the path is a discovered item (the trie holds ``prefix + (EOS,)``).
      children: the branches below, ordered by their units.
      label: the units joined into one str/bytes.
    """

    units: Units
    prefix: Units
    terminal: bool
    children: Tuple["RadixNode", ...]
    label: Union[str, bytes]

    @property
    def is_frequent_prefix(self) -> bool:
        """A leaf that is not an item: the trie stopped growing here before a terminator."""
        return not self.children and not self.terminal and bool(self.prefix)


# ---------------------------------------------------------------------------------------------
# The trie.


class Trie:
    """An immutable trie of discovered prefixes, built one level per round.

    Build with :meth:`empty` and :meth:`with_level`; read with :attr:`levels`,
    :meth:`frontier`, :meth:`heavy_hitters` and :meth:`frequent_prefixes`. Two tries are equal
    when they have the same encoder and the same levels.
    """

    __slots__ = ("_encoder", "_levels")

    def __init__(self, encoder: ItemEncoder, levels: Iterable[Iterable[Units]] = ()):
        """A trie with the given levels, each validated as :meth:`with_level` does.

        Args:
          encoder: how items become sequences; fixes the unit type, size and ``max_length``.
          levels: level 1, level 2, ...: each an iterable of prefixes of that length.

        Raises:
          ValueError: as :meth:`with_level`.
        """
        if not isinstance(encoder, ItemEncoder):
            raise TypeError(f"encoder must be an ItemEncoder, got {type(encoder).__name__}")
        trie = Trie._trusted(encoder, ())
        for level in levels:
            trie = trie.with_level(level)
        object.__setattr__(self, "_encoder", encoder)
        object.__setattr__(self, "_levels", trie._levels)

    @classmethod
    def _trusted(cls, encoder: ItemEncoder, levels: Tuple[FrozenSet[Units], ...]) -> "Trie":
        """A trie from already-validated levels (no copy, no check)."""
        trie = object.__new__(cls)
        object.__setattr__(trie, "_encoder", encoder)
        object.__setattr__(trie, "_levels", levels)
        return trie

    @classmethod
    def empty(cls, encoder: ItemEncoder) -> "Trie":
        """The trie before round 1: no levels; its frontier is the empty prefix."""
        return cls(encoder)

    def __setattr__(self, name, value):
        raise AttributeError("Trie is immutable; with_level returns a new trie")

    def __reduce__(self):
        # Pickling (Beam side inputs, multiprocessing) goes around the immutability guard.
        return (Trie._trusted, (self._encoder, self._levels))

    # -- structure ----------------------------------------------------------------------------

    @property
    def encoder(self) -> ItemEncoder:
        return self._encoder

    @property
    def levels(self) -> Tuple[FrozenSet[Units], ...]:
        """``levels[r - 1]`` holds the length-``r`` prefixes, ``r = 1..depth``."""
        return self._levels

    @property
    def depth(self) -> int:
        """The number of levels: the rounds that added something."""
        return len(self._levels)

    @property
    def node_count(self) -> int:
        """The number of prefixes in the trie (the root not counted)."""
        return sum(len(level) for level in self._levels)

    def level(self, r: int) -> FrozenSet[Units]:
        """The length-``r`` prefixes, ``r = 0..depth`` (level 0 is ``{()}``, the root)."""
        if not 0 <= r <= self.depth:
            raise IndexError(f"level {r} outside 0..{self.depth}")
        return frozenset({()}) if r == 0 else self._levels[r - 1]

    def __contains__(self, prefix) -> bool:
        prefix = tuple(prefix)
        return 0 < len(prefix) <= self.depth and prefix in self._levels[len(prefix) - 1]

    def frontier(self) -> FrozenSet[Units]:
        """The prefixes the next round's votes extend (docs/protocol.md §1, step 2).

        The deepest level's prefixes that are not terminated; ``{()}`` (the empty prefix) for
        the empty trie. Empty when every deepest prefix is terminated, or when the trie already
        has ``max_length`` levels (no sequence is longer, so no round follows).
        """
        if not self._levels:
            return frozenset({()})
        if self.depth >= self._encoder.max_length:
            return frozenset()
        return frozenset(p for p in self._levels[-1] if not is_terminated(p))

    def with_level(self, prefixes: Iterable[Sequence[Unit]]) -> "Trie":
        """A new trie with one more level: the prefixes a round kept.

        Args:
          prefixes: the length-``depth + 1`` prefixes (tuples of units), each extending a
            frontier prefix. Not modified; duplicates collapse.

        Raises:
          ValueError: the set is empty (a round that adds nothing ends the growth: the caller
            stops instead of adding an empty level, so ``depth`` always counts rounds that
            found something); the trie already has ``max_length`` levels; or a prefix has the
            wrong length, does not extend the frontier, or cannot come from the encoder (wrong
            unit type or size, misplaced terminator). The message names the prefix.
        """
        level = frozenset(as_prefix(p) for p in prefixes)
        r = self.depth + 1
        if not level:
            raise ValueError(
                f"level {r} is empty: a round that adds nothing ends the trie's growth; "
                "stop instead of adding it"
            )
        if r > self._encoder.max_length:
            raise ValueError(
                f"the trie already has max_length={self._encoder.max_length} levels; "
                "no sequence is longer"
            )
        frontier = self.frontier()
        for prefix in sorted(level, key=repr):  # a stable order for the error reported
            if len(prefix) != r:
                raise ValueError(f"prefix {prefix!r} has {len(prefix)} units, level {r} needs {r}")
            if prefix[:-1] not in frontier:
                why = "is terminated" if is_terminated(prefix[:-1]) else "is not in the trie"
                raise ValueError(
                    f"prefix {prefix!r} does not extend the frontier: its parent "
                    f"{prefix[:-1]!r} {why}"
                )
            problem = self._encoder.prefix_problem(prefix)
            if problem:
                raise ValueError(f"prefix {prefix!r} {problem}")
        return Trie._trusted(self._encoder, self._levels + (level,))

    # -- results ------------------------------------------------------------------------------

    def all_prefixes(self) -> List[Units]:
        """Every prefix in the trie, shortest first, each level sorted."""
        return [prefix for level in self._levels for prefix in sorted(level)]

    def heavy_hitter_sequences(self) -> List[Units]:
        """The terminated prefixes (complete sequences, terminator included), sorted."""
        return sorted(p for level in self._levels for p in level if is_terminated(p))

    def heavy_hitters(self) -> List[Union[str, bytes]]:
        """The discovered items, decoded (terminator stripped), sorted."""
        return sorted(self._encoder.decode(p) for p in self.heavy_hitter_sequences())

    def frequent_prefix_sequences(self) -> List[Units]:
        """The non-terminated leaves: prefixes no later round extended, sorted.

        These include the frontier of a trie whose growth stopped (or reached ``max_length``),
        and prefixes of long items truncated at ``max_length``.
        """
        leaves = []
        for r, level in enumerate(self._levels, start=1):
            extended = (
                {p[:-1] for p in self._levels[r]} if r < self.depth else frozenset()
            )
            leaves.extend(p for p in level if not is_terminated(p) and p not in extended)
        return sorted(leaves)

    def frequent_prefixes(self) -> List[Union[str, bytes]]:
        """The non-terminated leaves, decoded, sorted."""
        return sorted(self._encoder.decode(p) for p in self.frequent_prefix_sequences())

    # -- radix view ---------------------------------------------------------------------------

    def radix(self) -> RadixNode:
        """The path-compressed trie, for display and export.

        Terminators become the ``terminal`` flag of the node they end; a chain of nodes each
        with a single child and not terminal is merged into one node.
        """
        children: Dict[Units, List[Units]] = {(): []}
        terminal = set()
        for level in self._levels:
            for prefix in sorted(level):
                if is_terminated(prefix):
                    terminal.add(prefix[:-1])
                else:
                    children.setdefault(prefix[:-1], []).append(prefix)
                    children.setdefault(prefix, [])

        def build(start: Units, parent: Units) -> RadixNode:
            end = start
            while end not in terminal and len(children[end]) == 1:
                end = children[end][0]
            units = end[len(parent):]
            return RadixNode(
                units=units,
                prefix=end,
                terminal=end in terminal,
                children=tuple(build(child, end) for child in children[end]),
                label=self._encoder.decode(units),
            )

        return RadixNode(
            units=(),
            prefix=(),
            terminal=False,
            children=tuple(build(child, ()) for child in children[()]),
            label=self._encoder.decode(()),
        )

    def render(self, indent: str = "  ") -> str:
        """An indented text picture of :meth:`radix`, one node per line.

        Labels are Python literals (``'ab'``, ``b'\\x00a'``), so spaces, ``$``, control
        characters and bytes are unambiguous; ``[item]`` marks a discovered item and
        ``[prefix]`` a frequent prefix (a leaf that is not an item).
        """
        lines = ["<root>"]

        def walk(node: RadixNode, depth: int) -> None:
            mark = " [item]" if node.terminal else (" [prefix]" if node.is_frequent_prefix else "")
            lines.append(f"{indent * depth}{node.label!r}{mark}")
            for child in node.children:
                walk(child, depth + 1)

        for child in self.radix().children:
            walk(child, 1)
        return "\n".join(lines)

    # -- protobuf -----------------------------------------------------------------------------

    def _ordered_levels(self) -> List[List[Units]]:
        """Each level's prefixes in wire order: by (parent's index, unit bytes)."""
        to_bytes = self._encoder.unit_to_bytes
        ordered: List[List[Units]] = []
        index = {(): 0}
        for level in self._levels:
            nodes = sorted(level, key=lambda p: (index[p[:-1]], to_bytes(p[-1])))
            index = {p: i for i, p in enumerate(nodes)}
            ordered.append(nodes)
        return ordered

    def to_proto(self) -> trie_pb2.Trie:
        """The trie as a ``triehh_beam.Trie`` message (the same trie gives the same bytes)."""
        message = trie_pb2.Trie(
            schema_version=SCHEMA_VERSION,
            encoding=encoding_to_proto(self._encoder),
            depth=self.depth,
        )
        to_bytes = self._encoder.unit_to_bytes
        previous = {(): 0}
        for nodes in self._ordered_levels():
            message.levels.add(
                parents=[previous[p[:-1]] for p in nodes],
                units=[to_bytes(p[-1]) for p in nodes],
            )
            previous = {p: i for i, p in enumerate(nodes)}
        return message

    @classmethod
    def from_proto(cls, message: trie_pb2.Trie, source: str = "<Trie message>") -> "Trie":
        """The trie a ``triehh_beam.Trie`` message describes.

        Args:
          message: the message; not modified.
          source: where it came from (a file name), named in errors.

        Raises:
          TrieFormatError: unknown schema version, missing or invalid encoding, a level count
            that does not match ``depth`` (a truncated file), a parent index out of range, a
            child of a terminated node, a duplicate node, a unit that is not valid for the
            encoding, or an empty level.
        """
        check_version(message.schema_version, source)
        if not message.HasField("encoding"):
            raise TrieFormatError(source, "no encoding")
        encoder = encoding_from_proto(message.encoding, source)
        if not message.HasField("depth") or message.depth != len(message.levels):
            declared = message.depth if message.HasField("depth") else "no depth"
            raise TrieFormatError(
                source,
                f"{len(message.levels)} levels but depth {declared} (truncated or corrupt)",
            )
        if message.depth > encoder.max_length:
            raise TrieFormatError(
                source, f"depth {message.depth} exceeds max_length={encoder.max_length}"
            )
        levels: List[FrozenSet[Units]] = []
        previous: List[Units] = [()]
        for r, level in enumerate(message.levels, start=1):
            if len(level.parents) != len(level.units):
                raise TrieFormatError(
                    source,
                    f"level {r} has {len(level.parents)} parents for {len(level.units)} units",
                )
            if not level.units:
                raise TrieFormatError(source, f"level {r} is empty")
            nodes: List[Units] = []
            seen = set()
            for i, (parent_index, raw) in enumerate(zip(level.parents, level.units)):
                where = f"level {r} node {i}"
                if parent_index >= len(previous):
                    raise TrieFormatError(
                        source,
                        f"{where}: parent index {parent_index} out of range "
                        f"(level {r - 1} has {len(previous)} nodes)",
                    )
                parent = previous[parent_index]
                if is_terminated(parent):
                    raise TrieFormatError(
                        source, f"{where}: extends the terminated prefix {parent!r}"
                    )
                prefix = parent + (unit_from_bytes(encoder, raw, source, where),)
                problem = encoder.prefix_problem(prefix)
                if problem:
                    raise TrieFormatError(source, f"{where}: prefix {prefix!r} {problem}")
                if prefix in seen:
                    raise TrieFormatError(source, f"{where}: duplicate prefix {prefix!r}")
                seen.add(prefix)
                nodes.append(prefix)
            levels.append(frozenset(nodes))
            previous = nodes
        return cls._trusted(encoder, tuple(levels))

    def to_bytes(self) -> bytes:
        """The serialized ``triehh_beam.Trie`` message (deterministic)."""
        return self.to_proto().SerializeToString(deterministic=True)

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<Trie bytes>") -> "Trie":
        """Inverse of :meth:`to_bytes`.

        Raises:
          TrieFormatError: the bytes do not parse, or as :meth:`from_proto`; the message names
            ``source``.
        """
        return cls.from_proto(parse_message(trie_pb2.Trie, data, source), source)

    def frontier_to_proto(self, round_index: Optional[int] = None) -> vote_pb2.FrontierBroadcast:
        """The ``FrontierBroadcast`` a server sends before round ``depth + 1``.

        Args:
          round_index: the round the broadcast opens; defaults to ``depth + 1``, the only
            round this frontier belongs to (given as a check against off-by-one callers).

        Raises:
          ValueError: ``round_index`` is not ``depth + 1``, or the trie already has
            ``max_length`` levels (no round follows).
        """
        expected = self.depth + 1
        if expected > self._encoder.max_length:
            raise ValueError(
                f"the trie has max_length={self._encoder.max_length} levels: no round follows"
            )
        if round_index is None:
            round_index = expected
        if round_index != expected:
            raise ValueError(
                f"a depth-{self.depth} trie opens round {expected}, not round {round_index}"
            )
        to_bytes = self._encoder.unit_to_bytes
        prefixes = sorted(tuple(to_bytes(u) for u in p) for p in self.frontier())
        return vote_pb2.FrontierBroadcast(
            schema_version=SCHEMA_VERSION,
            round_index=round_index,
            encoding=encoding_to_proto(self._encoder),
            prefixes=[vote_pb2.Prefix(units=p) for p in prefixes],
            prefix_count=len(prefixes),
        )

    # -- value semantics ----------------------------------------------------------------------

    def __eq__(self, other):
        if not isinstance(other, Trie):
            return NotImplemented
        return self._encoder == other._encoder and self._levels == other._levels

    def __hash__(self):
        return hash((self._encoder, self._levels))

    def __repr__(self):
        items = self.heavy_hitters()
        shown = ", ".join(repr(item) for item in items[:5]) + (", ..." if len(items) > 5 else "")
        e = self._encoder
        return (
            f"Trie(depth={self.depth}, nodes={self.node_count}, "
            f"heavy_hitters=[{shown}], frontier={len(self.frontier())}, "
            f"encoder=ItemEncoder(kind={e.kind.value!r}, unit_size={e.unit_size}, "
            f"max_length={e.max_length}, case_fold={e.case_fold}))"
        )
