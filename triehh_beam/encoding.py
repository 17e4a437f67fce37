"""Items as sequences of units, the alphabet of the trie.

An item (a word, a URL, a byte string) becomes a *sequence*: a tuple of units followed by the
end-of-sequence unit. A unit is a non-empty ``str`` of up to ``unit_size`` characters (text
items) or a non-empty ``bytes`` of up to ``unit_size`` bytes (byte items). The end-of-sequence
unit is the *empty* unit (``""`` or ``b""``): every real unit holds at least one character or
byte, so no item can contain it or collide with it, whatever characters the item holds (``$``
included).

A prefix of length ``r`` is ``sequence[:r]``; tuples of ``str``/``bytes`` are hashable, compare
by value and pickle deterministically, which is what the trie, the votes and Beam's coders need.

This module is pure Python (no Beam import): it is the on-device encoder too.
"""

from __future__ import annotations

import dataclasses
import enum
import unicodedata
from typing import Sequence, Tuple, Union

__all__ = [
    "EOS_BYTES",
    "EOS_TEXT",
    "EmptyItemError",
    "EncodingError",
    "ItemEncoder",
    "ItemKind",
    "ItemTooLongError",
    "Units",
    "is_terminated",
    "sequence_length",
]

Unit = Union[str, bytes]
# A sequence or a prefix of one: a tuple of units, possibly ending with the EOS unit.
Units = Tuple[Unit, ...]

EOS_TEXT = ""
EOS_BYTES = b""


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
      kind: ``ItemKind.TEXT`` (unicode strings, NFC-normalised) or ``ItemKind.BYTES``.
      unit_size: characters (text) or bytes per unit, k >= 1; the last unit may be shorter.
      max_length: L, the maximum sequence length in units, terminator included (L >= 2).
      case_fold: text only; apply ``str.casefold`` after NFC (off by default).

    Raises:
      ValueError: for a unit size below 1, L below 2, or case folding on byte items.
    """

    kind: ItemKind = ItemKind.TEXT
    unit_size: int = 1
    max_length: int = 10
    case_fold: bool = False

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

    @property
    def eos(self) -> Unit:
        return EOS_TEXT if self.kind is ItemKind.TEXT else EOS_BYTES

    @property
    def max_item_units(self) -> int:
        """Units an item may have before the terminator (``L - 1``)."""
        return self.max_length - 1

    def normalize(self, item: Union[str, bytes]) -> Union[str, bytes]:
        """The canonical form of an item: NFC (and case folding) for text.

        Raises:
          EncodingError: the item is of the wrong type for this encoder.
        """
        if self.kind is ItemKind.TEXT:
            if not isinstance(item, str):
                raise EncodingError(f"text encoder expects str, got {type(item).__name__}")
            text = unicodedata.normalize("NFC", item)
            if self.case_fold:
                # casefold can produce non-NFC output (e.g. with combining marks): renormalise.
                text = unicodedata.normalize("NFC", text.casefold())
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise EncodingError("text item holds a lone surrogate (not valid UTF-8)") from None
            return text
        if not isinstance(item, (bytes, bytearray, memoryview)):
            raise EncodingError(f"bytes encoder expects bytes, got {type(item).__name__}")
        return bytes(item)

    def units(self, item: Union[str, bytes]) -> Units:
        """The item's units, without the terminator and without a length check."""
        value = self.normalize(item)
        if not value:
            raise EmptyItemError("empty item")
        k = self.unit_size
        return tuple(value[i : i + k] for i in range(0, len(value), k))

    def encode(self, item: Union[str, bytes]) -> Units:
        """The item's full sequence, terminator included.

        Raises:
          EmptyItemError: the item is empty.
          ItemTooLongError: the sequence would exceed ``max_length`` units; the caller decides
            whether to drop the item or to call ``encode_truncated``.
          EncodingError: the item has the wrong type.
        """
        body = self.units(item)
        if len(body) + 1 > self.max_length:
            raise ItemTooLongError(len(body) + 1, self.max_length)
        return body + (self.eos,)

    def encode_truncated(self, item: Union[str, bytes]) -> Units:
        """The sequence, or for a too-long item its first ``L`` units without terminator.

        A truncated item can only ever be discovered as a frequent prefix, never as a heavy
        hitter, since its sequence has no terminator.
        """
        body = self.units(item)
        if len(body) + 1 > self.max_length:
            return body[: self.max_length]
        return body + (self.eos,)

    def decode(self, units: Sequence[Unit]) -> Union[str, bytes]:
        """The item (or prefix) a unit sequence spells, terminator stripped."""
        body = units[:-1] if units and len(units[-1]) == 0 else units
        joiner = "" if self.kind is ItemKind.TEXT else b""
        return joiner.join(body)

    def unit_to_bytes(self, unit: Unit) -> bytes:
        """The wire form of a unit (UTF-8 for text), used by the protobuf messages."""
        return unit.encode("utf-8") if self.kind is ItemKind.TEXT else bytes(unit)

    def unit_from_bytes(self, raw: bytes) -> Unit:
        """Inverse of ``unit_to_bytes``."""
        return raw.decode("utf-8") if self.kind is ItemKind.TEXT else bytes(raw)
