"""What a release spends, (epsilon, delta): Theorem 1 of TrieHH and its crowding bound, the
sample-and-threshold accountant of one round (the paper's and the exact one) and the composition
of L rounds. Imports only the base: accounting knows nothing of items or tries."""
