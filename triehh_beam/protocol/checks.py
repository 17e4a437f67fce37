"""Argument checks the protocol's modules share: integers and finite reals with one-line
``ValueError`` messages that name the argument, and ``ConditionError``, the refusal of a theorem
whose conditions fail."""

from __future__ import annotations

import math
import numbers
from typing import Optional, Tuple

__all__ = ["ConditionError", "check_int", "check_real"]


def check_int(name: str, value, minimum: int, maximum: Optional[int] = None) -> int:
    """``value`` as an ``int`` in ``[minimum, maximum]``.

    Raises:
      ValueError: ``value`` is a bool, not an integer, or out of range (the message names ``name``).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_real(name: str, value) -> float:
    """``value`` as a finite ``float``.

    Raises:
      ValueError: ``value`` is a bool, not a real number, or not finite.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


class ConditionError(ValueError):
    """A theorem does not apply to these parameters (subclasses name the theorem).

    Attributes:
      violations: one line per failed condition, each naming the condition and the numbers.
    """

    theorem = "the theorem"

    def __init__(self, violations: Tuple[str, ...]):
        self.violations = tuple(violations)
        super().__init__(f"{self.theorem} does not apply: " + "; ".join(self.violations))
