"""Pub/Sub without Beam: typed client helpers, the local emulator, the pull-and-acknowledge
reader, records from stream messages and the attributes of federated rounds. Imports the base and
``records``."""
