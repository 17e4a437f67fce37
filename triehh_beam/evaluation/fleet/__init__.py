"""A simulated fleet of devices for federated rounds: one device client per user, what happens to
each invited device (drawn so that runs repeat), secure-aggregation sessions and ``triehh
federated simulate``. Imports the base of ``evaluation``."""
