"""An independent in-memory census for the tests of ``TakeCensus``: ``census_oracle`` asks the
protocol's encoder item by item whether a user has a usable item; with the record batches
(``census_batch``), a population of awkward text items (``text_population``) and the seed they use."""

import collections

import numpy as np
import pyarrow as pa

from triehh_beam.beam.census import NEVER, Census
from triehh_beam.protocol.items.encoding import EncodingError, ItemTooLongError

__all__ = ["CENSUS_SEED", "census_batch", "census_oracle", "text_population"]


CENSUS_SEED = b"triehh-beam census tests seed 01"


def census_batch(rows, item_type=pa.string()):
    users, items = zip(*rows)
    return pa.record_batch(
        [pa.array([str(u).encode() for u in users], pa.binary()), pa.array(items, item_type),
         pa.array(np.ones(len(rows), np.int64))],
        names=["user_id", "item", "count"])


def census_oracle(rows, encoder, truncate=False):
    """(Census, items too long, items not encodable) by asking the encoder item by item."""
    by_user = collections.defaultdict(list)
    too_long = unencodable = 0
    for user, value in rows:
        try:
            parts = encoder.items_of(value)
        except EncodingError:
            parts = []
        if not parts:
            unencodable += 1
            by_user[user].append((False, NEVER))
        for item in parts:
            try:
                encoder.encode(item)
                by_user[user].append((True, 0))
            except ItemTooLongError as e:
                too_long += 1
                # Units of one base unit: the terminator is the one unit more.
                by_user[user].append((truncate, e.length - 1))
            except EncodingError:
                unencodable += 1
                by_user[user].append((False, NEVER))
    lengths = collections.Counter()
    usable = 0
    for items in by_user.values():
        if any(ok for ok, _ in items):
            usable += 1
        else:
            lengths[min(length for _, length in items)] += 1
    return Census(len(by_user), usable, dict(lengths)), too_long, unencodable


def text_population(rng, users=600):
    """Users with 1-4 records: short and long ASCII words, long and short non-ASCII words (one
    whose case folding is longer: 'ß' -> 'ss'; some not in NFC, which NFC makes shorter or
    longer), empty items."""
    alphabet = "abcdefghij"
    rows = []
    for u in range(users):
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.4:
                item = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
            elif kind < 0.6:
                item = "é" * rng.randint(1, 12) + "ß" * rng.randint(0, 3)
            elif kind < 0.7:
                # Not in NFC: "e" + a combining acute composes to one character, U+0958 (a
                # composition exclusion) decomposes to two.
                item = "e\u0301" * rng.randint(1, 9) + "\u0958" * rng.randint(0, 4)
            elif kind < 0.75:
                item = ""
            else:
                item = "https://example.com/" + "x" * rng.randint(0, 40)
            rows.append((f"user-{u}", item))
    rng.shuffle(rows)
    return rows
