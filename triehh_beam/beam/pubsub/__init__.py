"""Pub/Sub in Beam: messages parsed into record batches, the product's own unbounded read, and the
federated server's report log. Imports every room of ``beam`` before it."""
