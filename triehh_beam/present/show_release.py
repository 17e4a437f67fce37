"""``triehh show`` of a ``--protocol sample-threshold`` result: one whole-item release has no
trie, only released items, each with its count (the sampled users who reported it, at least tau:
the theorem covers the thresholded counts, so they are published), its estimate count / p_s of
its weighted users and their 95% interval given the release (results published before the
intervals have none). ``show.render_text`` puts the job's summary above this table
of released items."""

from __future__ import annotations

from typing import Any, List, Mapping

from triehh_beam.present.result import display
from triehh_beam.present.text import columns, wrap
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind

__all__ = ["whole_item_lines"]


def _released_text(value: Any, encoder: ItemEncoder) -> str:
    """A released item as the tables show items (bytes from their hex, integers as numbers)."""
    return display(bytes.fromhex(value) if encoder.kind is ItemKind.BYTES else value, encoder)


def whole_item_lines(document: Mapping, encoder: ItemEncoder) -> List[str]:
    """The released items of a whole-item release, most reported first, with count, estimate
    and, when published, the 95% interval of the weighted users (all published: the theorem
    covers the thresholded counts)."""
    released = document.get("released", [])
    if released and "estimate" not in released[0]:  # partition selection: noisy counts, or items alone
        return _partition_lines(document, encoder)
    intervals = bool(released) and all("interval" in entry for entry in released)
    lines = ["", f"{len(released)} item{'' if len(released) == 1 else 's'} released (most reported first):"]
    rows = [("#", "item", "count", "estimate") + (("95% interval",) if intervals else ())] + [
        (str(i), _released_text(entry["item"], encoder), f"{entry['count']:,}", f"{entry['estimate']:,.0f}")
        + ((f"{entry['interval'][0]:,} to {entry['interval'][1]:,}",) if intervals else ())
        for i, entry in enumerate(released, start=1)]
    lines += columns(rows, "><>>" + ("<" if intervals else ""))
    quantity = document.get("estimates", {}).get("quantity")
    if quantity:
        lines += [""] + wrap(f"estimates: {quantity}.", indent="")
    if document.get("estimate_note"):
        lines += [""] + wrap(document["estimate_note"], indent="")
    return lines


def _partition_lines(document: Mapping, encoder: ItemEncoder) -> List[str]:
    """A partition-selection release's items, most counted first, with the noisy count and its
    95% interval when the release publishes counts."""
    released = document["released"]
    counts = "count" in released[0]
    lines = ["", f"{len(released)} item{'' if len(released) == 1 else 's'} released"
             f"{' (most counted first)' if counts else ''}:"]
    rows = [("#", "item") + (("noisy count", "95% interval") if counts else ())] + [
        (str(i), _released_text(entry["item"], encoder))
        + ((f"{entry['count']:,}", f"{entry['interval'][0]:,} to {entry['interval'][1]:,}") if counts else ())
        for i, entry in enumerate(released, start=1)]
    lines += columns(rows, "><" + (">>" if counts else ""))
    note = document.get("estimates", {}).get("interval_note")
    if note:
        lines += [""] + wrap(note + ".", indent="")
    return lines
