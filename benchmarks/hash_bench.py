"""The per-record cost of the keyed hash: SipHash-2-4 of n user ids in Arrow's layout, compiled
(``triehh_beam_siphash``) against the numpy reference, and ``PassKeys.ranks_all`` (one SipHash
and L AES blocks per id) with each. Best of ``--repeats`` runs, one process, after the imports.

    PYTHONPATH=. python benchmarks/hash_bench.py --ids 1000000 --rounds 10
"""

import argparse
import contextlib
import time

import numpy as np
import pyarrow as pa

from triehh_beam.io.arrays import binary_buffers
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.sampling import Sampler


@contextlib.contextmanager
def _numpy_hash():
    """``keyed_hash.siphash24_batch`` runs its numpy code inside the block."""
    compiled, keyed_hash._compiled = keyed_hash._compiled, None
    try:
        yield
    finally:
        keyed_hash._compiled = compiled


def _best(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    # One-word users as the round benchmark writes them: "user-<i>", 6 to 11 bytes.
    data, offsets = binary_buffers(pa.array([f"user-{i}" for i in range(args.ids)], pa.string()))
    sampler = Sampler(bytes(range(32)), b"hash-bench")
    key, pass_keys = sampler.census_key().key, sampler.pass_keys(args.rounds)
    print(f"{args.ids:,} ids, {len(data) / args.ids:.1f} bytes each; hash: {keyed_hash.implementation()}")
    rows = []
    if keyed_hash.implementation() == "compiled":
        assert np.array_equal(keyed_hash.siphash24_batch(key, data, offsets),
                              keyed_hash.siphash24_batch_numpy(key, data, offsets))
        rows.append(("siphash24_batch, compiled", lambda: keyed_hash.siphash24_batch(key, data, offsets)))
        rows.append((f"PassKeys.ranks_all L={args.rounds}, compiled", lambda: pass_keys.ranks_all(data, offsets)))
    rows.append(("siphash24_batch, numpy", lambda: keyed_hash.siphash24_batch_numpy(key, data, offsets)))

    def ranks_numpy():
        with _numpy_hash():
            pass_keys.ranks_all(data, offsets)

    rows.append((f"PassKeys.ranks_all L={args.rounds}, numpy", ranks_numpy))
    for name, function in rows:
        seconds = _best(function, args.repeats)
        print(f"{name:40s} {seconds:8.4f} s  {seconds / args.ids * 1e9:8.1f} ns/id")


if __name__ == "__main__":
    main()
