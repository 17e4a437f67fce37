"""Versioned job state behind a manifest, on any Beam ``FileSystems`` path.

Layout of a state directory::

  MANIFEST.json                     {"schema_version", "state_object", "sha256", "rounds_completed"}
  state-0003-<sha256[:16]>.pb       a JobState protobuf, one per commit, never rewritten

A commit writes the new object first, then publishes it by replacing the manifest (write a
temporary file, then rename it over the old one). A crash before the rename leaves the previous
round published; a reader only ever follows the manifest. The manifest records the object's
SHA-256, so a truncated, corrupted or hand-edited object is refused with a message naming it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from triehh_beam.proto import state_pb2

__all__ = ["MANIFEST_NAME", "STATE_SCHEMA_VERSION", "StateError", "StateStore"]

STATE_SCHEMA_VERSION = 1
MANIFEST_SCHEMA_VERSION = 1
MANIFEST_NAME = "MANIFEST.json"


class StateError(ValueError):
    """The state directory holds something that cannot be trusted; the message names it."""


def _read(path: str) -> bytes:
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()


def _write(path: str, data: bytes) -> None:
    with FileSystems.create(path, compression_type="uncompressed") as f:
        f.write(data)


class StateStore:
    """Reads and commits ``JobState`` objects under ``root`` (local path or ``gs://``)."""

    def __init__(self, root: str):
        self.root = root

    def _path(self, name: str) -> str:
        return FileSystems.join(self.root, name)

    @property
    def manifest_path(self) -> str:
        return self._path(MANIFEST_NAME)

    def exists(self) -> bool:
        return FileSystems.exists(self.manifest_path)

    def load(self) -> Optional[state_pb2.JobState]:
        """The published state, or None for a directory with no manifest.

        Raises:
          StateError: the manifest or the object it names is unreadable, corrupt, of an
            unknown schema version, or does not match the manifest's checksum.
        """
        if not self.exists():
            return None
        manifest_path = self.manifest_path
        try:
            manifest = json.loads(_read(manifest_path).decode("utf-8"))
            version = manifest["schema_version"]
            object_name = manifest["state_object"]
            expected_sha = manifest["sha256"]
        except (ValueError, KeyError, TypeError) as e:
            raise StateError(f"{manifest_path}: not a valid manifest ({e})") from None
        if version != MANIFEST_SCHEMA_VERSION:
            raise StateError(
                f"{manifest_path}: manifest schema version {version} is not supported "
                f"(this release reads {MANIFEST_SCHEMA_VERSION})"
            )
        object_path = self._path(object_name)
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
            raise StateError(
                f"{object_path}: state schema version {state.schema_version} is not supported "
                f"(this release reads {STATE_SCHEMA_VERSION})"
            )
        return state

    def commit(self, state: state_pb2.JobState) -> str:
        """Writes ``state`` as a new object, then publishes it through the manifest.

        Returns:
          The path of the new state object.
        """
        state = state_pb2.JobState.FromString(state.SerializeToString())  # never mutate the caller's
        state.schema_version = STATE_SCHEMA_VERSION
        data = state.SerializeToString(deterministic=True)
        sha = hashlib.sha256(data).hexdigest()
        object_name = f"state-{state.rounds_completed:04d}-{sha[:16]}.pb"
        object_path = self._path(object_name)
        if not FileSystems.exists(self.root):
            FileSystems.mkdirs(self.root)
        _write(object_path, data)
        manifest = {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "state_object": object_name,
            "sha256": sha,
            "rounds_completed": state.rounds_completed,
        }
        temporary = self._path(f".{MANIFEST_NAME}.{uuid.uuid4().hex}.tmp")
        _write(temporary, json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8"))
        # Local: os.rename replaces the old manifest atomically. GCS: a copy over the old
        # object, which readers see whole or not at all.
        FileSystems.rename([temporary], [self.manifest_path])
        return object_path
