"""The server's trie of discovered prefixes, and its wire formats.

A :class:`Trie` holds, for each round ``r = 1..depth``, the set of length-``r`` prefixes that
round kept (docs/protocol.md §1, step 4). Prefixes are tuples of units as defined by
:mod:`triehh_beam.protocol.encoding`: a prefix ending with the empty end-of-sequence unit is
*terminated* (a complete item, a heavy hitter) and is never extended.

The trie is immutable: :meth:`Trie.with_level` returns a new trie one level deeper. It is what
the driver commits after every round, what the frontier broadcast is cut from, and what a job
publishes (the trie itself, never counts).

Wire formats (``protos/triehh_beam/proto/``): :meth:`Trie.to_bytes` / :meth:`Trie.from_bytes`
for the persisted and published trie, :meth:`Trie.frontier_to_proto` /
:func:`frontier_from_proto` for the message a server broadcasts before a round, and
:func:`vote_to_proto` / :func:`vote_from_proto` for the one vote a device sends back. Readers
check everything (schema version, encoding, unit shapes, structure) and refuse a bad message
with :class:`TrieFormatError`, whose text names the source (a file name, an endpoint).

Pure Python, no Beam.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple, Union

from google.protobuf import message as _message

from triehh_beam.protocol.encoding import ItemEncoder, ItemKind, Unit, Units, is_terminated
from triehh_beam.proto import trie_pb2, vote_pb2
from triehh_beam.protocol.tokenize import TOKENIZER_ID

__all__ = [
    "SCHEMA_VERSION",
    "FrontierBroadcast",
    "RadixNode",
    "Trie",
    "TrieFormatError",
    "Vote",
    "encoding_from_proto",
    "encoding_to_proto",
    "frontier_from_bytes",
    "frontier_from_proto",
    "vote_from_bytes",
    "vote_from_proto",
    "vote_to_proto",
]

# The version written into every Trie, FrontierBroadcast and Vote message; readers refuse any
# other. Bump it when a change to the messages means an old reader would misread a new message.
SCHEMA_VERSION = 1

_KIND_TO_PROTO = {
    ItemKind.TEXT: trie_pb2.Encoding.TEXT,
    ItemKind.BYTES: trie_pb2.Encoding.BYTES,
    ItemKind.INT: trie_pb2.Encoding.INT,
}
_KIND_FROM_PROTO = {value: kind for kind, value in _KIND_TO_PROTO.items()}


class TrieFormatError(ValueError):
    """A Trie, FrontierBroadcast or Vote message is unreadable, of an unknown version or
    inconsistent.

    Attributes:
      source: what the message was read from (a file name, a device endpoint), named in the
        text.
    """

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


# ---------------------------------------------------------------------------------------------
# Prefix validation, shared by Trie.with_level and every reader.


def _prefix_problem(prefix: Units, encoder: ItemEncoder) -> Optional[str]:
    """Why ``prefix`` cannot be a prefix of a sequence ``encoder`` makes, or None if it can
    (the encoder knows its own rules: ``ItemEncoder.prefix_problem``)."""
    return encoder.prefix_problem(prefix)


def _as_prefix(prefix) -> Units:
    """A caller's prefix as a tuple (rejecting a bare str/bytes, which would split silently)."""
    if isinstance(prefix, (str, bytes, bytearray)):
        raise ValueError(f"a prefix is a tuple of units, got {type(prefix).__name__} {prefix!r}")
    return tuple(prefix)


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
        level = frozenset(_as_prefix(p) for p in prefixes)
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
            problem = _prefix_problem(prefix, self._encoder)
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
        _check_version(message.schema_version, source)
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
                prefix = parent + (_unit_from_bytes(encoder, raw, source, where),)
                problem = _prefix_problem(prefix, encoder)
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
        return cls.from_proto(_parse(trie_pb2.Trie, data, source), source)

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


# ---------------------------------------------------------------------------------------------
# Encoding, frontier and vote messages.


