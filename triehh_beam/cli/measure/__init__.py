"""``triehh evaluate`` and ``triehh audit``: the commands that run jobs to judge them. Imports the
base of ``cli``."""
