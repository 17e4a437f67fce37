"""The canaries of a privacy audit: the items whose one extra holder makes the neighbouring
population D1 of the audited one D0. A canary is given (``--canary``, checked by
``check_canary``), or drawn at random from the audit's public seed among strings nobody holds
(``random_canary``), and every audit adds the worst case of ``worst_case_canary``: the most held
item that has at least two units, cut before its last unit, where nobody holds the cut item.
Its prefix is then one of the most voted, on the frontier in every round that leads to it, so
only its last unit (the terminator) separates the canary from what the population already
shows. ``canary_user_id`` names the extra user with an id the population does not use.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import AbstractSet, Iterable, Mapping, Optional, Tuple

import numpy as np

from triehh_beam.protocol.encoding import EncodingError, ItemEncoder, Units

__all__ = ["Canary", "CanaryError", "canary_user_id", "check_canary", "random_canary", "worst_case_canary"]

GIVEN, RANDOM, WORST_CASE = "given", "random", "worst-case"
# A random canary's length in units: short, so that audits run few rounds, and still one of
# 26^3 strings for units of one letter.
RANDOM_UNITS = 3
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


class CanaryError(ValueError):
    """A canary the audit cannot use (empty, too long for L, not text); the message says why."""


@dataclasses.dataclass(frozen=True)
class Canary:
    """One canary and the user that holds it in D1.

    Attributes:
      kind: ``"given"``, ``"random"`` or ``"worst-case"``.
      item: the item, normalised as the encoder does.
      sequence: its encoded sequence (terminator included).
      user_id: the id of the one user holding it in D1 (not an id of D0).
      note: how it was chosen, in a few words.
    """

    kind: str
    item: str
    sequence: Units
    user_id: bytes
    note: str


def check_canary(item: object, encoder: ItemEncoder) -> Tuple[str, Units]:
    """The normalised canary and its sequence.

    Raises:
      CanaryError: not text, empty, or longer than L allows (the message names the limit).
    """
    if not isinstance(item, str):
        raise CanaryError(f"a canary is a text item, got {type(item).__name__}")
    try:
        normal = encoder.normalize(item)
        return normal, encoder.encode(item)
    except EncodingError as e:  # empty, too long, a lone surrogate
        limit = encoder.max_item_units * encoder.unit_size
        raise CanaryError(f"canary {item!r} cannot be encoded ({e}): give a non-empty item of at most "
                          f"{limit} characters for --max-length {encoder.max_length}") from None


def random_canary(held: AbstractSet[str], encoder: ItemEncoder, seed: int) -> str:
    """A random string of lowercase letters that no user holds, from the public audit seed.

    Its length is ``RANDOM_UNITS`` units (fewer if L is smaller) of ``unit_size`` characters.

    Raises:
      CanaryError: every string tried is held (a population of every short string).
    """
    units = min(RANDOM_UNITS, encoder.max_item_units)
    rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(
        f"triehh-beam/audit/canary/{seed}".encode(), digest_size=8).digest(), "big"))
    for _ in range(1000):
        text = "".join(rng.choice(list(_LETTERS), size=units * encoder.unit_size))
        if encoder.normalize(text) not in held:
            return text
    raise CanaryError("no random canary: every string tried is held by some user; give --canary")


def worst_case_canary(ranking: Iterable[Tuple[str, int]], held: AbstractSet[str],
                      encoder: ItemEncoder) -> Optional[Tuple[str, str]]:
    """The worst-case canary: (canary, the item it is cut from), or None when there is none.

    Goes down ``ranking`` (items by users holding them, most first) to the first item of at
    least two units whose sequence without its last unit spells an item nobody holds.
    """
    for item, _ in ranking:
        try:
            sequence = encoder.encode(item)
        except EncodingError:
            continue
        if len(sequence) < 3:  # one unit and the terminator: nothing left to share
            continue
        cut = encoder.decode(sequence[:-2])
        if encoder.normalize(cut) not in held:
            return cut, item
    return None


def canary_user_id(existing: Mapping[bytes, object], kind: str) -> bytes:
    """An id for the canary's user that no user of the population has."""
    base = f"triehh-audit-canary-{kind}".encode()
    user_id, suffix = base, 0
    while user_id in existing:
        suffix += 1
        user_id = base + b"-" + str(suffix).encode()
    return user_id
