"""Leaving nothing behind: a run refused (or failed) before it committed a job, and a dry run,
remove what they created in a local state directory (the directories Beam writes job outputs
to, the compare-and-swap store's scratch files, the released lease), as listed before they
started; what was there before stays. The driver removes files only once it knows no other run
took the state directory since (``StateLease.discard``); a dry run, which holds no lease, removes
only empty directories. On ``gs://`` there are no directories, and the lease object is the only
thing such a run leaves: ``StateLease.discard`` deletes it.
"""

from __future__ import annotations

import os
from typing import Collection, Optional, Set

from triehh_beam.job.state.cas import is_local

__all__ = ["local_entries", "remove_new"]


def local_entries(root: str) -> Optional[Set[str]]:
    """Every directory and file at or below a local ``root`` (empty if it does not exist); None
    for a remote location."""
    if not is_local(root):
        return None
    entries: Set[str] = set()
    if not os.path.lexists(root):
        return entries
    entries.add(root)
    for directory, subdirectories, files in os.walk(root):
        entries.update(os.path.join(directory, name) for name in subdirectories + files)
    return entries


def remove_new(root: str, before: Optional[Set[str]], keep: Collection[str] = (),
               directories_only: bool = False) -> None:
    """Removes what is at or below ``root`` now and was not in ``before`` (``local_entries``),
    deepest first, except the paths in ``keep``: files (unless ``directories_only``) and
    directories left empty. Nothing for a remote ``root`` (``before`` None)."""
    if before is None:
        return
    kept = {os.path.abspath(path) for path in keep}
    for path in sorted((local_entries(root) or set()) - before, key=len, reverse=True):
        if os.path.abspath(path) in kept:
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)  # only if empty: anything kept inside keeps it
            elif not directories_only:
                os.unlink(path)
        except OSError:
            pass  # not empty, or gone already
