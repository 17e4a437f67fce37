"""The ``triehh`` command: one module per subcommand (``plan`` in its room with one module per
protocol's report; ``measure`` holds evaluate and audit, ``inspect`` show and ledger);
``dispatch`` assembles them. Importing this package imports none of them: ``entry``, the
executable, first makes Ctrl-C only remembered, then imports the commands (0.3-1 s), so that an
interrupt while they load ends as any other, in the one line and exit 130; ``main`` and
``build_parser`` are imported on first use (PEP 562)."""

from triehh_beam import lazy_exports
from triehh_beam.cli import interrupts

__all__ = ["build_parser", "entry", "main"]

__getattr__, __dir__ = lazy_exports(__name__, {"build_parser": "triehh_beam.cli.dispatch",
                                                "main": "triehh_beam.cli.dispatch"})


def entry() -> None:
    """The ``triehh`` executable (``dispatch.entry``), with SIGINT remembered before the commands
    are imported rather than raised inside their imports."""
    interrupts.record_only()
    from triehh_beam.cli import dispatch  # the commands, Beam's options and SciPy's planners

    dispatch.entry()
