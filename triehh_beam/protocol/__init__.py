"""The TrieHH protocol in plain Python, no Beam, no Arrow, no file I/O: it runs on a device, in
a simulation or inside any pipeline. Its rooms, lowest first: ``items`` (encoding, tokenising),
``randomness`` (keyed hashing, sampling, noise), ``rounds`` (the vote, counting, the trie, the
round loop, the wire formats), ``estimates``, ``accounting`` (Theorem 1, the exact accountant,
composition), ``planning`` (the planners, advice, Proposition 1), ``central`` (whole items,
partition selection, noisy rounds), ``federated`` and ``secagg``; under them, the base every
room may import: ``checks``, ``protocols``, ``search``, ``ragged`` and ``distinct``."""
