"""Files through Beam's ``FileSystems`` (local or ``gs://``): ``match_files`` expands paths and
globs, several separated by commas or given as a list, into the sorted, distinct paths they match
and refuses a pattern that matches nothing (the pipeline reader and the evaluation both read
exactly the files it returns); ``read_file`` reads one small file whole."""

from __future__ import annotations

from typing import List, Sequence, Tuple, Union

from apache_beam.io.filesystems import FileSystems

__all__ = ["match_files", "read_file", "split_patterns"]


def split_patterns(file_pattern: Union[str, Sequence[str]]) -> Tuple[str, ...]:
    """The patterns of ``file_pattern``: a string split at commas, or a list of strings (for
    paths that contain commas), stripped.

    Raises:
      TypeError: neither a string nor a list of strings.
      ValueError: an empty pattern (``"a.csv,,b.csv"``, ``""``, ``[]``).
    """
    if isinstance(file_pattern, str):
        patterns = file_pattern.split(",")
    elif isinstance(file_pattern, (list, tuple)):
        patterns = list(file_pattern)
    else:
        raise TypeError(
            f"file_pattern must be a string or a list of strings, not {type(file_pattern).__name__}"
        )
    patterns = [p.strip() if isinstance(p, str) else p for p in patterns]
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise ValueError(f"file_pattern must name non-empty patterns, got {file_pattern!r}")
    return tuple(patterns)


def match_files(file_pattern: Union[str, Sequence[str]]) -> List[str]:
    """The sorted, distinct paths the patterns match (a file matched twice is listed once).

    Raises:
      FileNotFoundError: a pattern matches no file; the message names it.
      TypeError, ValueError: as ``split_patterns``.
    """
    paths = set()
    for pattern in split_patterns(file_pattern):
        matched = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
        if not matched:
            raise FileNotFoundError(f"no records files match {pattern!r}")
        paths.update(matched)
    return sorted(paths)


def read_file(path: str) -> bytes:
    """The bytes of the file at ``path``, as stored (no decompression by suffix).

    Raises:
      OSError: it cannot be read (missing, a directory, no permission); the message names it.
    """
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()
