"""The bundled demo population, ``triehh_beam/data/demo_words.parquet``: 200,000 users each holding
one English word drawn independently by its frequency in ``wordfreq``'s English list (its 5,000
most frequent purely alphabetic words), so the top words dominate as in a real population.
Columns ``user_id`` (int64), ``item`` (dictionary-encoded string) and ``count`` (int64; with
several words per user, a word drawn twice has count 2). Reading it (``demo_population_path``,
``truth``) needs only pyarrow; regenerating it (``make_population``) needs wordfreq and was done
with ``python -m triehh_beam.evaluation.demo --output triehh_beam/data/demo_words.parquet
--users 200000 --words-per-user 1 --vocabulary 5000 --seed 2020 --lang en`` (wordfreq 3.1.1,
numpy 2.4.6, pyarrow 25.0.1 rewrite the same bytes; the arguments are in the file's schema
metadata, key ``triehh_beam.evaluation.demo``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import unicodedata
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "DEFAULT_SEED",
    "DEMO_POPULATION_PATH",
    "SCHEMA",
    "demo_population_path",
    "main",
    "make_population",
    "summary",
    "truth",
    "vocabulary_words",
]

DEMO_POPULATION_PATH: str = str(Path(__file__).resolve().parents[1] / "data" / "demo_words.parquet")

DEFAULT_SEED = 2020
ROW_GROUP_SIZE = 65_536
METADATA_KEY = b"triehh_beam.evaluation.demo"

SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.int64(), nullable=False),
        pa.field("item", pa.string(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
    ]
)


def demo_population_path() -> str:
    """The path of the bundled demo population (a Parquet file inside the installed package).

    Raises:
      FileNotFoundError: the file is not there (e.g. a package built without its data files).
    """
    if not os.path.isfile(DEMO_POPULATION_PATH):
        raise FileNotFoundError(
            f"the bundled demo population is missing: {DEMO_POPULATION_PATH} does not exist. "
            "It ships as package data of triehh_beam (data/demo_words.parquet); reinstall the "
            "package, or regenerate it with the command in the triehh_beam.evaluation.demo docstring "
            "(needs wordfreq)."
        )
    return DEMO_POPULATION_PATH


def _is_word(token: str) -> bool:
    """Purely alphabetic Latin-script letters ("café" yes; "it's", "1st", "u.s" no)."""
    return bool(token) and all(
        ch.isalpha() and unicodedata.name(ch, "").startswith("LATIN") for ch in token
    )


def _import_wordfreq():
    try:
        import wordfreq  # noqa: PLC0415 - only needed to regenerate
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "regenerating the demo population needs the 'wordfreq' package "
            "(pip install wordfreq); reading the bundled file does not."
        ) from exc
    return wordfreq


def vocabulary_words(vocabulary: int = 5000, lang: str = "en") -> Tuple[List[str], np.ndarray]:
    """The ``vocabulary`` most frequent purely alphabetic words of wordfreq's ``lang`` list.

    Returns the words (most frequent first) and their wordfreq frequencies (float64).
    """
    if vocabulary < 1:
        raise ValueError(f"vocabulary must be >= 1, got {vocabulary}")
    wordfreq = _import_wordfreq()
    words: List[str] = []
    for token in wordfreq.iter_wordlist(lang):
        if _is_word(token):
            words.append(token)
            if len(words) == vocabulary:
                break
    if len(words) < vocabulary:
        raise ValueError(
            f"wordfreq's {lang!r} list has only {len(words)} purely alphabetic Latin words, "
            f"fewer than the {vocabulary} asked for"
        )
    freqs = np.array([wordfreq.word_frequency(w, lang) for w in words], dtype=np.float64)
    if not np.all(freqs > 0):
        raise ValueError("wordfreq gave a zero frequency to a word of its own list")
    return words, freqs


def make_population(
    path: str,
    users: int = 200_000,
    words_per_user: int = 1,
    vocabulary: int = 5000,
    seed: int = DEFAULT_SEED,
    lang: str = "en",
    first_user_id: int = 0,
) -> str:
    """Write a population of ``users`` users to ``path`` (Parquet) and return ``path``.

    The users' ids are ``first_user_id .. first_user_id + users - 1``. Each user draws
    ``words_per_user`` words independently (with replacement) from the ``vocabulary`` most
    frequent purely alphabetic words of wordfreq's ``lang`` list, weighted by their real
    frequencies, with ``numpy.random.default_rng(seed)``. Rows are sorted by user id, then by the
    word's frequency rank; a word drawn twice by one user is one row with count 2.

    Deterministic: the same arguments (and the same wordfreq/numpy versions) give the same rows;
    with the same pyarrow version too, the same bytes.

    Raises:
      ImportError: wordfreq is not installed.
      ValueError: an argument is out of range, or the vocabulary is larger than the list.
    """
    if users < 1:
        raise ValueError(f"users must be >= 1, got {users}")
    if words_per_user < 1:
        raise ValueError(f"words_per_user must be >= 1, got {words_per_user}")
    if not 0 <= first_user_id <= 2**63 - 1 - users:
        raise ValueError(f"first_user_id must be in [0, 2^63 - 1 - users], got {first_user_id}")
    wordfreq = _import_wordfreq()
    words, freqs = vocabulary_words(vocabulary, lang)

    rng = np.random.default_rng(seed)
    draws = rng.choice(len(words), size=(users, words_per_user), p=freqs / freqs.sum())
    # One row per (user, word): sort the draws of each user and merge repeats into a count.
    keys = np.arange(users, dtype=np.int64)[:, None] * len(words) + draws.astype(np.int64)
    keys, counts = np.unique(keys.ravel(), return_counts=True)  # sorted: by user, then rank
    user_ids = keys // len(words) + first_user_id
    word_index = (keys % len(words)).astype(np.int32)

    item = pa.DictionaryArray.from_arrays(pa.array(word_index), pa.array(words, pa.string()))
    table = pa.table(
        {
            "user_id": pa.array(user_ids, pa.int64()),
            "item": item.cast(pa.string()),
            "count": pa.array(counts.astype(np.int64), pa.int64()),
        },
        schema=SCHEMA,
    )
    provenance = {
        "users": users,
        "words_per_user": words_per_user,
        "vocabulary": vocabulary,
        "seed": seed,
        "lang": lang,
        "wordfreq": getattr(wordfreq, "__version__", "unknown"),
    }
    if first_user_id:  # recorded only when set, so the bundled file's bytes stay as they were
        provenance["first_user_id"] = first_user_id
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(provenance, sort_keys=True)})

    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    pq.write_table(
        table,
        path,
        compression="zstd",
        use_dictionary=["item", "count"],
        column_encoding={"user_id": "DELTA_BINARY_PACKED"},
        row_group_size=ROW_GROUP_SIZE,
        write_statistics=True,
    )
    return path


def truth(path: str) -> List[Tuple[str, int]]:
    """The exact number of distinct users holding each word of a population file.

    Returns ``(word, users)`` pairs sorted by users descending, then word ascending. Needs only
    pyarrow (vectorised group-by, no per-row Python).
    """
    table = pq.read_table(path, columns=["user_id", "item"])
    table = table.set_column(1, "item", table.column("item").cast(pa.string()))
    grouped = table.group_by("item").aggregate([("user_id", "count_distinct")])
    grouped = grouped.rename_columns(["item", "users"]).sort_by(
        [("users", "descending"), ("item", "ascending")]
    )
    return list(zip(grouped.column("item").to_pylist(), grouped.column("users").to_pylist()))


def summary(path: str, top: int) -> str:
    """The size of a population file, its number of users and its ``top`` true words, as lines."""
    n = len(pq.read_table(path, columns=["user_id"]).column("user_id").unique())  # distinct users
    lines = [f"{path}: {os.path.getsize(path):,} bytes, {n:,} users"]
    for rank, (word, count) in enumerate(truth(path)[:top], start=1):
        lines.append(f"{rank:3d}. {word:<12s} {count:8,d}  {count / n:.4f}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m triehh_beam.evaluation.demo",
        description="Regenerate a demo population of real English words (needs wordfreq).",
    )
    parser.add_argument("--output", required=True, help="the Parquet file to write")
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--words-per-user", type=int, default=1)
    parser.add_argument("--vocabulary", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--lang", default="en")
    parser.add_argument("--first-user-id", type=int, default=0, help="the first user's id (default: 0)")
    parser.add_argument("--top", type=int, default=20, help="true top words to print")
    args = parser.parse_args(argv)
    try:
        make_population(args.output, users=args.users, words_per_user=args.words_per_user,
                        vocabulary=args.vocabulary, seed=args.seed, lang=args.lang, first_user_id=args.first_user_id)
    except (ImportError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(args.output, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
