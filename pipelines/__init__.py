"""Runnable Beam entry points (``python -m pipelines.discover``) built from the library, which
never imports them."""
