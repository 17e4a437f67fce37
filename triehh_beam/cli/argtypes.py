"""argparse argument types shared by the command-line entry points.

Each returns the parsed value or raises ``argparse.ArgumentTypeError`` with a one-line message,
which argparse turns into ``triehh <command>: error: argument --x: <message>`` (exit code 2).
"""

from __future__ import annotations

import argparse
import math

from triehh_beam.protocol import parameters

__all__ = ["delta", "epsilon", "finite_float", "non_negative_int", "population", "positive_int"]


def population(text: str) -> int:
    """An integer number of users; ``1e5`` and ``100_000`` are accepted."""
    try:
        value = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise argparse.ArgumentTypeError(f"must be a whole number of users, got {text!r}")
        value = int(as_float)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    if value > parameters.MAX_POPULATION:
        raise argparse.ArgumentTypeError(f"must be <= 2^53, got {value}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


def epsilon(text: str) -> float:
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def delta(text: str) -> float:
    value = finite_float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value
