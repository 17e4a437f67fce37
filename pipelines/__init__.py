"""Beam entry points run from a checkout (``python -m pipelines.discover``); not installed: the
installed ones live in ``triehh_beam.cli`` (``triehh-pipeline``)."""
