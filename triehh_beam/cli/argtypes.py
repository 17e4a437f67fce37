"""Argument types, the parser and usage errors shared by every ``triehh`` subcommand: a type
returns the parsed value or raises ``argparse.ArgumentTypeError`` with a one-line message, which
``ArgumentParser`` reports as ``triehh <command>: error: argument --x: <message> (see triehh
<command> --help)`` with exit code 2 (a mistyped flag is named with the closest real one; a
float flag takes finite numbers only); a runner that finds invalid arguments raises
``UsageError``, reported in one line with the same exit code."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

from triehh_beam.protocol.planning import parameters

__all__ = [
    "EXIT_USAGE",
    "ArgumentParser",
    "UsageError",
    "closest_flag",
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


def closest_flag(token: str, flags: Iterable[str]) -> Optional[str]:
    """The flag among ``flags`` closest to a mistyped or abbreviated ``token`` (``--epsilom``,
    ``--eps`` -> ``--epsilon``), or None when none is close."""
    name = token.split("=", 1)[0]
    extended = sorted(flag for flag in flags if flag.startswith(name))  # an abbreviation (--eps)
    close = difflib.get_close_matches(name, extended or sorted(flags), n=1, cutoff=0.0 if extended else 0.75)
    return close[0] if close else None


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block) and exit code 2; no abbreviated flags
    (``--eps`` is not ``--epsilon``: a prefix that matches today is ambiguous after the next
    flag); ``float`` flags refuse ``inf`` and ``nan``; an unknown flag is named first (before
    "required" errors it causes), with the closest flag this command defines."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("type", float, finite_float)

    def own_flags(self) -> List[str]:
        """Every option string this parser defines (``--epsilon``, ``-n``, ...)."""
        return [flag for action in self._actions for flag in action.option_strings]

    def unknown_flag_message(self, tokens: Sequence[str], beam_flags: Sequence[str] = ()) -> Optional[str]:
        """The one-line refusal of the first flag in ``tokens`` this parser does not define that
        is close to one it does (a typo, not a Beam option), or None. With ``beam_flags`` (Beam's
        pipeline options, for a command that passes them on) a typo closer to one of those is
        named as that one (``--runer``: ``--runner``, not ``--rule``)."""
        own = self.own_flags()
        for token in tokens:
            if not token.startswith("--") or token.split("=", 1)[0] in own:
                continue
            close = closest_flag(token, own)
            if close is None:
                continue
            either = closest_flag(token, [*own, *beam_flags])
            if either not in own:
                close = f"{either}, a Beam pipeline option"
            return f"unknown argument {token.split('=', 1)[0]} (did you mean {close}?)"
        return None

    def typo_message(self, tokens: Sequence[str]) -> Optional[str]:
        """``unknown_flag_message`` for this command: for one that passes unknown flags on to Beam
        (``accepts_beam_args``), a flag Beam defines is no typo and Beam's flags are candidates
        too (``--runer``: ``--runner``, whatever other error argparse found first)."""
        message = self.unknown_flag_message(tokens)
        if message is None or not self.get_default("accepts_beam_args"):
            return message
        from triehh_beam.beam.runners import pipeline_flags, unknown_pipeline_args  # Beam: on a typo only

        return self.unknown_flag_message(unknown_pipeline_args(tokens), pipeline_flags())

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102 (argparse API)
        self._tokens = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message):  # noqa: D102 (argparse API)
        self.refuse(self.typo_message(getattr(self, "_tokens", ())) or message)

    def refuse(self, line: str) -> None:
        """Exits with ``line`` as the one-line error, as it is (``error`` looks for a typo first)."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {line} (see {self.prog} --help)\n")


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
