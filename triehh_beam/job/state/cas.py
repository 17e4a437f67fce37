"""Compare-and-swap objects, the writes that must never race (the state manifest, the lease on a
state directory, the privacy ledger's log), on a local disk or on GCS: ``CasStore`` is the one
primitive and ``cas_store_for`` picks ``LocalCasStore`` (exclusive create of a fully written
file; replace and delete under an ``flock``, the generation the content's SHA-256) or
``GcsCasStore`` (generation preconditions, HTTP 412 for a stale write). A generation is an opaque
token compared for equality only. A conditional write retried after a lost response can fail
against its own first attempt, so callers write content unique to the attempt and re-read after
``PreconditionFailed``.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import urllib.parse
import uuid
from typing import Iterator, Optional, Union

__all__ = [
    "read_or_create",
    "CasError",
    "CasStore",
    "ContentionError",
    "GcsCasStore",
    "Generation",
    "LocalCasStore",
    "PreconditionFailed",
    "Versioned",
    "check_name",
    "encode_line",
    "cas_store_for",
    "is_local",
    "make_private_dir",
    "write_private_file",
]

Generation = Union[int, str]

_RESERVED = ".cas"  # LocalCasStore's lock and temporary files live under <root>/.cas/
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class CasError(Exception):
    """Base class of this module's errors."""


class PreconditionFailed(CasError):
    """The object's current generation is not the one the write expected (or it exists, for
    ``create``; or it is missing, for ``replace`` and ``delete``)."""

    def __init__(self, location: str, expected: Optional[Generation], actual: Optional[Generation] = None,
                 detail: str = ""):
        self.location = location
        self.expected = expected
        self.actual = actual
        wanted = "absent" if expected is None else f"generation {expected}"
        super().__init__(f"{location}: precondition failed (expected {wanted}){': ' + detail if detail else ''}")


class ContentionError(CasError):
    """A compare-and-swap loop gave up after its bounded number of attempts."""


@dataclasses.dataclass(frozen=True)
class Versioned:
    """An object's bytes and the generation they were read at."""

    data: bytes
    generation: Generation


