"""The rounds on their samples: a round's votes, its merge and prune per prefix, and the rounds in
order. Imports the base and ``samples``."""
