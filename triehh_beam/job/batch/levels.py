"""Where a job keeps its candidates, its one-pass samples and the levels its rounds write, inside
the (private) state directory: ``candidates/<job id>/`` holds what a fresh job's one read kept
of every round before the plan's m was known (raw items, deleted once its samples are drawn),
``samples/<job id>/`` holds every round's sampled users' items (raw items: the
state's protection, deleted when the job ends unless kept) and ``levels/<job id>/`` one small
file per completed round (``round-0003.json``: the round's kept prefixes, no counts), written
atomically by the job as soon as the round completes, so that a run that dies mid-job loses no
completed round: the driver commits the levels to the state in order, on the next run too.
``census/spill-<id>/`` holds a census job's spilled fingerprints (keyed pseudonyms of users),
deleted when the job ends, and by the next census if a killed run left them.
"""

from __future__ import annotations

import os
import uuid
from typing import List, Optional

from apache_beam.io.filesystems import FileSystems

from triehh_beam.job.release.outputs import round_result_from_json, round_result_to_json
from triehh_beam.job.state.cas import is_local, make_private_dir
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.rounds.loop import RoundResult

__all__ = [
    "candidates_dir",
    "candidates_prefix",
    "census_spill_dir",
    "clear_candidates",
    "clear_census_spills",
    "delete_tree",
    "level_path",
    "levels_dir",
    "read_level",
    "samples_dir",
    "write_level",
]


def samples_dir(state_dir: str, job_id: str) -> str:
    return FileSystems.join(state_dir, "samples", job_id)


def candidates_prefix(state_dir: str, job_id: str) -> str:
    """Where a fresh job's one read writes its candidates (``beam.samples.candidates``): files
    ``<prefix>-*.parquet`` in the directory ``candidates_dir``."""
    return FileSystems.join(candidates_dir(state_dir, job_id), "part")


def candidates_dir(state_dir: str, job_id: str) -> str:
    return FileSystems.join(state_dir, "candidates", job_id)


def clear_candidates(state_dir: str) -> None:
    """Deletes every candidate file under ``state_dir`` (raw items: only the run that wrote them
    uses them, once), leaving the owner-only ``candidates/`` directory in place."""
    root = FileSystems.join(state_dir, "candidates")
    delete_tree(root)
    make_private_dir(root)


_SPILL = "spill-"


def census_spill_dir(state_dir: str) -> str:
    """A fresh directory for one census job's spilled fingerprints (``beam.census``)."""
    return FileSystems.join(state_dir, "census", f"{_SPILL}{uuid.uuid4().hex}")


def clear_census_spills(state_dir: str) -> None:
    """Deletes every census spill directory under ``state_dir`` (only a killed run leaves one:
    call it while holding the state directory, or another run's census would lose its files)."""
    root = FileSystems.join(state_dir, "census")
    if not is_local(root):  # no directories: the files are all there is
        files = _files_matching(FileSystems.join(root, f"{_SPILL}*", "**"))
        if files:
            FileSystems.delete(files)
        return
    if os.path.isdir(root):
        for name in sorted(os.listdir(root)):
            if name.startswith(_SPILL):
                delete_tree(os.path.join(root, name))


def levels_dir(state_dir: str, job_id: str) -> str:
    return FileSystems.join(state_dir, "levels", job_id)


def level_path(directory: str, round_index: int) -> str:
    return FileSystems.join(directory, f"round-{round_index:04d}.json")


def write_level(directory: str, round_index: int, result: RoundResult, encoder: ItemEncoder) -> None:
    """Writes round ``round_index``'s result atomically (a temporary name, then a rename): a
    reader sees the whole level or none. A retried write writes the same bytes (the round is
    deterministic in the seed), so a race between two attempts is harmless."""
    final = level_path(directory, round_index)
    temporary = f"{final}.tmp-{uuid.uuid4().hex}"
    with FileSystems.create(temporary) as f:
        f.write(round_result_to_json(result, encoder).encode("utf-8"))
    try:
        FileSystems.rename([temporary], [final])
    except Exception:
        if not FileSystems.exists(final):
            raise
        FileSystems.delete([temporary])  # another attempt published the same level first


def read_level(directory: str, round_index: int, encoder: ItemEncoder) -> Optional[RoundResult]:
    """Round ``round_index``'s level as its job wrote it, or None if it has not been written."""
    path = level_path(directory, round_index)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return round_result_from_json(f.read(), encoder)


def delete_tree(directory: str) -> None:
    """Deletes ``directory`` and every file below it (local or gs://); absent: nothing to do."""
    files = _files_matching(FileSystems.join(directory, "**"))
    if files:
        FileSystems.delete(files)
    if FileSystems.exists(directory):
        FileSystems.delete([directory])


def _files_matching(pattern: str) -> List[str]:
    try:
        results = FileSystems.match([pattern])
    except Exception:  # no match at all raises on some file systems
        return []
    return [metadata.path for result in results for metadata in result.metadata_list]

