"""A small skewed population where users hold several items (some too long for the encoders), its
record batches with each user's records spread over batches, and its rows encoded: the input of
the Beam tests of the sampling pass, the rounds on its samples and the frequency estimates."""

import numpy as np
import pyarrow as pa

from triehh_beam.protocol.items.encoding import EncodingError, ItemEncoder, ItemKind, ItemTooLongError

__all__ = ["ARROW_ITEMS", "ENCODERS", "VOCABULARY", "encoded_rows", "population", "record_batches",
           "split_count_batches"]

ENCODERS = {
    "text": ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=5),
    "bytes": ItemEncoder(ItemKind.BYTES, unit_size=1, max_length=4),
    "int": ItemEncoder(ItemKind.INT, unit_size=2, max_length=5, int_bits=8),
}
ARROW_ITEMS = {"text": pa.string(), "bytes": pa.binary(), "int": pa.int64()}


VOCABULARY = {
    "text": ["ab", "abc", "a", "ba", "bab", "c", "abcdef", "bbbbbbb", "cab", "ca"],
    "bytes": [b"\x01\x02", b"\x01", b"\x02\x01", b"\x01\x02\x03", b"\x01\x01\x01\x01\x01", b"\x03"],
    "int": [0, 1, 2, -1, 17, 100, -128, 127],
}


def population(kind, seed, users=300, most_items=6):
    """user -> {item: count}: 1 to ``most_items`` draws per user from the skewed ``VOCABULARY`` of
    ``kind`` (an ``ENCODERS`` key; item i from 1 has weight 1/i), some items too long."""
    rng = np.random.default_rng(seed)
    vocabulary = VOCABULARY[kind]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    users_items = {}
    for user in range(users):
        held = {}
        for _ in range(rng.integers(1, most_items + 1)):
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


def split_count_batches(users_items, kind, size=61):
    """``users_items`` as Arrow batches of ``size`` rows, a count above 1 split over two rows and
    the rows shuffled with a fixed seed: a user's records spread over batches, as in any file."""
    rows = []
    for user, held in users_items.items():
        for item, count in held.items():
            parts = [count] if count == 1 else [1, count - 1]
            rows += [(user.encode(), item, part) for part in parts]
    rows = [rows[i] for i in np.random.default_rng(1).permutation(len(rows))]
    out = []
    for i in range(0, len(rows), size):
        users, items, counts = zip(*rows[i:i + size])
        out.append(pa.record_batch([pa.array(users, pa.binary()), pa.array(items, ARROW_ITEMS[kind]),
                                    pa.array(counts, pa.int64())], names=["user_id", "item", "count"]))
    return out


def encoded_rows(users_items, encoder, truncate):
    """user -> [(sequence, count)], encoded as the pipeline's rules do (an item that does not
    encode is left out)."""
    out = {}
    for user, held in users_items.items():
        rows = []
        for item, count in held.items():
            try:
                sequence = encoder.encode_truncated(item) if truncate else encoder.encode(item)
            except (ItemTooLongError, EncodingError):
                continue
            rows.append((sequence, count))
        out[user] = rows
    return out
