"""The TrieHH protocol in plain Python: item encoding, keyed sampling, the client vote,
count-and-prune, the trie, the round loop, the privacy planner and the utility bounds. No
Beam, no Arrow, no file I/O: it runs on a device, in a simulation or inside any pipeline."""
