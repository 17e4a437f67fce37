"""Versioned job state behind a manifest, on a local directory or ``gs://``: each commit writes a
new ``state-NNNN-<sha>.pb`` object, then publishes it by compare-and-swapping ``MANIFEST.json``
(which records its SHA-256) from the generation this store last saw, so a crash leaves the
previous state published, two writers never both publish, and a corrupt or edited object is
refused naming it. A state of another schema version (one an earlier release wrote) is refused
in one line naming that release. Local state is owner-only (0700 directory, 0600 files).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import uuid
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from triehh_beam.job.state import cas
from triehh_beam.proto import state_pb2

__all__ = ["MANIFEST_NAME", "STATE_SCHEMA_VERSION", "StateError", "StateStore", "release_version"]

STATE_SCHEMA_VERSION = 2
#: The only release that wrote each earlier state schema version (its states are refused).
_WRITERS = {1: "triehh-beam 0.1.0"}
MANIFEST_SCHEMA_VERSION = 1
MANIFEST_NAME = "MANIFEST.json"
# What a manifest may name: an object of this directory (never a path elsewhere).
_OBJECT_NAME = re.compile(r"state-[0-9]{4,}-[0-9A-Za-z_-]+\.pb")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def release_version() -> str:
    """This release's version, as installed ("0.2.0"; "unknown" when run from a source tree
    that is not installed)."""
    try:
        return importlib.metadata.version("triehh-beam")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class StateError(ValueError):
    """The state directory holds something that cannot be trusted; the message names it."""


def _read(path: str) -> bytes:
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()


def _write(path: str, data: bytes) -> None:
    if cas.is_local(path):
        # Owner-only (the object holds the secret seed), written whole under a temporary name
        # and renamed into place (an identical object written again replaces itself).
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        cas.write_private_file(temporary, data)
        os.replace(temporary, path)
        return
    with FileSystems.create(path, compression_type="uncompressed") as f:
        f.write(data)


class StateStore:
    """Reads and commits ``JobState`` objects under ``root`` (local path or ``gs://``).

    Args:
      root: the state directory.
      client: for ``gs://``, the ``google.cloud.storage.Client`` of the manifest's
        compare-and-swap (default: the environment's).
    """

    def __init__(self, root: str, client=None):
        self.root = root
        self._cas = cas.cas_store_for(root, client=client)
        self._manifest_generation: Optional[cas.Generation] = None

    def _path(self, name: str) -> str:
        return FileSystems.join(self.root, name)

    @property
    def manifest_path(self) -> str:
        return self._cas.location(MANIFEST_NAME)

    def _read_manifest(self) -> Optional[cas.Versioned]:
        try:
            return self._cas.read(MANIFEST_NAME)
        except cas.CasError as e:
            raise StateError(f"{self.manifest_path}: not a valid manifest ({e})") from None

    def exists(self) -> bool:
        return self._read_manifest() is not None

    def read_manifest(self) -> Optional[dict]:
        """The manifest's fields, or None when there is none.

        Raises:
          StateError: the manifest is not valid JSON of a known schema version.
        """
        versioned = self._read_manifest()
        if versioned is None:
            return None
        try:
            manifest = json.loads(versioned.data.decode("utf-8"))
            version = manifest["schema_version"]
            object_name, sha = manifest["state_object"], manifest["sha256"]
        except (ValueError, KeyError, TypeError) as e:
            raise StateError(f"{self.manifest_path}: not a valid manifest ({e})") from None
        if not isinstance(object_name, str) or not _OBJECT_NAME.fullmatch(object_name):
            raise StateError(
                f"{self.manifest_path}: the manifest names {object_name!r}, not a state object of "
                "this directory"
            )
        if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            raise StateError(f"{self.manifest_path}: the manifest's sha256 {sha!r} is not a SHA-256")
        if isinstance(version, bool) or not isinstance(version, int):
            raise StateError(f"{self.manifest_path}: the manifest's schema_version {version!r} is not an integer")
        if version != MANIFEST_SCHEMA_VERSION:
            raise StateError(
                f"{self.manifest_path}: manifest schema version {version} is not supported "
                f"(this release reads {MANIFEST_SCHEMA_VERSION})"
            )
        self._manifest_generation = versioned.generation
        return manifest

    def load(self) -> Optional[state_pb2.JobState]:
        """The published state, or None for a directory with no manifest.

        Raises:
          StateError: the manifest or the object it names is unreadable, corrupt, of an
            unknown schema version, or does not match the manifest's checksum.
        """
        manifest = self.read_manifest()
        if manifest is None:
            return None
        object_path = self._path(manifest["state_object"])
        expected_sha = manifest["sha256"]
        try:
            data = _read(object_path)
        except (IOError, OSError) as e:
            raise StateError(f"{object_path}: state object named by the manifest is unreadable ({e})")
        actual_sha = hashlib.sha256(data).hexdigest()
        if actual_sha != expected_sha:
            raise StateError(
                f"{object_path}: checksum mismatch (manifest says {expected_sha[:16]}..., file has "
                f"{actual_sha[:16]}...); the state object is corrupt or was edited"
            )
        state = state_pb2.JobState()
        try:
            state.ParseFromString(data)
        except Exception as e:  # protobuf raises DecodeError, a private subclass of Exception
            raise StateError(f"{object_path}: not a JobState protobuf ({e})") from None
        if state.schema_version != STATE_SCHEMA_VERSION:
            writer = _WRITERS.get(state.schema_version) or (
                f"triehh-beam {state.written_by}" if state.written_by else "an unknown release")
            raise StateError(
                f"{object_path}: a job state of schema version {state.schema_version}, written by {writer}, "
                f"which this release (state schema {STATE_SCHEMA_VERSION}) does not resume: start "
                "the job again in a new output and state directory"
            )
        return state

    def commit(self, state: state_pb2.JobState) -> str:
        """Writes ``state`` as a new object, then publishes it through the manifest.

        The manifest is swapped from the generation this store last read or wrote (or created,
        if it has seen none), so a commit never overwrites another writer's.

        Returns:
          The path of the new state object.

        Raises:
          StateError: another writer published since this store last read the manifest.
        """
        state = state_pb2.JobState.FromString(state.SerializeToString())  # never mutate the caller's
        state.schema_version = STATE_SCHEMA_VERSION
        state.written_by = release_version()
        data = state.SerializeToString(deterministic=True)
        sha = hashlib.sha256(data).hexdigest()
        object_name = f"state-{state.rounds_completed:04d}-{sha[:16]}.pb"
        object_path = self._path(object_name)
        if cas.is_local(self.root):
            cas.make_private_dir(self.root)
        elif not FileSystems.exists(self.root):
            FileSystems.mkdirs(self.root)
        _write(object_path, data)
        manifest = json.dumps(
            {
                "schema_version": MANIFEST_SCHEMA_VERSION,
                "state_object": object_name,
                "sha256": sha,
                "rounds_completed": state.rounds_completed,
            },
            indent=2,
            sort_keys=True,
        ).encode("utf-8")
        try:
            if self._manifest_generation is None:
                self._manifest_generation = self._cas.create(MANIFEST_NAME, manifest)
            else:
                self._manifest_generation = self._cas.replace(
                    MANIFEST_NAME, manifest, self._manifest_generation
                )
        except cas.PreconditionFailed:
            # A conditional write retried after a lost response fails against its own first
            # attempt: if the manifest now holds exactly what we wrote, we won.
            current = self._cas.read(MANIFEST_NAME)
            if current is not None and current.data == manifest:
                self._manifest_generation = current.generation
                return object_path
            raise StateError(
                f"{self.manifest_path}: another run published state in this directory since this "
                "one read it; refusing to overwrite it"
            ) from None
        return object_path
