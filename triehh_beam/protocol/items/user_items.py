"""A user's records as the weighted sequences its vote draws from, by the one rule the central
pipeline and a federated device both apply: each record's item (or tokens) encoded, an item
longer than L units dropped or, with ``truncate``, cut to L units, what cannot be encoded
dropped, and each sequence weighted by the counts of the records that produced it."""

from __future__ import annotations

import dataclasses
import numbers
from typing import Dict, Iterable, Mapping, Tuple, Union

from triehh_beam.protocol.items.encoding import EncodingError, Item, ItemEncoder, ItemTooLongError, Units

__all__ = ["LONG_ITEM_POLICIES", "EncodedValue", "encode_value", "weighted_sequences"]

#: What happens to an item longer than L units: the central ``truncate_long_items`` setting
#: off ("drop", the paper's model) or on ("truncate").
LONG_ITEM_POLICIES = ("drop", "truncate")

Records = Union[Mapping[Item, int], Iterable[Tuple[Item, int]]]


@dataclasses.dataclass(frozen=True)
class EncodedValue:
    """What one record's value contributes.

    Attributes:
      sequences: the sequence of each item the value holds, in order (a repeated token repeats).
      too_long: items dropped for being longer than L units (never with ``truncate``).
      unencodable: items that could not be encoded, plus one for a value that holds no item
        (not text for a tokenising encoder, or no token at all): what the pipeline's
        ``items_unencodable`` counter adds per record.
    """

    sequences: Tuple[Units, ...]
    too_long: int
    unencodable: int


def encode_value(encoder: ItemEncoder, value: Item, truncate: bool) -> EncodedValue:
    """The sequences of one record's value (the module docstring's rule); never raises for a
    bad value or item: it is counted instead, as the pipeline counts it."""
    try:
        items = encoder.items_of(value)
    except EncodingError:
        items = []
    unencodable = 0 if items else 1
    too_long = 0
    encode = encoder.encode_truncated if truncate else encoder.encode
    sequences = []
    for item in items:
        try:
            sequences.append(encode(item))
        except ItemTooLongError:
            too_long += 1
        except EncodingError:
            unencodable += 1
    return EncodedValue(tuple(sequences), too_long, unencodable)


def _count(count) -> int:
    if type(count) is int and count >= 0:
        return count
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or int(count) < 0:
        raise ValueError(f"counts must be non-negative integers, got {count!r}")
    return int(count)


def weighted_sequences(encoder: ItemEncoder, records: Records, truncate: bool) -> Dict[Units, int]:
    """One user's sequences with their local counts: what ``vote.client_vote`` draws from.

    Args:
      encoder: the job's encoder.
      records: item -> local count, or (item, count) pairs (an item may repeat: counts add up).
      truncate: the long-item policy is "truncate" (else "drop").

    Returns:
      sequence -> the sum of its records' counts, sequences with a zero total left out.

    Raises:
      ValueError: a count that is not a non-negative integer.
    """
    pairs = records.items() if isinstance(records, Mapping) else records
    totals: Dict[Units, int] = {}
    for value, count in pairs:
        count = _count(count)
        if count:
            for sequence in encode_value(encoder, value, truncate).sequences:
                totals[sequence] = totals.get(sequence, 0) + count
    return totals
