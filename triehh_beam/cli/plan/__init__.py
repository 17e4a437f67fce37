"""``triehh plan``: the command and one module per protocol's report, on one shared layout.
Imports the base of ``cli``."""
