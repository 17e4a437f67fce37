"""A discovery per event-time window in one graph: the windows and their gate, each window's
census, rounds and estimates. Imports every room of ``beam`` before it."""
