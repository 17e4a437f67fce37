"""Lines of a text records file (JSON Lines, CSV) that a reader takes out before Arrow parses
the rest: ``Rejects`` counts them per drop reason (and keeps them, with their line numbers, for
the dead letter when asked); ``split_non_utf8_lines`` blanks the lines of a block that are not
UTF-8, which Arrow would otherwise take as they are or refuse whole, so that the lines after
them keep their numbers; ``count_lines`` counts a block's lines as the readers number them.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Dict, List, Optional, Tuple

from triehh_beam.io.arrays import is_utf8
from triehh_beam.io.schema import RejectedRow

__all__ = ["Rejects", "count_lines", "split_non_utf8_lines"]


class Rejects:
    """Rows a reader takes out, counted per reason (and kept, if asked), safe across threads."""

    def __init__(self, keep: bool):
        self.keep = keep
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = collections.Counter()
        self._rows: List[RejectedRow] = []

    def add(self, reason: str, raw: Optional[bytes] = None, line: Optional[int] = None) -> None:
        with self._lock:
            self._counts[reason] += 1
            if self.keep and raw is not None:
                self._rows.append(RejectedRow(reason, raw, line))

    def take(self) -> Tuple[Dict[str, int], List[RejectedRow]]:
        with self._lock:
            counts, rows = dict(self._counts), self._rows
            self._counts, self._rows = collections.Counter(), []
        return counts, rows


def count_lines(data: bytes, csv_lines: bool = False) -> int:
    """The number of line breaks in ``data``: ``\\n``, and with ``csv_lines`` also a lone
    ``\\r`` (``\\r\\n`` is one), as Arrow's CSV parser and ``bytes.splitlines`` read them."""
    breaks = data.count(b"\n")
    if csv_lines and b"\r" in data:
        breaks += data.count(b"\r") - data.count(b"\r\n")
    return breaks


def split_non_utf8_lines(
    data: bytes,
    rejects: Rejects,
    classify: Callable[[bytes], str],
    csv_lines: bool = False,
    first_line: int = 1,
) -> bytes:
    """``data`` (whole lines) with its lines that are not UTF-8 blanked; they go to ``rejects``.

    ``classify`` says under which reason a bad line is counted (``malformed`` if it is broken
    anyway, else ``invalid_utf8``); ``first_line`` is the number of the block's first line, so
    that each bad line is kept with its own. A bad line becomes empty but keeps its line break,
    so the readers (which skip blank lines) number the lines after it as the file does. Valid
    blocks are returned as they are, after one check. Lines end at ``\\n`` (JSON Lines) or, with
    ``csv_lines``, also at a lone ``\\r`` (as Arrow's CSV parser reads them).
    """
    if data.isascii() or is_utf8(data):
        return data
    kept = []
    pieces = data.splitlines(keepends=True) if csv_lines else data.split(b"\n")
    for index, piece in enumerate(pieces):
        if is_utf8(piece):
            kept.append(piece)
            continue
        if csv_lines:
            line = piece.rstrip(b"\r\n")
            kept.append(piece[len(line):])  # the line break alone
        else:
            line = piece
            kept.append(b"")
        rejects.add(classify(line), line, first_line + index)
    return b"".join(kept) if csv_lines else b"\n".join(kept)
