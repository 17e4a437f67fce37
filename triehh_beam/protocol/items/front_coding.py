"""Front coding of a set of equal-length prefixes, the compact frontier of a federated round's
announcement (docs/federated_protocol.md): sorted prefixes, each written as the units it shares
with the one before and then its own. The form is canonical: one set has one coding, and
``front_decode`` refuses any other."""

from __future__ import annotations

import dataclasses
from typing import Iterable, List, Tuple

__all__ = ["FrontCoded", "FrontCodingError", "front_code", "front_decode"]

BytesPrefix = Tuple[bytes, ...]


class FrontCodingError(ValueError):
    """A front-coded set is not the canonical coding of a set of ``width``-unit prefixes."""


@dataclasses.dataclass(frozen=True)
class FrontCoded:
    """A front-coded set of prefixes.

    Attributes:
      shared: per prefix, in sorted order, the units it shares with the previous prefix.
      unit_width: the byte length of every written unit when they all have the same (>= 1),
        else 0 (and when no unit is written).
      unit_lengths: when ``unit_width`` is 0, the byte length of each written unit, in order
        (>= 1); else empty.
      units: the written units' bytes, concatenated.
    """

    shared: Tuple[int, ...]
    unit_width: int
    unit_lengths: Tuple[int, ...]
    units: bytes


def front_code(prefixes: Iterable[BytesPrefix]) -> FrontCoded:
    """The canonical front coding of distinct prefixes of equal length (tuples of unit bytes).

    Raises:
      FrontCodingError: prefixes of different lengths, a repeated prefix, or an empty unit.
    """
    shared: List[int] = []
    lengths: List[int] = []
    parts: List[bytes] = []
    previous: BytesPrefix = ()
    for i, prefix in enumerate(sorted(prefixes)):
        if i and len(prefix) != len(previous):
            raise FrontCodingError(f"prefixes of {len(previous)} and {len(prefix)} units")
        if i and prefix == previous:
            raise FrontCodingError(f"prefix {prefix!r} is repeated")
        common = 0
        while common < len(previous) and prefix[common] == previous[common]:
            common += 1
        shared.append(common)
        for unit in prefix[common:]:
            if not unit:
                raise FrontCodingError(f"prefix {prefix!r} holds an empty unit")
            lengths.append(len(unit))
            parts.append(unit)
        previous = prefix
    if len(set(lengths)) == 1:
        return FrontCoded(tuple(shared), lengths[0], (), b"".join(parts))
    return FrontCoded(tuple(shared), 0, tuple(lengths), b"".join(parts))


def front_decode(coded: FrontCoded, width: int) -> List[BytesPrefix]:
    """The prefixes of ``width`` units a canonical front coding holds, in sorted order.

    Raises:
      FrontCodingError: a shared run longer than possible (or not 0 for the first prefix, or
        the whole prefix: a repeat), a width and lengths both given, or lengths all equal (a
        width would do), too few unit lengths or bytes, an empty unit, a prefix not after the
        previous one or not sharing the longest run, or lengths or bytes left over.
    """
    shared, units, unit_width, unit_lengths = coded.shared, coded.units, coded.unit_width, coded.unit_lengths
    if unit_width and unit_lengths:
        raise FrontCodingError("both a unit width and unit lengths (one or the other)")
    if len(set(unit_lengths)) == 1:
        raise FrontCodingError("unit lengths all equal where a unit width is written (not the canonical coding)")
    # The units written; with a width, as many as the bytes hold (never materialised per unit).
    available = len(units) // unit_width if unit_width else len(unit_lengths)
    prefixes: List[BytesPrefix] = []
    previous: BytesPrefix = ()
    unit = offset = 0
    for i, common in enumerate(shared):
        if (i == 0 and common) or (i and common >= width):
            raise FrontCodingError(
                f"prefix {i} shares {common} units with the previous one (prefixes of {width} "
                f"units: the first shares 0, and none all of its units)")
        new = width - common
        if unit + new > available:
            raise FrontCodingError(f"prefix {i}: the {available} units written are too few")
        parts = []
        for k in range(unit, unit + new):
            length = unit_width or unit_lengths[k]
            if length < 1 or offset + length > len(units):
                raise FrontCodingError(f"prefix {i}: a unit of {length} bytes at byte {offset} of {len(units)}")
            parts.append(units[offset:offset + length])
            offset += length
        unit += new
        prefix = previous[:common] + tuple(parts)
        if i and prefix[common] <= previous[common]:
            raise FrontCodingError(
                f"prefix {i} does not come after prefix {i - 1}, or does not share the longest "
                f"run with it (not the canonical coding)")
        prefixes.append(prefix)
        previous = prefix
    if unit != available or offset != len(units):
        raise FrontCodingError(f"{available - unit} units and {len(units) - offset} unit bytes left over")
    return prefixes
