"""A round and the trie it grows: the vote, count-and-prune (per user and columnar), the immutable
trie, the round loop the driver and the simulation share, and the wire formats. Imports the base,
``items`` and ``randomness``."""
