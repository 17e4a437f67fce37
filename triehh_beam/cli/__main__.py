"""``python -m triehh_beam.cli``: the ``triehh`` command."""

import sys

from triehh_beam.cli.main import main

sys.exit(main())
