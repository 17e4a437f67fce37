"""Secure aggregation of a federated round's votes (docs/federated_protocol.md, "Secure
aggregation"): Bonawitz et al.'s semi-honest protocol with dropout recovery, run within each
cohort of the round's selected devices. Shamir sharing over a prime field, the masks' key
agreement and pseudorandom expansion, the one-hot vote vector, the cohorts, and the device's and
the server's state machines; pure Python over PyCA ``cryptography`` and numpy, no I/O. Imports
the protocol's base, ``items`` and ``federated``."""
