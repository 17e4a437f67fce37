"""A job's small outputs as text: ``one_text_file`` writes a PCollection of lines as exactly one
file at a path the driver reads back (``job.batch.jobs.read_single_output``), with no shard suffix."""

from __future__ import annotations

import apache_beam as beam

__all__ = ["one_text_file"]


def one_text_file(path: str) -> beam.io.WriteToText:
    """``WriteToText`` of one shard named ``path`` exactly (no ``-00000-of-00001``): its output is
    the written file's name."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"the output path must be a non-empty string, got {path!r}")
    return beam.io.WriteToText(path, num_shards=1, shard_name_template="")
