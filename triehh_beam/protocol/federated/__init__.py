"""Federated rounds, where devices keep their records: the round's messages, which devices a round
selects, the tally of what reached the server, and the estimate round. Imports the base,
``items``, ``randomness``, ``rounds`` and ``estimates``."""
