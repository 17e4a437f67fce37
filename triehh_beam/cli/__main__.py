"""``python -m triehh_beam.cli``: the ``triehh`` command."""

from triehh_beam.cli import entry

entry()
