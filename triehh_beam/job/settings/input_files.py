"""What a job's input is, pinned: ``snapshot`` lists the files an input pattern matches with
their sizes and modification times (``FileSystems`` metadata) and, on ``gs://``, their object
generations, as the ``InputSnapshot`` a job's state records after its census; ``first_change``
names the first file that differs between two snapshots. The driver refuses a round, or a
resume, whose input differs from what the census read (``InputChangedError``), because the
privacy plan (n, and so theta and m) holds only for the population the census counted.
"""

from __future__ import annotations

import collections
from typing import Dict, Iterable, List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from triehh_beam.io.files import match_files
from triehh_beam.job.settings.paths import canonical_path
from triehh_beam.proto import state_pb2

__all__ = ["InputChangedError", "check_unchanged", "first_change", "snapshot"]


class InputChangedError(ValueError):
    """The input is not what the job's census read; the message names the first difference."""


def _gcs_generations(paths: Iterable[str], client=None) -> Dict[str, int]:
    """gs:// path -> object generation, one listing per (bucket, directory) rather than one
    request per file."""
    by_directory: Dict[Tuple[str, str], set] = collections.defaultdict(set)
    for path in paths:
        bucket, _, name = path[len("gs://"):].partition("/")
        by_directory[(bucket, name.rsplit("/", 1)[0] + "/" if "/" in name else "")].add(name)
    if not by_directory:
        return {}
    if client is None:
        from google.cloud import storage

        client = storage.Client()
    generations = {}
    for (bucket, prefix), names in by_directory.items():
        for blob in client.list_blobs(bucket, prefix=prefix):
            if blob.name in names:
                generations[f"gs://{bucket}/{blob.name}"] = int(blob.generation)
    return generations


def snapshot(file_pattern: str, client=None) -> List[state_pb2.InputFile]:
    """The files ``file_pattern`` matches now, sorted by path, each with its size, modification
    time and (``gs://``) generation, named by its canonical path (``paths.canonical_path``), so
    that a resume that types the pattern differently, or runs from another directory, lists the
    same files.

    Args:
      file_pattern: the job's input pattern (``match_files``'s argument).
      client: for ``gs://``, a ``google.cloud.storage.Client`` (default: the environment's).

    Raises:
      FileNotFoundError: a part of the pattern matches nothing.
    """
    paths = match_files(file_pattern)
    metadata = {}
    for result in FileSystems.match(paths):
        for m in result.metadata_list:
            metadata[m.path] = m
    generations = _gcs_generations([p for p in paths if p.startswith("gs://")], client)
    files = []
    for path in paths:
        m = metadata.get(path)
        files.append(state_pb2.InputFile(
            path=canonical_path(path),
            size_bytes=m.size_in_bytes if m is not None else 0,
            last_updated=float(m.last_updated_in_seconds or 0.0) if m is not None else 0.0,
            generation=generations.get(path, 0),
        ))
    return files


def first_change(recorded: Iterable[state_pb2.InputFile], current: Iterable[state_pb2.InputFile]) -> Optional[str]:
    """A few words naming the first file (by path) that differs between two snapshots: gone,
    new, or changed (size, modification time or generation); None when they are the same."""
    before = {f.path: f for f in recorded}
    after = {f.path: f for f in current}
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if new is None:
            return f"{path} is gone"
        if old is None:
            return f"{path} is new"
        if old.size_bytes != new.size_bytes:
            return f"{path} changed size ({old.size_bytes:,} -> {new.size_bytes:,} bytes)"
        if old.generation != new.generation:
            return f"{path} was rewritten (generation {old.generation} -> {new.generation})"
        if old.last_updated != new.last_updated:
            return f"{path} was modified (at {new.last_updated:.6f}, the census read it at {old.last_updated:.6f})"
    return None


def check_unchanged(state: state_pb2.JobState, file_pattern: str, when: str) -> None:
    """Refuses input that is not the files a job's census read, unchanged.

    Args:
      state: the job's state (its ``input_snapshot``).
      file_pattern: the input pattern, as given now.
      when: a few words for the message ("(before round 3)").

    Raises:
      InputChangedError: naming the first difference.
    """
    try:
        current = snapshot(file_pattern)
    except FileNotFoundError as e:
        raise InputChangedError(f"the input changed since the census {when}: {e}") from None
    change = first_change(state.input_snapshot.files, current)
    if change is not None:
        raise InputChangedError(
            f"the input changed since the census {when}: {change}; refusing (the privacy plan "
            "holds only for the population the census counted)"
        )
