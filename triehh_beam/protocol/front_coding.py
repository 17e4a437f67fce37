"""Front coding of a set of equal-length prefixes, the compact frontier of a federated round's
announcement (docs/federated_protocol.md). The prefixes (tuples of unit bytes, all ``width``
units long) are sorted, unit by unit; each is written as the number of leading units it shares
with the one before (0 for the first, and always the longest such run), then its remaining
units, each as a byte length and its bytes, the bytes of all units concatenated. The form is
canonical: one set has one coding, and ``front_decode`` refuses any other (an unsorted or
repeated prefix, a shorter shared run than possible, bytes or lengths left over). A frontier
of the demo words costs about 3 bytes a prefix against 18 as a list of ``Prefix`` messages
(benchmarks/federated_messages.py). Pure Python.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, List, Sequence, Tuple

__all__ = ["FrontCoded", "FrontCodingError", "front_code", "front_decode"]

BytesPrefix = Tuple[bytes, ...]


class FrontCodingError(ValueError):
    """A front-coded set is not the canonical coding of a set of ``width``-unit prefixes."""


@dataclasses.dataclass(frozen=True)
class FrontCoded:
    """A front-coded set of prefixes.

    Attributes:
      shared: per prefix, in sorted order, the units it shares with the previous prefix.
      unit_lengths: per written unit, in order, its length in bytes (>= 1).
      units: the written units' bytes, concatenated.
    """

    shared: Tuple[int, ...]
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
    return FrontCoded(tuple(shared), tuple(lengths), b"".join(parts))


def front_decode(shared: Sequence[int], unit_lengths: Sequence[int], units: bytes, width: int) -> List[BytesPrefix]:
    """The prefixes of ``width`` units a canonical front coding holds, in sorted order.

    Raises:
      FrontCodingError: a shared run longer than possible (or not 0 for the first prefix, or
        the whole prefix: a repeat), too few unit lengths or bytes, an empty unit, a prefix not
        after the previous one or not sharing the longest run, or lengths or bytes left over.
    """
    prefixes: List[BytesPrefix] = []
    previous: BytesPrefix = ()
    unit = offset = 0
    for i, common in enumerate(shared):
        if (i == 0 and common) or (i and common >= width):
            raise FrontCodingError(
                f"prefix {i} shares {common} units with the previous one (prefixes of {width} "
                f"units: the first shares 0, and none all of its units)")
        new = width - common
        if unit + new > len(unit_lengths):
            raise FrontCodingError(f"prefix {i}: {len(unit_lengths)} unit lengths are too few")
        written = []
        for length in unit_lengths[unit:unit + new]:
            if length < 1 or offset + length > len(units):
                raise FrontCodingError(f"prefix {i}: a unit of {length} bytes at byte {offset} of {len(units)}")
            written.append(units[offset:offset + length])
            offset += length
        unit += new
        prefix = previous[:common] + tuple(written)
        if i and prefix[common] <= previous[common]:
            raise FrontCodingError(
                f"prefix {i} does not come after prefix {i - 1}, or does not share the longest "
                f"run with it (not the canonical coding)")
        prefixes.append(prefix)
        previous = prefix
    if unit != len(unit_lengths) or offset != len(units):
        raise FrontCodingError(
            f"{len(unit_lengths) - unit} unit lengths and {len(units) - offset} unit bytes left over")
    return prefixes
