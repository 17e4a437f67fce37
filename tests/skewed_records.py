"""A small skewed population where users hold several items (some too long for the encoders), and
its record batches with each user's records spread over batches: the input of the Beam tests of
the sampling pass and the rounds on its samples."""

import numpy as np
import pyarrow as pa

from triehh_beam.protocol.encoding import ItemEncoder, ItemKind

__all__ = ["ARROW_ITEMS", "ENCODERS", "population", "record_batches"]

ENCODERS = {
    "text": ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=5),
    "bytes": ItemEncoder(ItemKind.BYTES, unit_size=1, max_length=4),
    "int": ItemEncoder(ItemKind.INT, unit_size=2, max_length=5, int_bits=8),
}
ARROW_ITEMS = {"text": pa.string(), "bytes": pa.binary(), "int": pa.int64()}


def population(kind, seed, users=300):
    """user -> {item: count}: 1 to 6 items per user from a skewed vocabulary of ``kind`` (an
    ``ENCODERS`` key), some too long."""
    rng = np.random.default_rng(seed)
    if kind == "text":
        vocabulary = ["ab", "abc", "a", "ba", "bab", "c", "abcdef", "bbbbbbb", "cab", "ca"]
    elif kind == "bytes":
        vocabulary = [b"\x01\x02", b"\x01", b"\x02\x01", b"\x01\x02\x03", b"\x01\x01\x01\x01\x01", b"\x03"]
    else:
        vocabulary = [0, 1, 2, -1, 17, 100, -128, 127]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    users_items = {}
    for user in range(users):
        held = {}
        for _ in range(rng.integers(1, 7)):
            item = vocabulary[rng.choice(len(vocabulary), p=weights)]
            held[item] = held.get(item, 0) + int(rng.integers(1, 4))
        users_items[f"u{user}"] = held
    return users_items


def record_batches(users_items, kind, size=97):
    """``users_items`` as Arrow batches of ``size`` rows (user_id, item, count), rows shuffled with a
    fixed seed so that a user's records spread over batches."""
    rows = [(u.encode(), item, c) for u, held in users_items.items() for item, c in held.items()]
    rows = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]
    out = []
    for i in range(0, len(rows), size):
        users, items, counts = zip(*rows[i : i + size])
        out.append(
            pa.record_batch(
                [pa.array(users, pa.binary()), pa.array(items, ARROW_ITEMS[kind]), pa.array(counts, pa.int64())],
                names=["user_id", "item", "count"],
            )
        )
    return out
