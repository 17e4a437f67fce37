"""``python -m pipelines.discover`` from a checkout (a runner that launches a module by name):
the installed Beam entry point ``triehh-pipeline``, ``triehh_beam.cli.pipeline``."""

import sys

from triehh_beam.cli.pipeline import DiscoveryOptions, config_from_options, main, options_from_argv, run

__all__ = ["DiscoveryOptions", "config_from_options", "main", "options_from_argv", "run"]

if __name__ == "__main__":
    sys.exit(main(prog="pipelines.discover"))
