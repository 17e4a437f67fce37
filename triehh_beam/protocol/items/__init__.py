"""Items as sequences of units: the encoder and its alphabet, the words-v1 tokenizer, front coding
of a frontier, and a user's records as the weighted sequences its vote draws from. Imports only
the protocol's base modules."""
