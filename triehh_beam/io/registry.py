"""The registry of enrolled devices a federated job plans for, their ids only: ``.parquet``,
``.csv`` and ``.jsonl`` tables (ids in ``column``) or text with one id per line, read through
``FileSystems``, each id canonicalised as the sampler does and counted once. Each id is one user
of the privacy analysis, so enrolment must admit one device per person."""

from __future__ import annotations

import io
from typing import List

from apache_beam.io.filesystems import FileSystems

from triehh_beam.protocol.federated.selection import Registry

__all__ = ["RegistryError", "read_registry"]


class RegistryError(ValueError):
    """The registry cannot be read, or holds no device."""


def _read_bytes(path: str) -> bytes:
    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            return f.read()
    except Exception as e:  # Beam raises its own IOError subclasses per filesystem
        raise RegistryError(f"cannot read the device registry {path}: {e}") from e


def _table_ids(path: str, data: bytes, column: str) -> List:
    import pyarrow
    import pyarrow.csv
    import pyarrow.json
    import pyarrow.parquet

    readers = {".parquet": lambda: pyarrow.parquet.read_table(io.BytesIO(data), columns=[column]),
               # Ids as text, as the record reader reads them: "007" is not "7".
               ".csv": lambda: pyarrow.csv.read_csv(
                   io.BytesIO(data), convert_options=pyarrow.csv.ConvertOptions(column_types={column: pyarrow.string()})),
               ".jsonl": lambda: pyarrow.json.read_json(io.BytesIO(data))}
    reader = next(r for ext, r in readers.items() if path.endswith(ext))
    try:
        table = reader()
    except Exception as e:  # pyarrow's ArrowInvalid and friends
        raise RegistryError(f"cannot read the device registry {path}: {e}") from e
    if column not in table.column_names:
        raise RegistryError(f"the device registry {path} has no column {column!r} "
                            f"(it has {', '.join(table.column_names)}); name it with --user-column")
    ids = table.column(column).to_pylist()
    if any(i is None for i in ids):
        raise RegistryError(f"the device registry {path} has an empty id in column {column!r}")
    return ids


def read_registry(path: str, column: str = "user_id") -> Registry:
    """The registry at ``path`` (see the module docstring).

    Raises:
      RegistryError: unreadable, an empty or invalid id, or no device at all.
    """
    data = _read_bytes(path)
    if path.endswith((".parquet", ".csv", ".jsonl")):
        ids = _table_ids(path, data, column)
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RegistryError(f"the device registry {path} is not UTF-8 text: {e}") from e
        ids = [line.strip() for line in text.splitlines() if line.strip()]
    try:
        registry = Registry.from_ids(ids)
    except (TypeError, ValueError) as e:
        raise RegistryError(f"the device registry {path} has an invalid id: {e}") from e
    if not len(registry):
        raise RegistryError(f"the device registry {path} holds no device id")
    return registry
