"""The one-pass releases beside the rounds: whole-item sample-and-threshold, partition selection,
a noisy prefix round and the frequency estimates. Imports the base and ``samples``."""
