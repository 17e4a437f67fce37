"""Text layout for a terminal: the columns a string takes (wide East Asian characters take two),
padding to a width, wrapping a paragraph, and aligned tables built from those."""

from __future__ import annotations

import textwrap
import unicodedata
from typing import List, Sequence

__all__ = ["columns", "pad", "width", "wrap"]


def width(text: str) -> int:
    """The terminal columns ``text`` takes (a wide or full-width character takes two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, columns_wanted: int) -> str:
    """``text`` followed by spaces up to ``columns_wanted`` terminal columns (never cut)."""
    return text + " " * max(0, columns_wanted - width(text))


def wrap(text: str, indent: str = "  ", line_width: int = 96) -> List[str]:
    """``text`` as lines of at most ``line_width`` characters, each starting with ``indent``."""
    return textwrap.wrap(text, width=line_width, initial_indent=indent, subsequent_indent=indent)


def columns(rows: Sequence[Sequence[str]], align: str, indent: str = "  ") -> List[str]:
    """``rows`` as aligned lines: column ``c`` right-aligned when ``align[c]`` is ``">"``, else
    padded on the right; cells beyond ``len(align)`` follow unaligned. Trailing spaces are cut.

    Raises:
      IndexError: a row with fewer cells than ``align`` has letters.
    """
    widths = [max(width(row[c]) for row in rows) for c in range(len(align))]
    lines = []
    for row in rows:
        cells = [" " * (widths[c] - width(row[c])) + row[c] if side == ">" else pad(row[c], widths[c])
                 for c, side in enumerate(align)]
        lines.append((indent + "  ".join(cells + list(row[len(align):]))).rstrip())
    return lines
