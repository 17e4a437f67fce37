"""The on-disk form of a round's sample, a private artefact of a job: Parquet files
``<dir>/round-{r:04d}/part-{shard:05d}.parquet`` read and written through Beam's ``FileSystems``
(local paths and ``gs://`` alike), one row per sampled user: ``choice`` (float64, the user's
item-choice uniform for that round), ``sequences`` (list<binary>: the user's distinct encoded
sequences in canonical order) and ``counts`` (list<int64>, each > 0). A sampled user whose items
were all dropped is a row with empty lists. No user id is stored: a round needs none. A
sequence's bytes are the ``Prefix`` wire message of ``protocol/rounds/wire.py`` (its units' wire
forms, the terminator as an empty unit), so every sequence round-trips exactly; the schema's
metadata says whether units are text, the format version, the round and the shard.
``sequence_table`` turns a sample table into the columnar ``protocol.rounds.columnar.SequenceTable``,
Python once per distinct sequence. The artefact holds raw data: keep it where the state is.
"""

from __future__ import annotations

import io
from typing import Dict, Iterable, List, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.proto import vote_pb2
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.rounds import columnar

__all__ = [
    "FORMAT_VERSION",
    "ReadSampleTables",
    "SampleFormatError",
    "WriteSampleTables",
    "part_path",
    "read_sample_table",
    "round_pattern",
    "sample_table",
    "sequence_table",
    "sequences_from_bytes",
    "sequence_to_bytes",
    "table_round_and_shard",
    "write_sample_table",
]

FORMAT_VERSION = b"1"
_VERSION_KEY = b"triehh.sample.version"
_TEXT_KEY = b"triehh.sample.text_units"
_ROUND_KEY = b"triehh.sample.round"
_SHARD_KEY = b"triehh.sample.shard"

_FIELDS = [
    pa.field("choice", pa.float64(), nullable=False),
    pa.field("sequences", pa.list_(pa.binary()), nullable=False),
    pa.field("counts", pa.list_(pa.int64()), nullable=False),
]


class SampleFormatError(ValueError):
    """A sample file is not one this module wrote (schema, version); the text names the file."""


def _schema(text_units: bool, round_index: int, shard: int) -> pa.Schema:
    return pa.schema(
        _FIELDS,
        metadata={
            _VERSION_KEY: FORMAT_VERSION,
            _TEXT_KEY: b"1" if text_units else b"0",
            _ROUND_KEY: str(round_index).encode(),
            _SHARD_KEY: str(shard).encode(),
        },
    )


def sequence_to_bytes(sequence: Units) -> bytes:
    """A sequence's stored form: the ``Prefix`` wire message of its units (UTF-8 for text)."""
    return vote_pb2.Prefix(
        units=[u.encode("utf-8") if isinstance(u, str) else u for u in sequence]
    ).SerializeToString()


_DECODED: Dict[Tuple[bytes, bool], Units] = {}  # a worker's decoded sequences, across its tables
_DECODED_LIMIT = 1 << 18


def sequences_from_bytes(raws: Iterable[bytes], text_units: bool) -> List[Units]:
    """Inverse of ``sequence_to_bytes`` for each of ``raws``. A worker decodes a sequence once,
    whatever the round and shard (the same items fill every round's tables)."""
    parsed = []
    message = vote_pb2.Prefix()
    for raw in raws:
        known = _DECODED.get((raw, text_units))
        if known is None:
            message.ParseFromString(raw)
            known = tuple(u.decode("utf-8") for u in message.units) if text_units else tuple(message.units)
            if len(_DECODED) >= _DECODED_LIMIT:
                _DECODED.clear()
            _DECODED[(raw, text_units)] = known
        parsed.append(known)
    return parsed


def sample_table(
    choice: np.ndarray,
    offsets: np.ndarray,
    sequence_bytes: pa.Array,
    counts: np.ndarray,
    text_units: bool,
    round_index: int,
    shard: int,
) -> pa.Table:
    """A sample table: user ``i`` holds list entries ``offsets[i]:offsets[i + 1]``.

    Args:
      choice: float64 per user, its item-choice uniform.
      offsets: int per user + 1, from 0.
      sequence_bytes: binary per entry (``sequence_to_bytes``), canonical order within a user.
      counts: int64 per entry, > 0.
      text_units: whether units are text (recorded in the schema for the reader).
      round_index, shard: recorded in the schema (the file's name is made from them).
    """
    list_offsets = pa.array(np.asarray(offsets, dtype=np.int32), pa.int32())
    return pa.Table.from_arrays(
        [
            pa.array(np.asarray(choice, dtype=np.float64), pa.float64()),
            pa.ListArray.from_arrays(list_offsets, sequence_bytes.cast(pa.binary())),
            pa.ListArray.from_arrays(list_offsets, pa.array(np.asarray(counts, dtype=np.int64))),
        ],
        schema=_schema(text_units, round_index, shard),
    )


def _meta(table: pa.Table, key: bytes, source: str) -> bytes:
    metadata = table.schema.metadata or {}
    if metadata.get(_VERSION_KEY) != FORMAT_VERSION or key not in metadata:
        raise SampleFormatError(f"{source}: not a version-{FORMAT_VERSION.decode()} sample table")
    return metadata[key]


