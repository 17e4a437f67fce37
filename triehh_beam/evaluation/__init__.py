"""Evaluating TrieHH: utility metrics, the local-DP rival PEM, the reference simulation,
evaluation runs and their reports, and the bundled demo population."""
