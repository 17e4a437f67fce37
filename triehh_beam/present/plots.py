"""What every picture of this package shares: matplotlib on the Agg backend (no display needed,
imported only when a picture is drawn), one colour per epsilon, and saving a figure."""

from __future__ import annotations

import math
from typing import Tuple

__all__ = ["DPI", "colour", "epsilon_label", "grid", "pyplot", "save"]

DPI = 110
# One colour per epsilon (matplotlib's tab10 order); a rival reuses its epsilon's colour.
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def colour(index: int) -> str:
    """The colour of the ``index``-th epsilon (cycling)."""
    return _COLOURS[index % len(_COLOURS)]


def epsilon_label(epsilon: float) -> str:
    """How a legend names an epsilon."""
    return f"ε = {epsilon:g}"


def save(fig, path: str) -> str:
    """Saves ``fig`` as PNG at ``path``, closes it and returns the path."""
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    pyplot().close(fig)
    return path


def grid(count: int) -> Tuple[int, int]:
    """(rows, columns) of a grid of ``count`` panels, two panels a row."""
    cols = 1 if count == 1 else 2
    return math.ceil(count / cols), cols