def table_round_and_shard(table: pa.Table, source: str = "<sample table>") -> Tuple[int, int]:
    """The (round, shard) a sample table records."""
    return int(_meta(table, _ROUND_KEY, source)), int(_meta(table, _SHARD_KEY, source))


def sequence_table(table: pa.Table, source: str = "<sample table>") -> Tuple[columnar.SequenceTable, np.ndarray]:
    """A sample table as ``(SequenceTable, uniforms)`` for ``columnar.count_votes``.

    Raises:
      SampleFormatError: the table is not a sample table of this version.
    """
    text_units = _meta(table, _TEXT_KEY, source) == b"1"
    sequences = table.column("sequences").combine_chunks()
    counts = table.column("counts").combine_chunks()
    offsets = np.asarray(sequences.offsets, dtype=np.int64)
    offsets = offsets - offsets[0]
    flat = sequences.flatten()
    encoded = pc.dictionary_encode(flat)
    distinct = sequences_from_bytes(encoded.dictionary.to_pylist(), text_units)
    codes = np.asarray(encoded.indices, dtype=np.int64) if len(flat) else np.zeros(0, np.int64)
    flat_counts = np.asarray(counts.flatten(), dtype=np.int64) if len(flat) else np.zeros(0, np.int64)
    uniforms = np.asarray(table.column("choice"), dtype=np.float64)
    return columnar.sequence_table(distinct, offsets, codes, flat_counts), uniforms


def round_pattern(directory: str, round_index: int) -> str:
    """The pattern matching every part of round ``round_index``'s sample."""
    return FileSystems.join(directory, f"round-{round_index:04d}", "part-*.parquet")


def part_path(directory: str, round_index: int, shard: int) -> str:
    return FileSystems.join(directory, f"round-{round_index:04d}", f"part-{shard:05d}.parquet")


def write_sample_table(path: str, table: pa.Table) -> None:
    """Writes one sample table to ``path`` (any ``FileSystems`` path), replacing it.

    The Parquet bytes are made in memory and written in one create, so a retried write writes
    the same bytes (the sample and its file name depend only on the keys and the records).
    """
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    with FileSystems.create(path, mime_type="application/octet-stream", compression_type="uncompressed") as f:
        f.write(sink.getvalue())


def read_sample_table(path: str) -> pa.Table:
    """Reads one sample table written by ``write_sample_table``.

    Raises:
      SampleFormatError: the file is not a sample table of this version (the text names it).
    """
    with FileSystems.open(path, compression_type="uncompressed") as f:
        data = f.read()
    try:
        table = pq.read_table(pa.BufferReader(data))
    except pa.ArrowException as error:
        raise SampleFormatError(f"{path}: not a Parquet sample table ({error})") from error
    if table.schema.remove_metadata() != pa.schema(_FIELDS).remove_metadata() or not (
        table.schema.metadata and table.schema.metadata.get(_VERSION_KEY) == FORMAT_VERSION
    ):
        raise SampleFormatError(f"{path}: not a version-{FORMAT_VERSION.decode()} sample table")
    return table


@beam.typehints.with_input_types(Tuple[int, pa.Table])
@beam.typehints.with_output_types(Tuple[int, str])
class _WriteTableDoFn(beam.DoFn):
    def __init__(self, directory: str):
        self._directory = directory

    def setup(self):
        self._files = Metrics.counter(METRICS_NAMESPACE, "sample_files_written")

    def process(self, keyed):
        round_index, table = keyed
        recorded_round, shard = table_round_and_shard(table)
        if recorded_round != round_index:
            raise ValueError(f"a round-{recorded_round} table keyed as round {round_index}")
        path = part_path(self._directory, round_index, shard)
        write_sample_table(path, table)
        self._files.inc()
        yield round_index, path


class WriteSampleTables(beam.PTransform):
    """``(round, sample table)`` -> the files written, ``(round, path)``, one per table.

    The file of a table is ``part_path(directory, round, shard)`` with the shard the table
    records, so a retried bundle rewrites the same file with the same bytes.
    """

    def __init__(self, directory: str):
        super().__init__()
        self._directory = directory

    def expand(self, tables):
        return tables | "WriteTables" >> beam.ParDo(_WriteTableDoFn(self._directory))


def _match(pattern: str) -> List[str]:
    matched = FileSystems.match([pattern])[0].metadata_list
    return sorted(m.path for m in matched)


@beam.typehints.with_output_types(pa.Table)
class ReadSampleTables(beam.PTransform):
    """The sample tables of round ``round_index`` under ``directory``: one ``pa.Table`` per file,
    the files matched when the job runs (so that a job can read what an earlier stage wrote)
    and read in parallel (a reshuffle spreads them over workers)."""

    def __init__(self, directory: str, round_index: int):
        super().__init__()
        self._pattern = round_pattern(directory, round_index)

    def expand(self, pbegin):
        return (
            pbegin
            | "Pattern" >> beam.Create([self._pattern])
            | "MatchParts" >> beam.FlatMap(_match).with_output_types(str)
            | "Spread" >> beam.Reshuffle()
            | "ReadParts" >> beam.Map(read_sample_table).with_output_types(pa.Table)
        )
