"""The versioned state store: commit/load, the manifest, and every way a state directory can be
untrustworthy (each refused with a StateError naming the file), on a local directory."""

import hashlib
import json
import os

import pytest
from apache_beam.io.filesystems import FileSystems

from triehh_beam.job.state import state_store, cas
from triehh_beam.job.state.state_store import (MANIFEST_NAME, STATE_SCHEMA_VERSION, StateError,
                                               StateStore, release_version)
from triehh_beam.proto import state_pb2


def _state(rounds_completed: int = 0, **fields) -> state_pb2.JobState:
    state = state_pb2.JobState(
        job_id="0123456789abcdef",
        secret_seed=bytes(range(32)),
        input=state_pb2.InputSpec(file_pattern="records-*.parquet", user_column="user_id", item_column="item"),
        plan=state_pb2.PrivacyPlan(rule="authors", population=20_000, max_length=6, target_epsilon=4.0,
                                   target_delta=1e-6, theta=10, batch_size=973, epsilon=3.999, delta=3.1e-7),
        rounds_completed=rounds_completed,
        created_at="2024-06-11T00:00:00+00:00",
        **fields,
    )
    for r in range(1, rounds_completed + 1):
        state.rounds.add(round_index=r, frontier_size=r, prefixes_kept=r + 1, counters={"votes_cast": 100 * r})
    return state


def _published(state: state_pb2.JobState) -> state_pb2.JobState:
    # What load() returns for a committed state: the same message, stamped with the version.
    expected = state_pb2.JobState()
    expected.CopyFrom(state)
    expected.schema_version = STATE_SCHEMA_VERSION
    expected.written_by = release_version()
    return expected


def _manifest(store: StateStore) -> dict:
    return json.loads(cas.LocalCasStore(store.root).read(MANIFEST_NAME).data)


def _write_manifest(store: StateStore, manifest) -> None:
    """A hand edit of the manifest, through its compare-and-swap store (as a careful human would)."""
    if isinstance(manifest, dict):
        manifest = json.dumps(manifest)
    if isinstance(manifest, str):
        manifest = manifest.encode("utf-8")
    objects = cas.LocalCasStore(store.root)
    objects.replace(MANIFEST_NAME, manifest, objects.read(MANIFEST_NAME).generation)


def test_a_second_writer_cannot_publish_over_the_first(store, committed):
    other = StateStore(store.root)
    other.load()
    store.commit(_state(2))
    with pytest.raises(StateError, match="another run published"):
        other.commit(_state(3))
    assert StateStore(store.root).load().rounds_completed == 2


@pytest.fixture
def store(tmp_path):
    return StateStore(str(tmp_path / "state"))


@pytest.fixture
def committed(store):
    """A store holding two commits (rounds 0 and 1); returns the second object's path."""
    store.commit(_state(0))
    return store.commit(_state(1))


# --- round trip and the manifest ----------------------------------------------------------------


def test_a_directory_without_manifest_holds_no_state(tmp_path):
    assert StateStore(str(tmp_path / "never-created")).load() is None
    (tmp_path / "empty").mkdir()
    store = StateStore(str(tmp_path / "empty"))
    assert not store.exists()
    assert store.load() is None


def test_commit_then_load_round_trips(store):
    state = _state(2, finished=True, stop_reason="round 3 added nothing", truncate_long_items=True)
    store.commit(state)
    assert store.exists()
    assert store.load() == _published(state)


def test_manifest_points_to_the_newest_object_and_old_objects_stay(store, tmp_path):
    first = store.commit(_state(0))
    second = store.commit(_state(1))
    third = store.commit(_state(2))
    assert len({first, second, third}) == 3
    manifest = _manifest(store)
    assert FileSystems.join(store.root, manifest["state_object"]) == third
    assert manifest["rounds_completed"] == 2
    with open(third, "rb") as f:
        assert manifest["sha256"] == hashlib.sha256(f.read()).hexdigest()
    assert store.load() == _published(_state(2))
    # Objects are never rewritten: every commit is still there, byte for byte loadable.
    objects = sorted(p.name for p in (tmp_path / "state").glob("state-*.pb"))
    assert [name[:10] for name in objects] == ["state-0000", "state-0001", "state-0002"]
    for path, rounds in ((first, 0), (second, 1)):
        with open(path, "rb") as f:
            assert state_pb2.JobState.FromString(f.read()).rounds_completed == rounds
    # No temporary manifest is left behind.
    assert not [p.name for p in (tmp_path / "state").rglob("*") if p.name.endswith(".tmp")]


def test_commit_never_mutates_the_callers_message(store):
    state = _state(1)
    before = state.SerializeToString(deterministic=True)
    store.commit(state)
    assert state.SerializeToString(deterministic=True) == before
    assert state.schema_version == 0  # the version is stamped on the store's copy only


# --- untrustworthy state: refused, naming the file -----------------------------------------------


def _refused(store: StateStore, names: str) -> str:
    with pytest.raises(StateError) as error:
        store.load()
    message = str(error.value)
    assert names in message, f"the message should name {names}: {message}"
    return message


