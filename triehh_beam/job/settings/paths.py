"""Paths as a job records and compares them: their canonical forms, so that a path is the same
however it was typed and from whichever working directory. A local path becomes absolute and
normalised (``./data/x.jsonl``, ``data//x.jsonl`` and ``/home/me/data/x.jsonl`` run from
``/home/me`` are one path; symbolic links are kept as typed, not resolved). A URL keeps its
object name as typed, consecutive slashes included (``gs://b/x//y`` and ``gs://b/x/y`` are two
different objects on GCS), with the scheme in lower case and no trailing slash (a directory is a
prefix, and ``FileSystems.join`` adds the separator). An input pattern is its comma-separated
parts, each canonical, sorted and without repeats (the files matched do not depend on their
order); a BigQuery table (``bq://...``) is a name, not a path, and stays as written.
"""

from __future__ import annotations

import os

__all__ = ["canonical_path", "canonical_pattern", "is_inside", "is_url"]


def is_url(path: str) -> bool:
    """True for ``scheme://...`` (gs://, s3://, ...), False for a local path."""
    return "://" in path


def canonical_path(path: str) -> str:
    """The canonical form of a local path or URL (see the module docstring); "" stays ""."""
    if not path:
        return path
    if is_url(path):
        scheme, _, rest = path.partition("://")
        rest = rest.rstrip("/")
        return f"{scheme.lower()}://{rest}"
    return os.path.abspath(path)


def canonical_pattern(pattern: str) -> str:
    """The canonical form of an input pattern: its comma-separated parts, each canonical,
    sorted and distinct; a BigQuery table (``bq://PROJECT.DATASET.TABLE``) as written, but for
    surrounding white space."""
    if pattern.strip().startswith("bq://"):
        return pattern.strip()
    parts = {canonical_path(part.strip()) for part in pattern.split(",") if part.strip()}
    return ",".join(sorted(parts))


def is_inside(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it, both in their canonical forms (a URL's
    object names compared as typed: ``gs://b/out-private`` is not inside ``gs://b/out``)."""
    path, directory = canonical_path(path), canonical_path(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


