"""Runnable Beam entry points (``python -m pipelines.discover``) built from the library; the library never imports them."""
