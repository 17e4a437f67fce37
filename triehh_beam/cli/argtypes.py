"""Argument types and usage errors shared by every ``triehh`` subcommand, written once.

Each type returns the parsed value or raises ``argparse.ArgumentTypeError`` with a one-line
message, which ``ArgumentParser`` turns into ``triehh <command>: error: argument --x: <message>
(see triehh <command> --help)`` with exit code 2; a runner that finds invalid arguments itself
raises ``UsageError``, which ``triehh`` reports in one line with the same exit code.
"""

from __future__ import annotations

import argparse
import math
from typing import Any, Callable, Tuple

from triehh_beam.protocol import parameters

__all__ = [
    "EXIT_USAGE",
    "ArgumentParser",
    "UsageError",
    "delta",
    "epsilon",
    "finite_float",
    "list_of",
    "non_negative_int",
    "population",
    "positive_int",
]

EXIT_USAGE = 2


class UsageError(Exception):
    """Invalid arguments found by a runner: one line on stderr, exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block) and exit code 2."""

    def error(self, message):  # noqa: D102 (argparse API)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def list_of(kind: Callable[[str], Any], name: str, check: Callable[[Any], bool],
            requirement: str) -> Callable[[str], Tuple[Any, ...]]:
    """A type for comma-separated values (``1,2,4``), each ``kind`` and passing ``check``."""

    def parse(text: str) -> Tuple[Any, ...]:
        values = []
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                value = kind(part)
            except ValueError:
                raise argparse.ArgumentTypeError(f"not a valid {name}: {part!r}") from None
            if isinstance(value, float) and not math.isfinite(value) or not check(value):
                raise argparse.ArgumentTypeError(f"each {name} must be {requirement}, got {part}")
            values.append(value)
        if not values:
            raise argparse.ArgumentTypeError(f"give at least one {name}")
        return tuple(values)

    return parse


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


def _integer(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _integer(text, 1)


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
    return _integer(text, 0)