def test_a_corrupted_object_is_refused(store, committed):
    with open(committed, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0x01  # flip one bit
    with open(committed, "wb") as f:
        f.write(bytes(data))
    assert "checksum" in _refused(store, committed)


def test_a_truncated_object_is_refused(store, committed):
    with open(committed, "rb") as f:
        data = f.read()
    with open(committed, "wb") as f:
        f.write(data[: len(data) - 7])
    _refused(store, committed)


def test_a_missing_object_is_refused(store, committed):
    FileSystems.delete([committed])
    _refused(store, committed)


@pytest.mark.parametrize(
    "text",
    ["{not json", "", "[]", '{"schema_version": 1}', b"\xff\xfe{}"],
    ids=["bad-json", "empty", "not-an-object", "missing-keys", "not-utf8-text"],
)
def test_a_manifest_that_is_not_a_manifest_is_refused(store, committed, text):
    _write_manifest(store, text)
    _refused(store, store.manifest_path)


def test_a_manifest_with_the_wrong_checksum_is_refused(store, committed):
    manifest = _manifest(store)
    manifest["sha256"] = hashlib.sha256(b"something else").hexdigest()
    _write_manifest(store, manifest)
    assert "checksum" in _refused(store, committed)


def test_a_manifest_of_an_unknown_schema_version_is_refused(store, committed):
    manifest = _manifest(store)
    manifest["schema_version"] = 2
    _write_manifest(store, manifest)
    assert "version 2" in _refused(store, store.manifest_path)


def test_a_manifest_naming_an_older_object_with_its_checksum_is_followed(store, tmp_path):
    # Hand-pointing the manifest at an earlier, intact object is a (deliberate) rollback: the
    # store trusts it because the checksum matches. This documents that the checksum protects
    # integrity, not recency.
    first = store.commit(_state(0))
    store.commit(_state(1))
    with open(first, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    manifest = _manifest(store)
    manifest.update(state_object=first.rsplit("/", 1)[-1], sha256=sha, rounds_completed=0)
    _write_manifest(store, manifest)
    assert store.load().rounds_completed == 0


def _publish_raw(store: StateStore, name: str, data: bytes) -> str:
    # An object with a matching checksum, so that only its content can be at fault.
    path = FileSystems.join(store.root, name)
    with open(path, "wb") as f:
        f.write(data)
    _write_manifest(store, {"schema_version": 1, "state_object": name,
                            "sha256": hashlib.sha256(data).hexdigest(), "rounds_completed": 0})
    return path


def test_an_object_of_an_unknown_state_schema_version_is_refused(store, committed):
    state = _state(1)
    state.schema_version = STATE_SCHEMA_VERSION + 1
    path = _publish_raw(store, "state-0001-future.pb", state.SerializeToString())
    assert f"version {STATE_SCHEMA_VERSION + 1}" in _refused(store, path)


def test_a_state_written_by_an_earlier_release_is_refused_naming_it(store, committed):
    # Schema 1 was written only by triehh-beam 0.1.0, which recorded no version of its own.
    state = _state(1)
    state.schema_version = 1
    path = _publish_raw(store, "state-0001-old.pb", state.SerializeToString())
    message = _refused(store, path)
    assert "written by triehh-beam 0.1.0" in message and "new output and state directory" in message
    assert "\n" not in message
    # A later schema names the release it records.
    state.schema_version, state.written_by = STATE_SCHEMA_VERSION + 1, "9.9.0"
    path = _publish_raw(store, "state-0001-new.pb", state.SerializeToString())
    assert "written by triehh-beam 9.9.0" in _refused(store, path)


def test_an_object_that_is_not_a_protobuf_is_refused(store, committed):
    path = _publish_raw(store, "state-0001-garbage.pb", b"\xff\xff\xff\xff")
    _refused(store, path)


# --- crashes ------------------------------------------------------------------------------------


def test_an_object_written_without_its_manifest_leaves_the_previous_state(store, tmp_path):
    store.commit(_state(1))
    manifest_before = (tmp_path / "state" / MANIFEST_NAME).read_bytes()
    # A crash between writing round 2's object and publishing it: the object is there, the
    # manifest is not updated (and may even be half-written next to it as a temporary file).
    orphan = _state(2)
    orphan.schema_version = STATE_SCHEMA_VERSION
    data = orphan.SerializeToString(deterministic=True)
    (tmp_path / "state" / f"state-0002-{hashlib.sha256(data).hexdigest()[:16]}.pb").write_bytes(data)
    (tmp_path / "state" / f".{MANIFEST_NAME}.0123abcd.tmp").write_bytes(b'{"schema_ver')
    assert (tmp_path / "state" / MANIFEST_NAME).read_bytes() == manifest_before
    assert store.load() == _published(_state(1))


def test_a_commit_that_crashes_after_the_object_write_leaves_the_previous_state(store, monkeypatch):
    store.commit(_state(1))
    write = state_store._write

    def write_then_crash(path, data):  # the object reaches the disk, then the process "dies"
        write(path, data)
        raise OSError("simulated crash after the object write")

    monkeypatch.setattr(state_store, "_write", write_then_crash)
    with pytest.raises(OSError, match="simulated crash"):
        store.commit(_state(2))
    monkeypatch.undo()
    assert any(p.startswith("state-0002-") for p in os.listdir(store.root))  # the orphan
    assert store.load() == _published(_state(1))
    # ... and the next commit publishes normally.
    store.commit(_state(2))
    assert store.load().rounds_completed == 2


@pytest.mark.parametrize(
    "field, value", [("state_object", 5), ("state_object", None), ("sha256", 12345)],
    ids=["object-int", "object-null", "sha-int"],
)
def test_a_manifest_with_fields_of_the_wrong_type_is_refused(store, committed, field, value):
    manifest = _manifest(store)
    manifest[field] = value
    _write_manifest(store, manifest)
    _refused(store, store.manifest_path)