def encoding_to_proto(encoder: ItemEncoder) -> trie_pb2.Encoding:
    """The ``triehh_beam.Encoding`` message for ``encoder``."""
    return trie_pb2.Encoding(
        kind=_KIND_TO_PROTO[encoder.kind],
        unit_size=encoder.unit_size,
        max_length=encoder.max_length,
        case_fold=encoder.case_fold,
        int_bits=encoder.int_bits or 0,
        tokenizer=encoder.tokenizer_id or "",
    )


def encoding_from_proto(
    message: trie_pb2.Encoding, source: str = "<Encoding message>"
) -> ItemEncoder:
    """The encoder an ``Encoding`` message describes.

    Raises:
      TrieFormatError: an unspecified or unknown kind, or parameters ItemEncoder refuses.
    """
    if message.kind not in _KIND_FROM_PROTO:
        raise TrieFormatError(source, f"unknown or unspecified encoding kind {message.kind}")
    if message.tokenizer not in ("", TOKENIZER_ID):
        raise TrieFormatError(source, f"unknown tokenizer {message.tokenizer!r}")
    try:
        return ItemEncoder(
            kind=_KIND_FROM_PROTO[message.kind],
            unit_size=message.unit_size,
            max_length=message.max_length,
            case_fold=message.case_fold,
            int_bits=message.int_bits or None,
            tokenize=message.tokenizer == TOKENIZER_ID,
        )
    except ValueError as error:
        raise TrieFormatError(source, f"invalid encoding: {error}") from error


@dataclasses.dataclass(frozen=True)
class FrontierBroadcast:
    """A parsed ``FrontierBroadcast``: what a device needs to vote in round ``round_index``.

    Attributes:
      round_index: the round, from 1.
      encoder: how the device must encode its items.
      prefixes: the length-``round_index - 1`` prefixes a vote may extend (``{()}`` in round 1).
    """

    round_index: int
    encoder: ItemEncoder
    prefixes: FrozenSet[Units]


def frontier_from_proto(
    message: vote_pb2.FrontierBroadcast, source: str = "<FrontierBroadcast message>"
) -> FrontierBroadcast:
    """Parses and checks a ``FrontierBroadcast`` message.

    Raises:
      TrieFormatError: unknown schema version, round 0, a missing or invalid encoding, a
        prefix count that does not match (truncated), a prefix of the wrong length, terminated
        or not valid for the encoding, or a duplicate prefix.
    """
    _check_version(message.schema_version, source)
    round_index = message.round_index
    if round_index < 1:
        raise TrieFormatError(source, "round_index 0 (rounds are numbered from 1)")
    if not message.HasField("encoding"):
        raise TrieFormatError(source, "no encoding")
    encoder = encoding_from_proto(message.encoding, source)
    if round_index > encoder.max_length:
        raise TrieFormatError(
            source, f"round_index {round_index} exceeds max_length={encoder.max_length}"
        )
    if not message.HasField("prefix_count") or message.prefix_count != len(message.prefixes):
        declared = message.prefix_count if message.HasField("prefix_count") else "no count"
        raise TrieFormatError(
            source,
            f"{len(message.prefixes)} prefixes but prefix_count {declared} (truncated or corrupt)",
        )
    prefixes = set()
    for i, raw in enumerate(message.prefixes):
        where = f"prefix {i}"
        prefix = _prefix_from_proto(encoder, raw, source, where)
        if len(prefix) != round_index - 1:
            raise TrieFormatError(
                source,
                f"{where} {prefix!r} has {len(prefix)} units, round {round_index} extends "
                f"prefixes of {round_index - 1}",
            )
        if is_terminated(prefix):
            raise TrieFormatError(source, f"{where} {prefix!r} is terminated")
        if prefix in prefixes:
            raise TrieFormatError(source, f"{where}: duplicate prefix {prefix!r}")
        prefixes.add(prefix)
    return FrontierBroadcast(round_index, encoder, frozenset(prefixes))


