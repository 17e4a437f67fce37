"""Counts in words for the lines a job prints: ``counted(1, "round")`` is ``"1 round"``,
``counted(4, "round")`` ``"4 rounds"``, with thousands separated (``"1,200 records"``)."""

from __future__ import annotations

from typing import Optional

__all__ = ["counted"]


def counted(count: int, noun: str, plural: Optional[str] = None) -> str:
    """``count`` and ``noun``, in the singular for exactly one, else ``plural`` (default: ``noun``
    + ``"s"``); the count with thousands separators.

    Raises:
      ValueError: a count that is not a whole number of at least 0, or an empty noun.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"a count must be a whole number >= 0, got {count!r}")
    if not noun:
        raise ValueError("the counted noun cannot be empty")
    return f"{count:,} {noun if count == 1 else (plural or noun + 's')}"
