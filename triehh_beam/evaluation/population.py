"""An evaluation input read into memory: every record of the matched files, through the same
checks and drops as the pipeline's reader (``io.records.reader.iter_record_batches``), grouped per user;
meant for evaluation inputs of up to a few million records."""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, Mapping, Optional, Tuple

from triehh_beam.io.drops import DROP_REASONS
from triehh_beam.io.files import match_files
from triehh_beam.io.records.reader import iter_record_batches
from triehh_beam.io.schema import RecordColumns, RecordOptions

__all__ = ["Population", "load_population"]


@dataclasses.dataclass(frozen=True)
class Population:
    """The records of an input, in memory.

    Attributes:
      users: canonical user id bytes -> Counter(item -> record count), raw items as read.
      files: the files read.
      records: records kept (rows after the reader's checks).
      dropped: records dropped per reason (``io.drops.DROP_REASONS``).
    """

    users: Mapping[bytes, collections.Counter]
    files: Tuple[str, ...]
    records: int
    dropped: Mapping[str, int]


def load_population(
    input_pattern: str,
    format: Optional[str] = None,
    columns: RecordColumns = RecordColumns(),
    options: RecordOptions = RecordOptions(),
) -> Population:
    """Reads every record of the matched files (``iter_record_batches``: same checks and drops as
    the pipeline's reader; ``options`` as a job's ``DiscoveryConfig.record_options``, so that the
    items are the job's: its item kind, byte encoding, limits, user id normalisation).

    Raises:
      FileNotFoundError: a pattern matches nothing.
      RecordFormatError, ValueError: a file cannot be read (the message names it).
    """
    users: Dict[bytes, collections.Counter] = {}
    dropped: collections.Counter = collections.Counter()
    records = 0
    files = match_files(input_pattern)
    for path in files:
        for batch, drops in iter_record_batches(path, format, columns, options=options):
            dropped.update(drops)
            records += batch.num_rows
            ids = batch.column(0).to_pylist()
            items = batch.column(1).to_pylist()
            counts = batch.column(2).to_pylist()
            for user, item, count in zip(ids, items, counts):
                users.setdefault(user, collections.Counter())[item] += count
    return Population(users=users, files=tuple(files), records=records,
                      dropped={r: int(dropped.get(r, 0)) for r in DROP_REASONS})
