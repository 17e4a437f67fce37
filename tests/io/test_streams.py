"""Tests of triehh_beam.io.streams: format and compression from a path, and decompression that
refuses a truncated stream with every codec."""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib

import pytest
import zstandard

from triehh_beam.io import (
    RecordFormatError,
    infer_format,
)
from triehh_beam.io.streams import compression_of, open_records
from tests.io.helpers import (
    read_rows,
)


def test_format_inference():
    assert [infer_format(p) for p in ("a.jsonl", "b.JSON", "c.ndjson.gz", "d.csv.bz2", "e.pq",
                                      "gs://b/f.parquet")] == ["jsonl", "jsonl", "jsonl", "csv",
                                                               "parquet", "parquet"]
    with pytest.raises(ValueError, match="cannot tell the format of 'x.txt'"):
        infer_format("x.txt")


_CODECS = {
    ".gz": lambda b: gzip.compress(b, mtime=0),
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".lzma": lambda b: lzma.compress(b, format=lzma.FORMAT_ALONE),
    ".zst": lambda b: zstandard.ZstdCompressor().compress(b),
    ".deflate": zlib.compress,
}
_LINES = b"".join(b'{"user_id": "u%d", "item": "w%d"}\n' % (i, i % 7) for i in range(3000))


def _stream_bytes(path):
    with open_records(path, compression_of(path, infer_format(path))) as f:
        return f.read()


@pytest.mark.parametrize("suffix", sorted(_CODECS))
def test_every_codec_decompresses_whole_and_concatenated_streams(tmp_path, suffix):
    path = tmp_path / f"r.jsonl{suffix}"
    path.write_bytes(_CODECS[suffix](_LINES))
    assert _stream_bytes(str(path)) == _LINES
    if suffix not in (".deflate", ".lzma"):  # formats that define concatenation
        path.write_bytes(_CODECS[suffix](_LINES) + _CODECS[suffix](b"more\n"))
        assert _stream_bytes(str(path)) == _LINES + b"more\n"


@pytest.mark.parametrize("suffix", sorted(_CODECS))
def test_a_truncated_stream_is_refused_with_every_codec(tmp_path, suffix):
    data = _CODECS[suffix](_LINES)
    path = tmp_path / f"cut.jsonl{suffix}"
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(RecordFormatError, match="ends before its end marker"):
        _stream_bytes(str(path))
    # Through the reader, the error names the file.
    with pytest.raises(RecordFormatError, match=r"cut\.jsonl.*ends before its end marker"):
        read_rows(str(path))


@pytest.mark.parametrize("suffix", sorted(_CODECS))
def test_a_zero_byte_compressed_file_is_empty(tmp_path, suffix):
    path = tmp_path / f"e.csv{suffix}"
    path.write_bytes(b"")
    assert _stream_bytes(str(path)) == b""
    assert read_rows(str(path)) == ([], {})


def test_compression_from_the_suffix():
    assert [compression_of(p, "csv") for p in ("a.csv", "a.csv.GZ", "a.csv.zstd", "a.csv.xz")] == [
        None, "gzip", "zstd", "lzma"]
    with pytest.raises(ValueError, match="compress internally"):
        compression_of("a.parquet.gz", "parquet")


def test_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        _stream_bytes(str(tmp_path / "gone.csv.gz"))
