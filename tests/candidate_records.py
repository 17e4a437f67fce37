"""Records of users with one to three records each over a vocabulary of 50 words, shuffled: the
input of the Beam tests of the first read's candidates and of the cut a round at a time."""

import numpy as np
import pyarrow as pa

__all__ = ["user_records"]


def user_records(users: int, rng: np.random.Generator) -> pa.Table:
    """``users`` users with one to three records each (a user's records share its rank), in the
    order ``rng`` shuffles them: columns user_id, item, count."""
    ids, items = [], []
    for user in range(users):
        for k in range(int(rng.integers(1, 4))):
            ids.append(f"user-{user}".encode())
            items.append(f"w{(user * 7 + k) % 50}")
    order = rng.permutation(len(ids))
    return pa.table({"user_id": pa.array([ids[i] for i in order], pa.binary()),
                     "item": pa.array([items[i] for i in order], pa.string()),
                     "count": pa.array(np.ones(len(ids), np.int64))})
