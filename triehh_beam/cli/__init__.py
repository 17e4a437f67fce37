"""The ``triehh`` command: one module per subcommand; ``main`` dispatches."""

from triehh_beam.cli.main import build_parser, entry, main

__all__ = ["build_parser", "entry", "main"]
