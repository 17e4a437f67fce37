"""What a released count estimates: the frequency estimates of a discovered trie's leaves and the
95% intervals of released counts. Imports the base, ``items``, ``randomness`` and ``rounds``."""