def frontier_from_bytes(
    data: bytes, source: str = "<FrontierBroadcast bytes>"
) -> FrontierBroadcast:
    """Parses a serialized ``FrontierBroadcast``; raises TrieFormatError as frontier_from_proto."""
    return frontier_from_proto(_parse(vote_pb2.FrontierBroadcast, data, source), source)


@dataclasses.dataclass(frozen=True)
class Vote:
    """A parsed ``Vote``: the length-``round_index`` prefix one device voted for."""

    round_index: int
    prefix: Units


def vote_to_proto(prefix: Sequence[Unit], round_index: int, encoder: ItemEncoder) -> vote_pb2.Vote:
    """The ``Vote`` message a device sends for ``prefix`` in round ``round_index``.

    Raises:
      ValueError: the prefix does not have ``round_index`` units or cannot come from
        ``encoder``.
    """
    prefix = _as_prefix(prefix)
    if round_index < 1 or len(prefix) != round_index:
        raise ValueError(f"a round-{round_index} vote needs {round_index} units, got {prefix!r}")
    problem = _prefix_problem(prefix, encoder)
    if problem:
        raise ValueError(f"prefix {prefix!r} {problem}")
    return vote_pb2.Vote(
        schema_version=SCHEMA_VERSION,
        round_index=round_index,
        prefix=vote_pb2.Prefix(units=[encoder.unit_to_bytes(u) for u in prefix]),
    )


def vote_from_proto(
    message: vote_pb2.Vote, encoder: ItemEncoder, source: str = "<Vote message>"
) -> Vote:
    """Parses and checks a ``Vote`` against the job's encoder.

    The server should drop (and count) votes this refuses, rather than fail the round: a
    device's message is untrusted input.

    Raises:
      TrieFormatError: unknown schema version, round 0, a prefix whose length is not the round
        index, or units not valid for the encoding.
    """
    _check_version(message.schema_version, source)
    if message.round_index < 1:
        raise TrieFormatError(source, "round_index 0 (rounds are numbered from 1)")
    prefix = _prefix_from_proto(encoder, message.prefix, source, "prefix")
    if len(prefix) != message.round_index:
        raise TrieFormatError(
            source,
            f"prefix {prefix!r} has {len(prefix)} units, a round-{message.round_index} vote "
            f"needs {message.round_index}",
        )
    return Vote(message.round_index, prefix)


def vote_from_bytes(data: bytes, encoder: ItemEncoder, source: str = "<Vote bytes>") -> Vote:
    """Parses a serialized ``Vote``; raises TrieFormatError as vote_from_proto."""
    return vote_from_proto(_parse(vote_pb2.Vote, data, source), encoder, source)


# ---------------------------------------------------------------------------------------------
# Reading helpers.


def _check_version(version: int, source: str) -> None:
    if version != SCHEMA_VERSION:
        found = "no schema_version" if version == 0 else f"schema_version {version}"
        raise TrieFormatError(
            source, f"{found}; this reader understands schema_version {SCHEMA_VERSION}"
        )


def _parse(message_type, data: bytes, source: str):
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    message = message_type()
    try:
        message.ParseFromString(bytes(data))
    except _message.DecodeError as error:
        raise TrieFormatError(
            source, f"not a {message_type.DESCRIPTOR.full_name} message ({error})"
        ) from error
    return message


def _unit_from_bytes(encoder: ItemEncoder, raw: bytes, source: str, where: str) -> Unit:
    try:
        return encoder.unit_from_bytes(raw)
    except UnicodeDecodeError as error:
        raise TrieFormatError(
            source, f"{where}: unit {raw!r} is not UTF-8 ({error.reason})"
        ) from error


def _prefix_from_proto(
    encoder: ItemEncoder, message: vote_pb2.Prefix, source: str, where: str
) -> Units:
    prefix = tuple(_unit_from_bytes(encoder, raw, source, where) for raw in message.units)
    problem = _prefix_problem(prefix, encoder)
    if problem:
        raise TrieFormatError(source, f"{where} {prefix!r} {problem}")
    return prefix
