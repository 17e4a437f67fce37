"""``triehh federated serve``: the server of rounds where devices keep their data, its state, its
report log, its secure-aggregation rounds and estimate round, and what it publishes. Imports every
room of ``job`` before it."""
