"""An evaluation input read into memory: every record of the matched files, through the same
checks and drops as the pipeline's reader (``record_io.iter_record_batches``), grouped per user;
meant for evaluation inputs of up to a few million records."""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Mapping, Optional, Tuple

from triehh_beam.beam import record_io

__all__ = ["Population", "load_population"]


@dataclasses.dataclass(frozen=True)
class Population:
    """The records of an input, in memory.

    Attributes:
      users: canonical user id bytes -> Counter(item -> record count), raw items as read.
      files: the files read.
      records: records kept (rows after the reader's checks).
      dropped: records dropped per reason (``record_io.DROP_REASONS``).
    """

    users: Mapping[bytes, collections.Counter]
    files: Tuple[str, ...]
    records: int
    dropped: Mapping[str, int]


def _match_files(pattern: str) -> List[str]:
    from apache_beam.io.filesystems import FileSystems

    paths = set()
    for part in (p.strip() for p in pattern.split(",")):
        if not part:
            continue
        matched = [m.path for m in FileSystems.match([part])[0].metadata_list]
        if not matched:
            raise FileNotFoundError(f"no records files match {part!r}")
        paths.update(matched)
    if not paths:
        raise ValueError(f"the input pattern {pattern!r} names no files")
    return sorted(paths)


def load_population(
    input_pattern: str,
    format: Optional[str] = None,
    columns: record_io.RecordColumns = record_io.RecordColumns(),
) -> Population:
    """Reads every record of the matched files (``iter_record_batches``: same checks and drops as
    the pipeline's reader).

    Raises:
      FileNotFoundError: a pattern matches nothing.
      RecordFormatError, ValueError: a file cannot be read (the message names it).
    """
    users: Dict[bytes, collections.Counter] = {}
    dropped: collections.Counter = collections.Counter()
    records = 0
    files = _match_files(input_pattern)
    for path in files:
        for batch, drops in record_io.iter_record_batches(path, format, columns):
            dropped.update(drops)
            records += batch.num_rows
            ids = batch.column(0).to_pylist()
            items = batch.column(1).to_pylist()
            counts = batch.column(2).to_pylist()
            for user, item, count in zip(ids, items, counts):
                users.setdefault(user, collections.Counter())[item] += count
    return Population(users=users, files=tuple(files), records=records,
                      dropped={r: int(dropped.get(r, 0)) for r in record_io.DROP_REASONS})
