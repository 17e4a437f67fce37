"""Items as sequences of units, the alphabet of the trie (docs/protocol.md §1, "Items as sequences
of units"): ``ItemEncoder`` turns a text, bytes or integer item (or, with ``tokenize=True``, each
word of a text) into a tuple of units followed by the empty end-of-sequence unit, which no real
unit can equal; integers are offset-binary bit strings, so a frequent prefix is a frequent range
of values. It is the on-device encoder too."""

from __future__ import annotations

import dataclasses
import enum
import operator
import re
import unicodedata
from typing import List, Optional, Sequence, Tuple, Union

from triehh_beam.protocol.items.tokenize import TOKENIZER_ID, tokenize

__all__ = [
    "EOS_BYTES",
    "EOS_TEXT",
    "EmptyItemError",
    "EncodingError",
    "Item",
    "ItemEncoder",
    "ItemKind",
    "ItemTooLongError",
    "MAX_INT_BITS",
    "MAX_INT_UNIT_BITS",
    "TOKENIZER_ID",
    "Units",
    "is_terminated",
    "sequence_length",
]

Unit = Union[str, bytes]
# A sequence or a prefix of one: a tuple of units, possibly ending with the EOS unit.
Units = Tuple[Unit, ...]
# What an encoder encodes: text, bytes, or an integer (ItemKind.INT).
Item = Union[str, bytes, int]

EOS_TEXT = ""
EOS_BYTES = b""

MAX_INT_BITS = 64
MAX_INT_UNIT_BITS = 16
DEFAULT_INT_BITS = 64

_DECIMAL = re.compile(r"[+-]?[0-9]+")


class EncodingError(ValueError):
    """An item cannot be encoded under the configured encoding."""


class EmptyItemError(EncodingError):
    """The item is empty (after normalisation): there is nothing to discover."""


class ItemTooLongError(EncodingError):
    """The item needs more than ``max_length`` units (terminator included).

    Attributes:
      length: the number of units the item needs, terminator included.
      max_length: the configured maximum.
    """

    def __init__(self, length: int, max_length: int):
        super().__init__(
            f"item needs {length} units including the terminator, more than max_length={max_length}"
        )
        self.length = length
        self.max_length = max_length


class ItemKind(str, enum.Enum):
    TEXT = "text"
    BYTES = "bytes"
    INT = "int"


def is_terminated(units: Units) -> bool:
    """True when ``units`` ends with the end-of-sequence unit (a complete item)."""
    return bool(units) and len(units[-1]) == 0


def sequence_length(units: Units) -> int:
    """Length in units, the terminator included (what ``L`` bounds)."""
    return len(units)


