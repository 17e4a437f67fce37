"""A ``triehh`` command run in the test's process, its output read from pytest's ``capsys``."""

from __future__ import annotations

from typing import Sequence, Tuple

from triehh_beam import cli

__all__ = ["run_cli"]


def run_cli(capsys, argv: Sequence[str]) -> Tuple[int, str, str]:
    """``cli.main(argv)``'s exit code and what it printed to stdout and stderr."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
