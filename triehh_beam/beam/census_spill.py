"""The census's spill files (``beam.census``): one file per (bundle flush, group) of fingerprints,
written by ``write_spill`` (a magic, the numbers of usable and unusable fingerprints (u, v), then
u usable fingerprints, v unusable ones and their v shortest lengths, each run sorted, all
little-endian 64-bit), and read back by ``merge_steps``, a k-way merge of a group's files in steps
of at most a worker budget of fingerprints: each step reads the next chunk of every file's runs,
cuts them at the smallest last value of a chunk that does not end its run (so every occurrence
of a fingerprint up to the cut, in any file, is in this step) and yields what lies below it.
"""

from __future__ import annotations

import struct
from typing import Iterator, List, Tuple

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

__all__ = ["SpillCursor", "merge_steps", "write_spill"]

_SPILL_MAGIC = b"TRIEHHC1"
_SPILL_HEADER = struct.Struct("<8sQQ")
# (usable fingerprints, unusable fingerprints, their shortest lengths), each run sorted
Part = Tuple[np.ndarray, np.ndarray, np.ndarray]


def write_spill(path: str, part: Part) -> None:
    """Writes one spill file (its runs sorted and distinct, as the census buffers them)."""
    usable, unusable, lengths = part
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(_SPILL_HEADER.pack(_SPILL_MAGIC, len(usable), len(unusable)))
        for values, dtype in ((usable, "<u8"), (unusable, "<u8"), (lengths, "<i8")):
            f.write(np.ascontiguousarray(values, dtype=dtype).tobytes())


class SpillCursor:
    """Reads one spill file's two sorted runs (usable; unusable with their lengths) a chunk at a
    time, never the whole file. Raises ValueError for a file that is not a whole spill file (a
    census that silently read part of one would count fewer users)."""

    def __init__(self, path: str):
        self._path = path
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            header = f.read(_SPILL_HEADER.size)
        if len(header) < _SPILL_HEADER.size:
            raise ValueError(f"census spill file {path} is truncated")
        magic, self._u, self._v = _SPILL_HEADER.unpack(header)
        size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
        if magic != _SPILL_MAGIC or size != _SPILL_HEADER.size + 8 * (self._u + 2 * self._v):
            raise ValueError(f"census spill file {path} is not a whole census spill file")
        self.usable_at = self.unusable_at = 0

    @staticmethod
    def _read(f, start: int, count: int, dtype: str) -> np.ndarray:
        f.seek(_SPILL_HEADER.size + 8 * start)
        return np.frombuffer(f.read(8 * count), dtype, count)

    def chunk(self, rows: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, bool, bool]:
        """The next ``rows`` of each run (not consumed) and whether each reaches its run's end."""
        usable_rows = min(rows, self._u - self.usable_at)
        unusable_rows = min(rows, self._v - self.unusable_at)
        with FileSystems.open(self._path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            usable = self._read(f, self.usable_at, usable_rows, "<u8")
            unusable = self._read(f, self._u + self.unusable_at, unusable_rows, "<u8")
            lengths = self._read(f, self._u + self._v + self.unusable_at, unusable_rows, "<i8")
        return (usable, unusable, lengths, self.usable_at + usable_rows == self._u,
                self.unusable_at + unusable_rows == self._v)

    @property
    def done(self) -> bool:
        return self.usable_at == self._u and self.unusable_at == self._v


def merge_steps(paths: List[str], budget: int, held=None) -> Iterator[List[Part]]:
    """A group's spill files -> per step, every file's part below the step's cut (see the
    module); each step holds at most about ``budget`` fingerprints (``held``: a ``HeldRows``)."""
    cursors = [SpillCursor(path) for path in sorted(set(paths))]
    while True:
        live = [c for c in cursors if not c.done]
        if not live:
            return
        rows = max(1, budget // (2 * len(live)))
        chunks = [(c, c.chunk(rows)) for c in live]
        cut = np.uint64(2**64 - 1)
        for _, (usable, unusable, _, usable_end, unusable_end) in chunks:
            if len(usable) and not usable_end:
                cut = min(cut, usable[-1])
            if len(unusable) and not unusable_end:
                cut = min(cut, unusable[-1])
        parts = []
        for cursor, (usable, unusable, lengths, _, _) in chunks:
            a = int(np.searchsorted(usable, cut, side="right"))
            b = int(np.searchsorted(unusable, cut, side="right"))
            cursor.usable_at += a
            cursor.unusable_at += b
            parts.append((usable[:a], unusable[:b], lengths[:b]))
        if held is not None:
            held.held(sum(len(chunk[0]) + len(chunk[1]) for _, chunk in chunks))
        yield parts
