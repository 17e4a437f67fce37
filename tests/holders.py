"""Records of a population given as item -> holders: holder i of an item is its own user, and
users are numbered item after item. For tests that need exact holder counts per item."""

from typing import Mapping

from triehh_beam.io.write import write_records


def write_holders(path: str, population: Mapping[str, int]) -> str:
    """Writes one record per (user, item) of ``population`` to ``path``; returns ``path``."""
    rows, user = [], 0
    for item, holders in population.items():
        rows += [(user + i, item) for i in range(holders)]
        user += holders
    write_records(path, rows)
    return path
