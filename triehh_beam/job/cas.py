"""Compare-and-swap objects: the writes that must never race.

Beam's ``FileSystems`` can write and rename, but it cannot say "write this only if nobody else
wrote since I read". Three things need exactly that: the manifest that publishes a round, the
lease on a state directory, and the privacy ledger. This module gives them one primitive,
``CasStore``, with two implementations:

* ``LocalCasStore``: a directory on a local POSIX filesystem. ``create`` links a fully written
  temporary file to the final name (``link`` fails if the name exists); ``replace`` and ``delete``
  check the generation and swap the file while holding an ``flock`` on a per-object lock file.
* ``GcsCasStore``: Google Cloud Storage with generation preconditions
  (``if_generation_match``; 0 means "must not exist"), the service refusing a stale write with
  HTTP 412.

and, on top of it, two small helpers: ``Lease`` (an exclusive, expiring lease with takeover by
compare-and-swap) and ``append_record`` / ``read_records`` (an append-only JSON-lines log).

A generation is an opaque token (an ``int`` on GCS, a ``str`` locally): compare it for equality
only. On GCS every write yields a generation the object never had before, deleted or not;
locally the generation is the SHA-256 of the content, so a version with other bytes never
matches an earlier one (see ``LocalCasStore`` for why, and for what equal bytes mean). Objects
hold exactly the bytes written, on both stores.

One ambiguity is inherent to any remote compare-and-swap: when a conditional request is
retried after a lost response (google-cloud-storage retries them on transient errors), the
retry can fail its precondition against the writer's *own* first attempt, and the caller sees
``PreconditionFailed`` although it won. ``Lease`` and ``append_record`` resolve it by writing
content unique to the attempt and re-reading; a direct caller of ``CasStore`` should do the same
(re-read, compare with what it wrote).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import datetime
import fcntl
import hashlib
import json
import os
import random
import re
import time
import urllib.parse
import uuid
from typing import Callable, Dict, Iterator, List, Optional, Union

__all__ = [
    "CasError",
    "CasStore",
    "ContentionError",
    "GcsCasStore",
    "Generation",
    "HeldLease",
    "Lease",
    "LeaseHeld",
    "LeaseLost",
    "LeaseRecord",
    "LocalCasStore",
    "PreconditionFailed",
    "Versioned",
    "append_record",
    "cas_store_for",
    "read_records",
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


def _check_name(name: str) -> str:
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
    are kept (removing one that another process has open would break mutual exclusion).
    Locks are ``flock`` locks: use a local disk, not NFS.
    """

    def __init__(self, root_dir: str):
        self.root = os.path.abspath(os.fspath(root_dir))

    def __repr__(self) -> str:
        return f"LocalCasStore({self.root!r})"

    def location(self, name: str) -> str:
        return os.path.join(self.root, *_check_name(name).split("/"))

    def _reserved(self, *parts: str) -> str:
        path = os.path.join(self.root, _RESERVED, *parts)
        os.makedirs(path, exist_ok=True)
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
        with open(path, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return path

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        lock_path = os.path.join(self._reserved("locks"), urllib.parse.quote(name, safe="") + ".lock")
        with open(lock_path, "a+b") as lock:
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
            os.makedirs(parent, exist_ok=True)
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
        _check_name(name)
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


# ------------------------------------------------------------------------------------------
# Lease
# ------------------------------------------------------------------------------------------


def _timestamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


def _encode(document: dict) -> bytes:
    return (json.dumps(document, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """What a lease object says: its holder, until when, and whether it was released."""

    owner: str
    lease_id: str
    acquired_at: float
    expires_at: float
    released: bool

    def free_at(self, now: float) -> bool:
        return self.released or self.expires_at <= now

    def to_bytes(self) -> bytes:
        return _encode(dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class HeldLease:
    """Proof of holding a lease: pass it to ``Lease.renew`` and ``Lease.release``."""

    owner: str
    lease_id: str
    acquired_at: float
    expires_at: float
    generation: Generation


class LeaseHeld(CasError):
    """Someone else holds the lease and it has not expired."""

    def __init__(self, location: str, owner: str, expires_at: float):
        self.owner = owner
        self.expires_at = expires_at
        super().__init__(f"{location} is held by {owner!r} until {_timestamp(expires_at)}")


class LeaseLost(CasError):
    """The lease is no longer the caller's: it expired and was taken over, or was released."""


class Lease:
    """An exclusive, expiring lease stored in one compare-and-swap object.

    ``acquire`` succeeds when the object is missing, released or expired, and writes a new lease
    by compare-and-swap from the generation it read, so of any number of simultaneous takers
    exactly one wins; the others see ``LeaseHeld`` naming the winner. A holder renews before
    ``expires_at`` and releases when done (a released lease is marked, not deleted, so that a
    takeover is always a compare-and-swap). Expiry is judged on the taker's clock: choose a ttl
    far above the clock skew between machines, and still guard the writes the lease protects
    with their own compare-and-swap.

    Args:
      store: where the lease object lives.
      name: the lease object's name.
      clock: seconds since the epoch (``time.time``), injectable for tests.
      max_attempts: bound on the read-and-swap loop of ``acquire``.
    """

    def __init__(self, store: CasStore, name: str = "LEASE", *, clock: Callable[[], float] = time.time,
                 max_attempts: int = 10):
        self.store = store
        self.name = _check_name(name)
        self.clock = clock
        self.max_attempts = max_attempts

    @property
    def location(self) -> str:
        return self.store.location(self.name)

    def _record(self, current: Versioned) -> LeaseRecord:
        try:
            document = json.loads(current.data.decode("utf-8"))
            return LeaseRecord(
                owner=str(document["owner"]),
                lease_id=str(document["lease_id"]),
                acquired_at=float(document["acquired_at"]),
                expires_at=float(document["expires_at"]),
                released=bool(document["released"]),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CasError(f"{self.location}: not a lease object ({e})") from None

    def current(self) -> Optional[LeaseRecord]:
        """What the lease object says now, or None if there is none."""
        current = self.store.read(self.name)
        return None if current is None else self._record(current)

    def acquire(
        self, owner: str, ttl_seconds: float, *, take_over: Optional[Callable[[LeaseRecord], bool]] = None
    ) -> HeldLease:
        """Takes the lease for ``ttl_seconds`` if it is free, released or expired.

        Args:
          owner: who takes it (stored in the lease object, shown to others in ``LeaseHeld``).
          ttl_seconds: how long the lease lasts unless renewed.
          take_over: called with an unexpired holder's record; True means the holder is known
            to be gone (e.g. a process of this machine that no longer exists) and its lease is
            taken over at once, still by compare-and-swap, so of several takers one wins.

        Raises:
          LeaseHeld: another holder's lease (or the same owner's, from another process) has
            not expired.
          ContentionError: the object kept changing for ``max_attempts`` reads.
        """
        if not ttl_seconds > 0:
            raise ValueError(f"ttl_seconds must be > 0, got {ttl_seconds}")
        if not owner:
            raise ValueError("an owner is required")
        ours: Optional[LeaseRecord] = None
        for _ in range(self.max_attempts):
            current = self.store.read(self.name)
            if current is not None and ours is not None and current.data == ours.to_bytes():
                return self._held(ours, current.generation)  # our write landed; its response was lost
            now = self.clock()
            if current is not None:
                record = self._record(current)
                if not record.free_at(now) and not (take_over is not None and take_over(record)):
                    raise LeaseHeld(self.location, record.owner, record.expires_at)
            ours = LeaseRecord(owner, uuid.uuid4().hex, now, now + ttl_seconds, released=False)
            try:
                if current is None:
                    generation = self.store.create(self.name, ours.to_bytes())
                else:
                    generation = self.store.replace(self.name, ours.to_bytes(), current.generation)
            except PreconditionFailed:
                continue  # someone else wrote first: read again
            return self._held(ours, generation)
        raise ContentionError(f"{self.location}: gave up acquiring after {self.max_attempts} attempts")

    def _held(self, record: LeaseRecord, generation: Generation) -> HeldLease:
        return HeldLease(record.owner, record.lease_id, record.acquired_at, record.expires_at, generation)

    def _swap(self, held: HeldLease, record: LeaseRecord, what: str) -> Generation:
        data = record.to_bytes()
        try:
            return self.store.replace(self.name, data, held.generation)
        except PreconditionFailed:
            current = self.store.read(self.name)
            if current is not None and current.data == data:
                return current.generation  # our write landed; its response was lost
            now_holder = "nobody" if current is None else repr(self._record(current).owner)
            raise LeaseLost(
                f"{self.location}: cannot {what} the lease of {held.owner!r}: it changed since "
                f"(now held by {now_holder}); it expired and was taken over, or was released"
            ) from None

    def renew(self, held: HeldLease, ttl_seconds: float) -> HeldLease:
        """Extends a held lease to ``ttl_seconds`` from now; returns the new proof (the old one
        is stale).

        Raises:
          LeaseLost: the lease changed since ``held`` (taken over after expiry, or released).
        """
        if not ttl_seconds > 0:
            raise ValueError(f"ttl_seconds must be > 0, got {ttl_seconds}")
        record = LeaseRecord(held.owner, held.lease_id, held.acquired_at, self.clock() + ttl_seconds, False)
        return self._held(record, self._swap(held, record, "renew"))

    def release(self, held: HeldLease) -> None:
        """Marks the lease released, so that the next ``acquire`` need not wait for expiry.

        Raises:
          LeaseLost: the lease changed since ``held``: the caller's hold had already ended.
        """
        record = LeaseRecord(held.owner, held.lease_id, held.acquired_at, self.clock(), released=True)
        self._swap(held, record, "release")


# ------------------------------------------------------------------------------------------
# Append-only log
# ------------------------------------------------------------------------------------------


def _parse_log(location: str, data: bytes) -> List[Dict]:
    if data and not data.endswith(b"\n"):
        raise CasError(f"{location}: the log does not end with a newline; it was not written by append_record")
    records = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        try:
            record = json.loads(line)
        except ValueError as e:
            raise CasError(f"{location}: line {number} is not JSON ({e})") from None
        if not isinstance(record, dict):
            raise CasError(f"{location}: line {number} is not a JSON object")
        records.append(record)
    return records


def read_records(store: CasStore, name: str) -> List[Dict]:
    """The records of an append-only log, oldest first ([] if the log does not exist).

    Raises:
      CasError: the object is not a JSON-lines log (the message names it and the line).
    """
    current = store.read(name)
    return [] if current is None else _parse_log(store.location(name), current.data)


def append_record(
    store: CasStore,
    name: str,
    record: Dict,
    *,
    precondition: Optional[Callable[[List[Dict]], None]] = None,
    max_attempts: int = 20,
    initial_backoff: float = 0.005,
    max_backoff: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Appends ``record`` as one JSON line to the log ``name``, by compare-and-swap.

    Each attempt reads the log, checks that the record is not already in it, runs
    ``precondition`` on the records it read, and replaces the log with its content plus one
    line, from the generation it read; a lost race is retried (from the read) after a random,
    exponentially growing pause. The line carries a ``record_id``: the caller's if ``record``
    has one, else a fresh one. An append whose id is already in the log does nothing (and runs
    no precondition), so an append retried after a lost response, or repeated with the same id
    by a re-run, is recorded once.

    Args:
      store, name: the log object.
      record: a JSON-serialisable dict (not modified).
      precondition: called with the log's records (oldest first) as read by the attempt that
        will write; it refuses the append by raising, and the exception propagates with nothing
        written. Check and append are one compare-and-swap: e.g. a budget check cannot be
        passed by two appenders racing for the last of the budget.
      max_attempts: bound on read-and-swap attempts.
      initial_backoff, max_backoff: bounds, in seconds, of the pause between attempts.
      sleep: ``time.sleep``, injectable for tests.

    Returns:
      The record's ``record_id``.

    Raises:
      ContentionError: every one of ``max_attempts`` attempts lost a race.
      TypeError, ValueError: the record is not JSON-serialisable.
      CasError: the object is not a JSON-lines log.
      Whatever ``precondition`` raises.
    """
    entry = dict(record)
    if entry.get("record_id") is None:
        entry["record_id"] = uuid.uuid4().hex
    record_id = entry["record_id"]
    line = _encode(entry)
    location = store.location(name)
    for attempt in range(max_attempts):
        current = store.read(name)
        records = [] if current is None else _parse_log(location, current.data)
        if any(r.get("record_id") == record_id for r in records):
            return record_id
        if precondition is not None:
            precondition(records)
        try:
            if current is None:
                store.create(name, line)
            else:
                store.replace(name, current.data + line, current.generation)
            return record_id
        except PreconditionFailed:
            pass
        if attempt + 1 < max_attempts:  # full jitter: spread the losers out (not a sample)
            sleep(random.uniform(0, min(max_backoff, initial_backoff * 2**attempt)))
    raise ContentionError(f"{location}: append lost the race {max_attempts} times; try again later")
