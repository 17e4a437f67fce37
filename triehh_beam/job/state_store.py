"""Versioned job state behind a manifest, on a local directory or ``gs://``.

Layout of a state directory::

  MANIFEST.json                     {"schema_version", "state_object", "sha256", "rounds_completed"}
  state-0003-<sha256[:16]>.pb       a JobState protobuf, one per commit, never rewritten

A commit writes the new object first (through Beam's ``FileSystems``), then publishes it by
replacing the manifest with a compare-and-swap (``triehh_beam.job.cas``: exclusive create and a
locked atomic rename on local disk, generation preconditions on GCS), from the manifest
generation this store last read or wrote. A crash before the swap leaves the previous round
published; a reader only ever follows the manifest; two writers can never both publish (the
loser's swap fails its precondition). The manifest records the object's SHA-256, so a
truncated, corrupted or hand-edited object is refused with a message naming it. The state holds
the secret seed: on a local disk the directory is made owner-only (0700) and every object and
manifest is written owner-only (0600), whatever the umask; on ``gs://`` the bucket's IAM decides.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from triehh_beam.job import cas
from triehh_beam.proto import state_pb2

__all__ = ["MANIFEST_NAME", "STATE_SCHEMA_VERSION", "StateError", "StateStore"]

STATE_SCHEMA_VERSION = 1
MANIFEST_SCHEMA_VERSION = 1
MANIFEST_NAME = "MANIFEST.json"
# What a manifest may name: an object of this directory (never a path elsewhere).
_OBJECT_NAME = re.compile(r"state-[0-9]{4,}-[0-9A-Za-z_-]+\.pb")
_SHA256 = re.compile(r"[0-9a-f]{64}")


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
            raise StateError(
                f"{object_path}: state schema version {state.schema_version} is not supported "
                f"(this release reads {STATE_SCHEMA_VERSION})"
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
