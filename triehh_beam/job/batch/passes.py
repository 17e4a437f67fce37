"""A pass that reads a job's records again after its census (the sampling pass, a whole-item
release, the frequency estimates), checked before it runs (Google Cloud credentials, a table's
pin still in BigQuery's time-travel window) and after (no record the census read is now
unreadable, exactly the records the census counted were read, the files unchanged), so that
nothing computed from other records is ever kept, released or published.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Dict, Tuple

from apache_beam.io.filesystems import FileSystems

from triehh_beam.io.schema import RecordFormatError
from triehh_beam.job.batch import graphs
from triehh_beam.job.batch import jobs as jobs_lib
from triehh_beam.job.batch.jobs import JobRunner
from triehh_beam.job.settings import sources
from triehh_beam.job.settings.input_files import InputChangedError
from triehh_beam.proto import state_pb2

__all__ = ["ESTIMATES", "RELEASE", "SAMPLING", "PassWords", "run_checked_pass"]


@dataclasses.dataclass(frozen=True)
class PassWords:
    """How a pass's refusals name it: ``label`` ("sampling"), what it did with the records
    (``reader``, "the sampling pass ranked"), the input check after it (``after``) and what a
    refusal leaves undone for unreadable input and for another number of records."""

    label: str
    reader: str
    after: str
    unreadable_loss: str
    count_loss: str


SAMPLING = PassWords("sampling", "the sampling pass ranked", "(after the sampling pass read it)",
                     "no round was run", "no sample was kept")
RELEASE = PassWords("release", "the release pass read", "(after the release pass read it)",
                    "nothing was released", "nothing was released")
ESTIMATES = PassWords("estimates", "the frequency estimates read", "(after the frequency estimates read it)",
                      "nothing was published", "nothing was published")


def run_checked_pass(config: Any, jobs: JobRunner, state: state_pb2.JobState,
                     build: Callable[[Any, Any], None], phase: str, summary: str,
                     words: PassWords) -> Tuple[dict, Dict[str, int]]:
    """Runs ``build`` (a job graph that writes its summary document, with ``"records"``, to
    ``summary`` and its unreadable records beside it, ``graphs.unreadable_path``) as a job of
    ``jobs``: (the summary document, the job's counters). Both files are deleted once read.

    Raises:
      BigQueryAccessError: the job reads BigQuery and no credentials are found.
      InputChangedError: a table's pin is too old, a record the census read is unreadable, the
        pass read another number of records, or the files changed meanwhile.
    """
    sources.check_credentials(config, jobs.options)
    sources.check_readable(state, config)  # a table's pin still in its time-travel window
    expected = state.input_snapshot.records
    counters = jobs.run(build, phase, expected)
    unreadable = jobs_lib.read_single_output(graphs.unreadable_path(summary))
    document = json.loads(jobs_lib.read_single_output(summary))
    FileSystems.delete([summary, graphs.unreadable_path(summary)])
    try:
        graphs.refuse_unreadable(unreadable)
    except RecordFormatError as e:
        raise InputChangedError(f"{words.label}: input the census read is now unreadable: {e}; "
                                f"{words.unreadable_loss}") from None
    if document["records"] != expected:
        # The one check a --query has: it cannot be pinned, so it should be deterministic.
        why = ("the --query result changed (make it deterministic, e.g. a fixed date range)"
               if config.query is not None else "the input changed under the job")
        raise InputChangedError(f"{words.reader} {document['records']:,} records where the census counted "
                                f"{expected:,}: {why}; {words.count_loss}")
    sources.check_unchanged(state, config, words.after)
    return document, counters