@dataclasses.dataclass(frozen=True)
class ItemEncoder:
    """Turns items into unit sequences and back.

    Args:
      kind: ``ItemKind.TEXT`` (unicode strings, NFC-normalised), ``ItemKind.BYTES`` or
        ``ItemKind.INT`` (signed integers of ``int_bits`` bits in offset binary, each unit its
        bits as the ASCII digits ``b"0"``/``b"1"``).
      unit_size: characters (text), bytes (bytes) or bits (int, at most 16) per unit, k >= 1;
        the last unit may be shorter.
      max_length: L, the maximum sequence length in units, terminator included (L >= 2). For
        integers L is at most ``ceil(int_bits / unit_size) + 1`` (every value then fits, and a
        larger L would plan privacy budget for rounds that cannot add anything); a smaller L
        can only discover ranges (the high-order ``L`` units), with ``encode_truncated``.
      case_fold: text only; apply ``str.casefold`` after NFC (off by default).
      int_bits: integers only: the value width w, 1 to 64 (default 64); values must lie in
        ``[-2^(w-1), 2^(w-1) - 1]``. ``None`` (or 0) for other kinds.
      tokenize: text only: a record's item is text whose tokens are the items (``items_of``,
        rule ``TOKENIZER_ID``); off by default.

    Raises:
      ValueError: for a unit size below 1 (above 16 or ``int_bits`` for integers), L below 2
        (or too large for integers), an ``int_bits`` outside 1..64 or given for another kind,
        or case folding or tokenisation on items that are not text.
    """

    kind: ItemKind = ItemKind.TEXT
    unit_size: int = 1
    max_length: int = 10
    case_fold: bool = False
    int_bits: Optional[int] = None
    tokenize: bool = False

    def __post_init__(self):
        object.__setattr__(self, "kind", ItemKind(self.kind))
        if not isinstance(self.unit_size, int) or self.unit_size < 1:
            raise ValueError(f"unit_size must be an integer >= 1, got {self.unit_size!r}")
        if not isinstance(self.max_length, int) or self.max_length < 2:
            raise ValueError(
                f"max_length must be an integer >= 2 (one unit and the terminator), "
                f"got {self.max_length!r}"
            )
        if self.case_fold and self.kind is not ItemKind.TEXT:
            raise ValueError("case_fold applies to text items only")
        if self.tokenize and self.kind is not ItemKind.TEXT:
            raise ValueError("tokenize applies to text items only")
        if self.kind is not ItemKind.INT:
            if self.int_bits not in (None, 0):
                raise ValueError(f"int_bits applies to integer items only, not {self.kind.value}")
            object.__setattr__(self, "int_bits", None)
            return
        bits = DEFAULT_INT_BITS if self.int_bits is None else self.int_bits
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= MAX_INT_BITS:
            raise ValueError(f"int_bits must be an integer from 1 to {MAX_INT_BITS}, got {bits!r}")
        object.__setattr__(self, "int_bits", bits)
        if self.unit_size > min(MAX_INT_UNIT_BITS, bits):
            raise ValueError(
                f"unit_size for integers is in bits, 1 to {min(MAX_INT_UNIT_BITS, bits)} for "
                f"int_bits={bits}, got {self.unit_size}"
            )
        most = self.int_units + 1
        if self.max_length > most:
            raise ValueError(
                f"max_length={self.max_length} is more than {bits}-bit integers in units of "
                f"{self.unit_size} bits can use: every value is {self.int_units} units and the "
                f"terminator, so max_length is at most {most} (a larger L spends privacy budget "
                f"on rounds that cannot add anything)"
            )

    # ---- properties -----------------------------------------------------------------------

    @property
    def eos(self) -> Unit:
        return EOS_TEXT if self.kind is ItemKind.TEXT else EOS_BYTES

    @property
    def unit_type(self) -> type:
        """The Python type of a unit: ``str`` for text, ``bytes`` for bytes and integers."""
        return str if self.kind is ItemKind.TEXT else bytes

    @property
    def max_item_units(self) -> int:
        """Units an item may have before the terminator (``L - 1``)."""
        return self.max_length - 1

    @property
    def int_units(self) -> int:
        """Integers only: the units of every value, ``ceil(int_bits / unit_size)``."""
        self._require_int("int_units")
        return -(-self.int_bits // self.unit_size)

    @property
    def int_range(self) -> Tuple[int, int]:
        """Integers only: the smallest and largest value, ``(-2^(w-1), 2^(w-1) - 1)``."""
        self._require_int("int_range")
        half = 1 << (self.int_bits - 1)
        return -half, half - 1

    @property
    def tokenizer_id(self) -> str:
        """The tokenisation rule's name (``TOKENIZER_ID``) when ``tokenize`` is on, else ""."""
        return TOKENIZER_ID if self.tokenize else ""

    def _require_int(self, what: str) -> None:
        if self.kind is not ItemKind.INT:
            raise ValueError(f"{what} applies to integer items only, not {self.kind.value}")

    # ---- items ----------------------------------------------------------------------------

    def items_of(self, value: Item) -> List[Item]:
        """The items a record's value holds: its tokens when ``tokenize`` is on, else itself.

        A record ``(user, value, count)`` contributes ``count`` to each of them (a token that
        appears twice counts twice). With tokenisation the list may be empty.

        Raises:
          EncodingError: tokenisation of a value that is not a ``str``.
        """
        if not self.tokenize:
            return [value]
        if not isinstance(value, str):
            raise EncodingError(f"tokenised text items must be str, got {type(value).__name__}")
        return tokenize(value)

    def normalize(self, item: Item) -> Item:
        """The canonical form of an item: NFC (and case folding) for text, an int for integers.

        Integers may be given as ``int`` (or anything with ``__index__`` except ``bool``) or as
        decimal text (``"-42"``, ``" 7 "``; ASCII digits, an optional sign, nothing else).

        Raises:
          EncodingError: the item is of the wrong type for this encoder, or an integer outside
            ``int_range``.
        """
        if self.kind is ItemKind.TEXT:
            if not isinstance(item, str):
                raise EncodingError(f"text encoder expects str, got {type(item).__name__}")
            if item.isascii():
                # ASCII is already NFC, valid UTF-8, and casefolds to lower case: the common
                # case skips the Unicode tables (about 4 µs per item).
                return item.lower() if self.case_fold else item
            text = unicodedata.normalize("NFC", item)
            if self.case_fold:
                # casefold can produce non-NFC output (e.g. with combining marks): renormalise.
                text = unicodedata.normalize("NFC", text.casefold())
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise EncodingError("text item holds a lone surrogate (not valid UTF-8)") from None
            return text
        if self.kind is ItemKind.INT:
            return self._normalize_int(item)
        if not isinstance(item, (bytes, bytearray, memoryview)):
            raise EncodingError(f"bytes encoder expects bytes, got {type(item).__name__}")
        return bytes(item)

    def _normalize_int(self, item) -> int:
        if isinstance(item, bool):
            raise EncodingError("integer encoder expects an int, got bool")
        if isinstance(item, str):
            text = item.strip()
            if not _DECIMAL.fullmatch(text):
                raise EncodingError(f"integer encoder expects decimal digits, got {item!r}")
            value = int(text)
        else:
            try:
                value = operator.index(item)
            except TypeError:
                raise EncodingError(
                    f"integer encoder expects an int, got {type(item).__name__}"
                ) from None
        low, high = self.int_range
        if not low <= value <= high:
            raise EncodingError(
                f"{value} is outside the {self.int_bits}-bit range [{low}, {high}]"
            )
        return value

    def units(self, item: Item) -> Units:
        """The item's units, without the terminator and without a length check."""
        value = self.normalize(item)
        k = self.unit_size
        if self.kind is ItemKind.INT:
            bits = format(value - self.int_range[0], f"0{self.int_bits}b").encode("ascii")
            return tuple(bits[i : i + k] for i in range(0, len(bits), k))
        if not value:
            raise EmptyItemError("empty item")
        return tuple(value[i : i + k] for i in range(0, len(value), k))

    def encode(self, item: Item) -> Units:
        """The item's full sequence, terminator included.

        Raises:
          EmptyItemError: the item is empty.
          ItemTooLongError: the sequence would exceed ``max_length`` units; the caller decides
            whether to drop the item or to call ``encode_truncated``.
          EncodingError: the item has the wrong type (or is an integer out of range).
        """
        body = self.units(item)
        if len(body) + 1 > self.max_length:
            raise ItemTooLongError(len(body) + 1, self.max_length)
        return body + (self.eos,)

    def encode_truncated(self, item: Item) -> Units:
        """The sequence, or for a too-long item its first ``L`` units without terminator.

        A truncated item can only ever be discovered as a frequent prefix, never as a heavy
        hitter, since its sequence has no terminator.
        """
        body = self.units(item)
        if len(body) + 1 > self.max_length:
            return body[: self.max_length]
        return body + (self.eos,)

    def decode(self, units: Sequence[Unit]) -> Item:
        """The item (or prefix) a unit sequence spells, terminator stripped.

        For integers a terminated sequence decodes to its ``int``; anything else (a prefix, or
        a segment of one such as a radix-tree label) to its bits as a ``str`` of ``0``/``1``
        (``prefix_range`` gives the values a prefix covers).

        Raises:
          EncodingError: integers only: units that are not binary digits, or a terminated
            sequence that is not a whole value.
        """
        terminated = bool(units) and len(units[-1]) == 0
        body = units[:-1] if terminated else units
        if self.kind is ItemKind.TEXT:
            return "".join(body)
        joined = b"".join(body)
        if self.kind is ItemKind.BYTES:
            return joined
        if joined.strip(b"01"):
            raise EncodingError(f"integer units hold binary digits only, got {tuple(units)!r}")
        if not terminated:
            return joined.decode("ascii")
        problem = self.prefix_problem(tuple(units))
        if problem:
            raise EncodingError(f"{tuple(units)!r} is not an integer's sequence: it {problem}")
        return int(joined, 2) + self.int_range[0]

    def prefix_range(self, units: Sequence[Unit]) -> Tuple[int, int]:
        """Integers only: the smallest and largest value whose sequence starts with ``units``.

        ``()`` covers the whole ``int_range``; a prefix of ``j`` bits covers ``2^(w-j)``
        consecutive values; a whole value (terminated or not) covers itself: ``(v, v)``.

        Raises:
          ValueError: the encoder is not for integers.
          EncodingError: ``units`` cannot be a prefix of an integer's sequence.
        """
        self._require_int("prefix_range")
        units = tuple(units)
        problem = self.prefix_problem(units)
        if problem:
            raise EncodingError(f"{units!r} is not a prefix of an integer's sequence: it {problem}")
        bits = b"".join(units)
        free = self.int_bits - len(bits)
        low = (int(bits, 2) if bits else 0) << free
        offset = self.int_range[0]
        return low + offset, low + (1 << free) - 1 + offset

    def prefix_problem(self, prefix: Sequence[Unit]) -> Optional[str]:
        """Why ``prefix`` cannot be a prefix of a sequence this encoder makes, or None if it can.

        Every unit has the encoder's type and 1..unit_size characters/bytes, except the empty
        end-of-sequence unit, which may only come last and after at least one unit (no item is
        empty). Only an item's last unit can be short, so a short unit is followed by nothing
        or by the terminator. A prefix has at most ``max_length`` units. For integers, units
        hold only ``0``/``1`` digits, every unit but the value's last has exactly
        ``unit_size`` bits, and the terminator comes exactly after ``int_units`` units. (The
        phrase completes "prefix ...", as in ``Trie``'s messages.)
        """
        prefix = tuple(prefix)
        if len(prefix) > self.max_length:
            return f"has {len(prefix)} units, more than max_length={self.max_length}"
        unit_type = self.unit_type
        k = self.unit_size
        for i, unit in enumerate(prefix):
            if type(unit) is not unit_type:
                return f"unit {i} is {type(unit).__name__}, expected {unit_type.__name__}"
            if len(unit) > k:
                return f"unit {i} ({unit!r}) is longer than unit_size={k}"
            if not unit:
                if i != len(prefix) - 1:
                    return f"has the terminator at position {i}, before its end"
                if i == 0:
                    return "is the empty item (a terminator with no unit before it)"
            elif len(unit) < k and i + 1 < len(prefix) and prefix[i + 1]:
                return f"unit {i} ({unit!r}) is shorter than unit_size={k} but not the item's last"
        if self.kind is ItemKind.INT:
            return self._int_prefix_problem(prefix)
        return None

    def _int_prefix_problem(self, prefix: Units) -> Optional[str]:
        n, k = self.int_units, self.unit_size
        last = self.int_bits - k * (n - 1)
        for i, unit in enumerate(prefix):
            if not unit:
                if i != n:
                    return f"has the terminator after {i} units; an integer has {n}"
                continue
            if unit.strip(b"01"):
                return f"unit {i} ({unit!r}) holds something other than binary digits"
            if i >= n:
                return f"has more than the {n} units of a {self.int_bits}-bit integer"
            want = last if i == n - 1 else k
            if len(unit) != want:
                return (
                    f"unit {i} ({unit!r}) has {len(unit)} bits; unit {i} of an integer has {want}"
                )
        return None

    def unit_to_bytes(self, unit: Unit) -> bytes:
        """The wire form of a unit (UTF-8 for text; bytes and bit units as they are)."""
        return unit.encode("utf-8") if self.kind is ItemKind.TEXT else bytes(unit)

    def unit_from_bytes(self, raw: bytes) -> Unit:
        """Inverse of ``unit_to_bytes`` (bit units are checked by ``prefix_problem``)."""
        return raw.decode("utf-8") if self.kind is ItemKind.TEXT else bytes(raw)
