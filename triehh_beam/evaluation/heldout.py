"""The held-out population of the accounting evaluation: 100,000 users holding one English word
each, drawn as the bundled population is (``evaluation.demo``) but with seed 25 and user ids
200,000 to 299,999, so nothing tuned on the bundled file has seen its draws. Regenerated, not
shipped (it needs wordfreq): ``python -m triehh_beam.evaluation.heldout --output
heldout_words.parquet``; it has the bundled file's schema, so ``triehh discover --input`` reads
it as it is.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from triehh_beam.evaluation import demo

__all__ = ["HELDOUT_FIRST_USER_ID", "HELDOUT_SEED", "HELDOUT_USERS", "main", "make_heldout_population"]

HELDOUT_SEED = 25
HELDOUT_USERS = 100_000
HELDOUT_FIRST_USER_ID = 200_000  # the bundled population's ids are 0 .. 199,999


def make_heldout_population(path: str, users: int = HELDOUT_USERS) -> str:
    """Writes the held-out population to ``path`` (Parquet) and returns ``path``; ``users`` other
    than 100,000 gives the first ``users`` users of the same draw (the draws are per user, in id
    order), which is what the tests use.

    Raises:
      ImportError: wordfreq is not installed.
      ValueError: ``users`` < 1.
    """
    return demo.make_population(
        path,
        users=users,
        words_per_user=1,
        vocabulary=5000,
        seed=HELDOUT_SEED,
        lang="en",
        first_user_id=HELDOUT_FIRST_USER_ID,
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m triehh_beam.evaluation.heldout --output PATH``: writes the held-out population
    and prints its size and true top words; exit code 2 without wordfreq."""
    parser = argparse.ArgumentParser(
        prog="python -m triehh_beam.evaluation.heldout",
        description="Write the held-out population of the accounting evaluation (needs wordfreq).",
    )
    parser.add_argument("--output", required=True, help="the Parquet file to write")
    parser.add_argument("--top", type=int, default=10, help="true top words to print")
    args = parser.parse_args(argv)
    try:
        make_heldout_population(args.output)
    except (ImportError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(demo.summary(args.output, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
