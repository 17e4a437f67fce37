"""Lines of a text records file (JSON Lines, CSV) that a reader takes out before Arrow parses
the rest: ``Rejects`` counts them per drop reason (and keeps them for the dead letter when
asked), safely across Arrow's reader threads; ``split_non_utf8_lines`` takes the lines that are
not UTF-8 out of a block, which Arrow would otherwise take as they are or refuse whole.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Dict, List, Optional, Tuple

from triehh_beam.io.normalise import is_utf8
from triehh_beam.io.schema import RejectedRow

__all__ = ["Rejects", "split_non_utf8_lines"]


class Rejects:
    """Rows a reader takes out, counted per reason (and kept, if asked), safe across threads.

    Arrow's CSV reader calls its invalid-row handler, and reads the file, from its own threads
    while the batches are consumed in this one.
    """

    def __init__(self, keep: bool):
        self.keep = keep
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = collections.Counter()
        self._rows: List[RejectedRow] = []

    def add(self, reason: str, raw: Optional[bytes] = None) -> None:
        with self._lock:
            self._counts[reason] += 1
            if self.keep and raw is not None:
                self._rows.append(RejectedRow(reason, raw))

    def take(self) -> Tuple[Dict[str, int], List[RejectedRow]]:
        with self._lock:
            counts, rows = dict(self._counts), self._rows
            self._counts, self._rows = collections.Counter(), []
        return counts, rows


def split_non_utf8_lines(
    data: bytes, rejects: Rejects, classify: Callable[[bytes], str], csv_lines: bool = False
) -> bytes:
    """``data`` (whole lines) without the lines that are not UTF-8, which go to ``rejects``.

    ``classify`` says under which reason a bad line is counted (``malformed`` if it is broken
    anyway, else ``invalid_utf8``). Valid blocks are returned as they are, after one check.
    Lines end at ``\n`` (JSON Lines) or, with ``csv_lines``, also at a lone ``\r`` (as Arrow's
    CSV parser reads them).
    """
    if data.isascii() or is_utf8(data):
        return data
    kept = []
    pieces = data.splitlines(keepends=True) if csv_lines else data.split(b"\n")
    for piece in pieces:
        if is_utf8(piece):
            kept.append(piece)
        else:
            line = piece.rstrip(b"\r\n") if csv_lines else piece
            rejects.add(classify(line), line)
    return b"".join(kept) if csv_lines else b"\n".join(kept)


