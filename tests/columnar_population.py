"""Random populations of encoded sequences for the tests of the columnar vote: per user a list of
(sequence, count) rows (repeats, zero counts, users with nothing), the same as a columnar
sequence table, and a random frontier of a round."""

import numpy as np

from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.rounds import columnar

__all__ = ["ENCODERS", "random_frontier", "sequence_rows", "sequence_table"]


ENCODERS = {
    "text": ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=6),
    "bytes": ItemEncoder(ItemKind.BYTES, unit_size=2, max_length=5),
    "int": ItemEncoder(ItemKind.INT, unit_size=3, max_length=4, int_bits=9),
}


def random_items(kind, rng, size):
    if kind == "text":
        return ["".join(rng.choice(list("abcé"), size=rng.integers(1, 6))) for _ in range(size)]
    if kind == "bytes":
        return [bytes(rng.integers(0, 3, size=rng.integers(1, 8)).astype(np.uint8)) for _ in range(size)]
    return [int(v) for v in rng.integers(-256, 256, size=size)]


def sequence_rows(kind, seed, users=400):
    """Per user a list of (sequence, count) rows: repeats, zero counts, users with nothing."""
    rng = np.random.default_rng(seed)
    encoder = ENCODERS[kind]
    vocabulary = []
    for item in random_items(kind, rng, 60):
        try:
            vocabulary.append(encoder.encode_truncated(item))
        except ValueError:
            pass
    population = []
    for _ in range(users):
        rows = rng.integers(0, 12) if rng.random() > 0.1 else 0
        population.append(
            [(vocabulary[rng.integers(len(vocabulary))], int(rng.choice([0, 1, 1, 2, 7, 1000])))
             for _ in range(rows)]
        )
    return population


def sequence_table(population):
    distinct = sorted({s for rows in population for s, _ in rows}, key=repr)  # not canonical
    index = {s: i for i, s in enumerate(distinct)}
    offsets = np.zeros(len(population) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(rows) for rows in population])
    codes = [index[s] for rows in population for s, _ in rows]
    counts = [c for rows in population for _, c in rows]
    return columnar.sequence_table(distinct, offsets, np.array(codes, dtype=np.int64), np.array(counts, dtype=np.int64))


def random_frontier(population, round_index, rng):
    candidates = sorted({s[: round_index - 1] for rows in population for s, _ in rows if len(s) >= round_index}, key=repr)
    if round_index == 1:
        return frozenset({()})
    return frozenset(c for c in candidates if rng.random() < 0.6)
