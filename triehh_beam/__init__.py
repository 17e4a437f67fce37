"""triehh-beam: private heavy-hitter discovery with the TrieHH protocol."""
