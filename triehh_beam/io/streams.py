"""Opening records files: the format and compression a path names, and a byte stream of its
records through Beam's ``FileSystems`` (local or ``gs://``), decompressed with the standard
``zlib``, ``bz2`` and ``lzma`` modules (and ``zstandard``) so that a stream cut short before its
end marker is refused, not read as a shorter file. Also the errors that mean "this file is not
in its format", which the reader turns into ``RecordFormatError``, and raw streams that always
return as many bytes as asked for (whole blocks for the readers).
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import io
import lzma
import os
import struct
import zlib
from typing import Iterator, Optional

import pyarrow as pa
import zstandard
from apache_beam.io.filesystems import FileSystems

from triehh_beam.io.schema import FORMATS, RecordFormatError

__all__ = [
    "COMPRESSIONS",
    "UNREADABLE_ERRORS",
    "FullReads",
    "UnknownFormatError",
    "compression_of",
    "describe_error",
    "infer_format",
    "open_records",
]

_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
# Compression by suffix, as Beam's CompressionTypes names them.
COMPRESSIONS = {
    ".bz2": "bzip2",
    ".deflate": "deflate",
    ".gz": "gzip",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".xz": "lzma",
    ".lzma": "lzma",
}
# Compressed bytes are read this many at a time.
_CHUNK_BYTES = 1 << 20

# What reading a file that is not in its format raises (a missing file stays FileNotFoundError):
# Arrow's parse errors, a corrupt gzip/deflate (zlib), xz (lzma), bz2 (OSError) or zstd stream,
# and OS-level read errors, which name no file by themselves.
UNREADABLE_ERRORS = (
    pa.ArrowException,
    zlib.error,
    lzma.LZMAError,
    zstandard.ZstdError,
    EOFError,
    OSError,
    UnicodeError,
    struct.error,
    csv.Error,
)


def _compression_suffix(path: str) -> Optional[str]:
    lowered = path.lower()
    for suffix, compression in COMPRESSIONS.items():
        if lowered.endswith(suffix):
            return compression
    return None


def infer_format(path: str) -> str:
    """The records format of a path from its extension, ignoring a compression suffix (.gz ...).

    Raises:
      ValueError: for an extension that is not .jsonl/.json/.ndjson, .csv or .parquet/.pq.
    """
    stem = path
    if _compression_suffix(path) is not None:
        stem = os.path.splitext(path)[0]
    extension = os.path.splitext(stem)[1].lower()
    if extension not in _EXTENSIONS:
        raise UnknownFormatError(path)
    return _EXTENSIONS[extension]


class UnknownFormatError(ValueError):
    """A path whose extension names no records format; ``path`` is the path. The command line
    says which flag gives the format; this message says what the library takes."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(
            f"cannot tell the format of {path!r} from its extension: name files *.jsonl, *.csv or "
            f"*.parquet (optionally compressed, e.g. *.jsonl.gz), or give the format, one of {', '.join(FORMATS)}")


def compression_of(path: str, format: str) -> Optional[str]:
    """The compression a path's suffix names (``COMPRESSIONS``), None for none.

    Raises:
      ValueError: a compressed Parquet file (Parquet compresses internally).
    """
    compression = _compression_suffix(path)
    if format == "parquet" and compression is not None:
        raise ValueError(
            f"{path!r}: Parquet files compress internally; cannot read a {compression} Parquet file"
        )
    return compression


def describe_error(error: BaseException) -> str:
    """An exception's message in at most 300 characters (its type when it has none)."""
    text = str(error).strip() or type(error).__name__
    return text if len(text) <= 300 else text[:300] + "..."


@contextlib.contextmanager
def open_records(path: str, compression: Optional[str]) -> Iterator[io.RawIOBase]:
    """A binary stream of a file's bytes, decompressed (``compression``: ``COMPRESSIONS``).

    Raises:
      FileNotFoundError: the file does not exist.
      RecordFormatError (when read): a compressed stream that stops before its end marker.
    """
    with FileSystems.open(path, "application/octet-stream", compression_type="uncompressed") as raw:
        yield raw if compression is None else _Decompressed(raw, compression)


class FullReads(io.RawIOBase):
    """A raw stream whose reads return as many bytes as asked for, fewer only at the end.

    The readers read blocks of a set size (a short read costs a smaller block, or a block
    with no line break to cut at). Subclasses implement ``_read_some`` (b"" only at the end).
    """

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view):
            data = self._read_some(len(view) - filled)
            if not len(data):
                break
            view[filled : filled + len(data)] = data
            filled += len(data)
        return filled

    def _read_some(self, n: int):
        raise NotImplementedError


def _decompressor(compression: str):
    if compression == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if compression == "deflate":
        return zlib.decompressobj()
    if compression == "bzip2":
        return bz2.BZ2Decompressor()
    if compression == "lzma":
        return lzma.LZMADecompressor()
    if compression == "zstd":
        # Beam's window limit: large enough for any zstd level, bounded against hostile files.
        return zstandard.ZstdDecompressor(max_window_size=1 << 31).decompressobj()
    raise ValueError(f"unknown compression {compression!r}; one of {sorted(set(COMPRESSIONS.values()))}")


class _Decompressed(FullReads):
    """The decompressed bytes of a compressed stream; several concatenated streams are read one
    after the other (``cat a.gz b.gz``). A zero-byte file is empty; a stream that stops before
    its end marker (the decompressor's ``eof``) is a ``RecordFormatError``."""

    def __init__(self, raw, compression: str):
        super().__init__()
        self._raw = raw
        self._compression = compression
        _decompressor(compression)  # an unknown compression fails now, not at the first read
        self._decompressor = None  # the current stream's, None between streams
        self._pending = b""  # compressed bytes not fed yet
        self._out = memoryview(b"")

    def _read_some(self, n: int):
        while not len(self._out):
            if not self._decompress_more():
                return b""
        data, self._out = self._out[:n], self._out[n:]
        return data

    def _decompress_more(self) -> bool:
        """Decompresses the next chunk into ``_out``; False at the end of the file."""
        if self._decompressor is not None and self._decompressor.eof:
            self._pending = self._decompressor.unused_data + self._pending
            self._decompressor = None
        if not self._pending:
            self._pending = self._raw.read(_CHUNK_BYTES)
            if not self._pending:
                if self._decompressor is not None:
                    raise RecordFormatError(
                        "the compressed stream ends before its end marker: the file is "
                        "truncated or corrupt"
                    )
                return False
        if self._decompressor is None:
            self._decompressor = _decompressor(self._compression)
        data, self._pending = self._pending, b""
        self._out = memoryview(self._decompressor.decompress(data))
        return True
