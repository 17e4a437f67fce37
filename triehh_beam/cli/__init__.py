"""The ``triehh`` command: one module per subcommand (``plan`` in its room with one module per
protocol's report; ``measure`` holds evaluate and audit, ``inspect`` show and ledger);
``main`` dispatches."""

from triehh_beam.cli.main import build_parser, entry, main

__all__ = ["build_parser", "entry", "main"]