def check_name(name: str) -> str:
    """Object names are relative, '/'-separated paths; '.', '..' and the reserved '.cas' are not
    allowed, so that every implementation maps a name to exactly one object."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"an object name must be a non-empty string, got {name!r}")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\x00" in name:
        raise ValueError(f"invalid object name {name!r}: use a relative path like 'ledger/spend.jsonl'")
    if parts[0] == _RESERVED:
        raise ValueError(f"invalid object name {name!r}: {_RESERVED!r} is reserved")
    return name


class CasStore(abc.ABC):
    """Objects under a root that are written only by compare-and-swap."""

    @abc.abstractmethod
    def location(self, name: str) -> str:
        """Where object ``name`` lives (a path or ``gs://`` URL), for messages."""

    @abc.abstractmethod
    def read(self, name: str) -> Optional[Versioned]:
        """The object's bytes and generation, or None if it does not exist."""

    @abc.abstractmethod
    def create(self, name: str, data: bytes) -> Generation:
        """Writes a new object; returns its generation.

        Raises:
          PreconditionFailed: the object already exists.
        """

    @abc.abstractmethod
    def replace(self, name: str, data: bytes, expected_generation: Generation) -> Generation:
        """Overwrites the object if it is still at ``expected_generation``; returns the new one.

        Raises:
          PreconditionFailed: the object is missing or at another generation.
        """

    @abc.abstractmethod
    def delete(self, name: str, expected_generation: Generation) -> None:
        """Deletes the object if it is still at ``expected_generation``.

        Raises:
          PreconditionFailed: the object is missing or at another generation.
        """


# ------------------------------------------------------------------------------------------
# Local filesystem
# ------------------------------------------------------------------------------------------


PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def is_local(path: str) -> bool:
    """Whether ``path`` is a local path (no ``scheme://``)."""
    return not _SCHEME.match(os.fspath(path))


def make_private_dir(path: str) -> None:
    """Creates local directory ``path`` (and missing parents) and makes it owner-only (0700).

    Set with ``chmod``, not through the umask, so the mode is exact whatever the process's
    umask; an existing directory is tightened too (a state directory moved into place by hand
    keeps its old mode). ``gs://`` and other remote paths are left alone: on GCS access is the
    bucket's IAM, not a mode.
    """
    path = os.fspath(path)
    if not is_local(path):
        return
    os.makedirs(path, mode=PRIVATE_DIR_MODE, exist_ok=True)
    os.chmod(path, PRIVATE_DIR_MODE)


def _open_private(path: str) -> int:
    """A new file at ``path`` (which must not exist), owner-only (0600) whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    return fd


def write_private_file(path: str, data: bytes) -> None:
    """Writes a new local file holding ``data``, owner-only (0600), fsynced; fails if it exists."""
    with os.fdopen(_open_private(path), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _content_generation(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class LocalCasStore(CasStore):
    """Compare-and-swap objects in a local directory (POSIX: ``link``, ``rename``, ``flock``).

    Each object is one file holding exactly the bytes written (as on GCS), and its generation
    is the SHA-256 of those bytes. A file is never modified in place: every write makes a new
    file and renames or links it into place, so a reader without a lock reads one whole version,
    and the generation it computes is that version's. The alternatives are worse: a counter or
    token would need a header in the file (then the file is not the data, and a plain file such
    as a manifest written before this store existed is unreadable) or a sidecar (two files
    cannot be swapped atomically); ``(mtime, inode, size)`` can repeat, since inodes are
    recycled at once and mtime has the kernel's coarse-clock granularity.

    What a content generation means: a write that restores bytes an object had before also
    restores that generation, so a writer holding it would succeed. That writer's update was
    computed from exactly the current content, so for the objects kept here (a manifest naming
    a checksummed state object, a lease with a unique id, an append-only log) it is correct;
    GCS, whose generation changes on every write, refuses it. Writers:

    * ``create`` writes and fsyncs a temporary file, then ``link``s it to the object's name;
      ``link`` fails if the name exists, so of two creators exactly one wins, and a reader sees
      the whole object or none.
    * ``replace`` and ``delete`` hold an exclusive ``flock`` on ``.cas/locks/<name>.lock`` while
      they check the generation and ``rename`` (or unlink); the kernel drops the lock if the
      holder dies. ``create`` needs no lock: it only succeeds where the others fail (no object).

    Readers take no lock. A crash leaves at most an unused file under ``.cas/tmp``. Lock files
    are kept (removing one that another process has open would break mutual exclusion). What
    the store keeps is private job data (a manifest, a lease, a ledger): every file it writes is
    owner-only (0600) and every directory it creates 0700, whatever the umask.
    Locks are ``flock`` locks: use a local disk, not NFS.
    """

    def __init__(self, root_dir: str):
        self.root = os.path.abspath(os.fspath(root_dir))

    def __repr__(self) -> str:
        return f"LocalCasStore({self.root!r})"

    def location(self, name: str) -> str:
        return os.path.join(self.root, *check_name(name).split("/"))

    def _reserved(self, *parts: str) -> str:
        path = self.root
        for part in ("", _RESERVED, *parts):
            path = os.path.join(path, part) if part else path
            if not os.path.isdir(path):
                make_private_dir(path)  # the root too, when this store creates it
        return path

    def read(self, name: str) -> Optional[Versioned]:
        path = self.location(name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        return Versioned(data=data, generation=_content_generation(data))

    def _write_temporary(self, data: bytes) -> str:
        """A fully written, fsynced file holding ``data``; returns its path."""
        path = os.path.join(self._reserved("tmp"), f"{uuid.uuid4().hex}.tmp")
        write_private_file(path, data)
        return path

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        lock_path = os.path.join(self._reserved("locks"), urllib.parse.quote(name, safe="") + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        with os.fdopen(fd, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed, or the holder dies
            yield

    def _require(self, name: str, expected: Generation) -> Versioned:
        current = self.read(name)
        if current is None:
            raise PreconditionFailed(self.location(name), expected, None, "the object does not exist")
        if current.generation != expected:
            raise PreconditionFailed(self.location(name), expected, current.generation)
        return current

    def create(self, name: str, data: bytes) -> Generation:
        path = self.location(name)
        parent = os.path.dirname(path)
        data = bytes(data)
        temporary = self._write_temporary(data)
        try:
            if not os.path.isdir(parent):
                os.makedirs(parent, exist_ok=True)
                make_private_dir(parent)
            try:
                os.link(temporary, path)
            except FileExistsError:
                raise PreconditionFailed(path, None, detail="the object already exists") from None
        finally:
            os.unlink(temporary)
        _fsync_directory(parent)
        return _content_generation(data)

    def replace(self, name: str, data: bytes, expected_generation: Generation) -> Generation:
        path = self.location(name)
        with self._locked(name):
            self._require(name, expected_generation)
            data = bytes(data)
            temporary = self._write_temporary(data)
            try:
                os.replace(temporary, path)
            except BaseException:
                # A Ctrl-C that lands once the rename is done finds no temporary file: the
                # interrupt, not a FileNotFoundError about a file nobody asked for, goes up.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
                raise
            _fsync_directory(os.path.dirname(path))
        return _content_generation(data)

    def delete(self, name: str, expected_generation: Generation) -> None:
        path = self.location(name)
        with self._locked(name):
            self._require(name, expected_generation)
            os.unlink(path)
            _fsync_directory(os.path.dirname(path))


# ------------------------------------------------------------------------------------------
# Google Cloud Storage
# ------------------------------------------------------------------------------------------


class GcsCasStore(CasStore):
    """Compare-and-swap objects in ``gs://bucket/prefix`` through generation preconditions.

    Args:
      bucket: the bucket name.
      prefix: an object-name prefix ("" for the bucket's root); names are joined with '/'.
      client: a ``google.cloud.storage.Client``; by default one is created on first use (with
        the environment's credentials), so constructing a store makes no request.
    """

    def __init__(self, bucket: str, prefix: str = "", client=None):
        if not bucket or "/" in bucket:
            raise ValueError(f"a bucket name is required (no '/'), got {bucket!r}")
        self.bucket_name = bucket
        self.prefix = prefix.strip("/")
        self._client = client
        self._bucket = None

    def __repr__(self) -> str:
        return f"GcsCasStore({self.bucket_name!r}, {self.prefix!r})"

    def _key(self, name: str) -> str:
        check_name(name)
        return f"{self.prefix}/{name}" if self.prefix else name

    def location(self, name: str) -> str:
        return f"gs://{self.bucket_name}/{self._key(name)}"

    def _blob(self, name: str):
        if self._bucket is None:
            if self._client is None:
                from google.cloud import storage

                self._client = storage.Client()
            self._bucket = self._client.bucket(self.bucket_name)
        return self._bucket.blob(self._key(name))

    def read(self, name: str) -> Optional[Versioned]:
        from google.api_core import exceptions

        blob = self._blob(name)
        for _ in range(10):
            try:
                # One request: the data and, from its x-goog-generation header, its generation.
                data = blob.download_as_bytes()
            except exceptions.NotFound:
                return None
            if blob.generation is not None:
                return Versioned(data=data, generation=int(blob.generation))
            # A server that does not send the header: fetch the generation, then the data of
            # exactly that generation (412 or 404 if it was replaced in between: try again).
            blob = self._blob(name)
            try:
                blob.reload()
                generation = int(blob.generation)
                data = blob.download_as_bytes(if_generation_match=generation)
            except (exceptions.NotFound, exceptions.PreconditionFailed):
                blob = self._blob(name)
                continue
            return Versioned(data=data, generation=generation)
        raise ContentionError(f"{self.location(name)}: changed during every one of 10 reads")

    def _upload(self, name: str, data: bytes, if_generation_match: int) -> Generation:
        from google.api_core import exceptions

        blob = self._blob(name)
        try:
            blob.upload_from_string(
                bytes(data), content_type="application/octet-stream", if_generation_match=if_generation_match
            )
        except exceptions.PreconditionFailed as e:
            expected = None if if_generation_match == 0 else if_generation_match
            raise PreconditionFailed(self.location(name), expected, detail=str(e.message)) from None
        return int(blob.generation)

    def create(self, name: str, data: bytes) -> Generation:
        return self._upload(name, data, 0)

    def replace(self, name: str, data: bytes, expected_generation: Generation) -> Generation:
        return self._upload(name, data, int(expected_generation))

    def delete(self, name: str, expected_generation: Generation) -> None:
        from google.api_core import exceptions

        try:
            self._blob(name).delete(if_generation_match=int(expected_generation))
        except exceptions.NotFound:
            raise PreconditionFailed(
                self.location(name), expected_generation, detail="the object does not exist"
            ) from None
        except exceptions.PreconditionFailed as e:
            raise PreconditionFailed(self.location(name), expected_generation, detail=str(e.message)) from None


def read_or_create(store: CasStore, name: str, make) -> bytes:
    """The object ``name``'s bytes, created from ``make()`` if missing (by compare-and-swap:
    when two runs race, both get the first one's)."""
    found = store.read(name)
    if found is None:
        try:
            store.create(name, make())
        except PreconditionFailed:
            pass  # another run created it first: use theirs
        found = store.read(name)
    return found.data


def cas_store_for(path: str, client=None) -> CasStore:
    """The store for a directory: ``gs://bucket/prefix`` or a local path.

    Args:
      path: ``gs://bucket[/prefix]`` or a local directory (created on first write).
      client: for ``gs://``, the ``google.cloud.storage.Client`` to use (default: the
        environment's).

    Raises:
      ValueError: another scheme (``s3://``...): Beam can read it, but it offers no
        compare-and-swap here.
    """
    path = os.fspath(path)
    if path.startswith("gs://"):
        bucket, _, prefix = path[len("gs://"):].partition("/")
        return GcsCasStore(bucket, prefix, client=client)
    if _SCHEME.match(path):
        raise ValueError(f"{path}: compare-and-swap storage supports gs:// and local paths only")
    return LocalCasStore(path)


def encode_line(document: dict) -> bytes:
    """One JSON document as one line of UTF-8 (sorted keys): how the lease and the log store
    their records."""
    return (json.dumps(document, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
