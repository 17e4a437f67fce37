"""A release's lifecycle, the one order in which everything is published: the plan recorded, the
census checked, committed, charged, then written (the publishable outputs and the private ones,
apart). Imports ``state`` and ``settings``."""
