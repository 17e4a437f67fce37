"""``triehh show`` and ``triehh ledger``: reading what jobs left, a published result or a
population's privacy ledger. Imports the base of ``cli``."""
