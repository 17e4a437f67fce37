"""A Zipf-like population of words written as records, for end-to-end discoveries: most users
hold one word, the others two or three in different counts (so a keyed choice by local
frequency decides what they vote for or report)."""

from typing import Dict, Sequence, Tuple

import numpy as np

from triehh_beam.io.write import write_records


def write_word_population(root, words: Sequence[str], users: int, exponent: float, seed: bytes,
                          rng_seed: int, single: float = 0.75) -> Tuple[str, str, Dict[str, Dict[str, int]]]:
    """Writes ``root/records.parquet`` and ``root/seed.bin``: (records path, seed file path,
    user -> {word: count}). Word ``i`` (from 1) has weight ``i ** -exponent``; a user holds one
    word with probability ``single``, else 2-3 distinct words, each with a count of 1-4."""
    rng = np.random.default_rng(rng_seed)
    weights = 1.0 / np.arange(1, len(words) + 1) ** exponent
    weights /= weights.sum()
    rows, held = [], {}
    for user in range(users):
        k = 1 if rng.random() < single else int(rng.integers(2, 4))
        items = {str(w): int(rng.integers(1, 5)) for w in rng.choice(words, size=k, replace=False, p=weights)}
        held[f"u{user}"] = items
        rows += [(f"u{user}", w, c) for w, c in items.items()]
    path = root / "records.parquet"
    write_records(str(path), rows)
    seed_file = root / "seed.bin"
    seed_file.write_bytes(seed)
    return str(path), str(seed_file), held
