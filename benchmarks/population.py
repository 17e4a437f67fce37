"""The benchmarks' synthetic populations, generated once and cached under a work directory:
int64 user ids (a bijective scramble of 0..users-1, so ids are 18-19 decimal digits like real
64-bit ids), ``records / items_per_user`` users whose records are spread over the files, items
drawn Zipf(s) from a vocabulary of deterministic pseudo-words of 3-9 letters, 64k-row row groups,
several Parquet files. A ``manifest.json`` written last marks a complete dataset.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Dict, List

DATA_VERSION = 1  # bump when the generator changes, so stale caches are not reused
ROW_GROUP = 65536
ID_MULTIPLIER = 0x9E3779B97F4A7C15  # odd, so u -> (a*u + c) mod 2^63 is a bijection
ID_OFFSET = 0x2545F4914F6CDD1D


def _vocabulary(size: int, rng) -> List[str]:
    """``size`` distinct pronounceable pseudo-words of 3 to 9 letters, deterministic in rng."""
    consonants = "bcdfghjklmnprstvwz"
    vowels = "aeiou"
    words, seen = [], set()
    while len(words) < size:
        syllables = int(rng.integers(2, 5))
        word = "".join(
            consonants[int(rng.integers(len(consonants)))] + vowels[int(rng.integers(len(vowels)))]
            for _ in range(syllables)
        )
        if rng.random() < 0.3:
            word += consonants[int(rng.integers(len(consonants)))]
        word = word[:9]
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def dataset_dir(workdir: str, records: int, items_per_user: int, files: int, vocab: int, zipf: float) -> str:
    name = f"records-{records}-ipu{items_per_user}-f{files}-v{vocab}-s{zipf:g}-d{DATA_VERSION}"
    return os.path.join(workdir, name)


def ensure_dataset(
    workdir: str, records: int, items_per_user: int, files: int, vocab: int, zipf: float, log
) -> Dict:
    """Generates the population (once) and returns its manifest."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = dataset_dir(workdir, records, items_per_user, files, vocab, zipf)
    manifest_path = os.path.join(directory, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            return json.load(f)
    users = max(1, records // items_per_user)
    log(f"generating {records:,} records of {users:,} users in {directory}")
    started = time.monotonic()
    if os.path.exists(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    rng = np.random.default_rng(12345)
    words = _vocabulary(vocab, rng)
    weights = 1.0 / np.arange(1, vocab + 1, dtype=np.float64) ** zipf
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    word_array = pa.array(words, pa.string())
    schema = pa.schema([pa.field("user_id", pa.int64()), pa.field("item", pa.string())])
    paths = []
    chunk = ROW_GROUP * 4
    for f in range(files):
        start, stop = records * f // files, records * (f + 1) // files
        path = os.path.join(directory, f"part-{f:05d}-of-{files:05d}.parquet")
        with pq.ParquetWriter(path, schema) as writer:
            for lo in range(start, stop, chunk):
                hi = min(stop, lo + chunk)
                index = np.arange(lo, hi, dtype=np.uint64)
                user = index % np.uint64(users)  # a user's records are spread over the files
                ids = (user * np.uint64(ID_MULTIPLIER) + np.uint64(ID_OFFSET)) & np.uint64(2**63 - 1)
                picks = np.searchsorted(cdf, rng.random(hi - lo), side="right")
                table = pa.table(
                    {"user_id": pa.array(ids.astype(np.int64)), "item": word_array.take(pa.array(picks))},
                    schema=schema,
                )
                writer.write_table(table, row_group_size=ROW_GROUP)
        paths.append(path)
    manifest = {
        "records": records,
        "users": users,
        "items_per_user": items_per_user,
        "files": files,
        "vocabulary": vocab,
        "zipf": zipf,
        "row_group": ROW_GROUP,
        "bytes": sum(os.path.getsize(p) for p in paths),
        "pattern": os.path.join(os.path.abspath(directory), "part-*.parquet"),
        "generated_seconds": round(time.monotonic() - started, 2),
        "data_version": DATA_VERSION,
    }
    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=2)
    os.replace(manifest_path + ".tmp", manifest_path)  # the manifest marks a complete dataset
    return manifest
