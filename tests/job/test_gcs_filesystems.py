"""gs:// paths through Beam's FileSystems, the state store and a whole discovery, against the
gcp-storage-emulator process (which serves everything Beam's gcsio sends, batch requests
included). See gcs_emulators.py for how Beam is pointed at it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from apache_beam.io.filesystems import FileSystems

from tests.driver_events import StoppedAfterRound, stop_after_round
from tests.gcs_emulators import (  # noqa: F401 (fixtures)
    beam_environment,
    gcs_emulator,
    gcs_emulator_client,
    gcs_emulator_server,
)
from triehh_beam.job.batch.driver import DiscoveryConfig, InputChangedError, run_discovery
from triehh_beam.job.state.state_store import (MANIFEST_NAME, STATE_SCHEMA_VERSION, StateStore,
                                               release_version)
from triehh_beam.proto import state_pb2

def _names(client, bucket):
    return sorted(blob.name for blob in client.list_blobs(bucket))


def test_a_fresh_interpreter_reaches_the_emulator_without_a_credential_search(
    gcs_emulator, gcs_emulator_server, gcs_emulator_client, tmp_path
):
    # What Beam's multi-process workers see: a new process with the test's environment.
    script = textwrap.dedent(
        f"""
        import google.auth._default as search
        searched = []
        to_gce = search._get_gce_credentials
        search._get_gce_credentials = lambda *a, **k: searched.append(1) or to_gce(*a, **k)
        from apache_beam.io.filesystems import FileSystems
        with FileSystems.create("gs://{gcs_emulator}/probe.txt") as f:
            f.write(b"from a subprocess")
        print("searched the metadata server:", len(searched))
        """
    )
    env = dict(os.environ, **beam_environment(gcs_emulator_server.endpoint, tmp_path))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # The credential search's last step asks the GCE metadata server (and backs off ~20 s when
    # nothing answers); the environment must end the search before it, whatever the machine's speed.
    assert "searched the metadata server: 0" in done.stdout, done.stdout + done.stderr
    assert "Retry with exponential backoff" not in done.stderr
    blob = gcs_emulator_client.bucket(gcs_emulator).get_blob("probe.txt")
    assert blob.download_as_bytes() == b"from a subprocess"


def test_create_open_match_rename_delete(gcs_emulator, gcs_emulator_client):
    root = f"gs://{gcs_emulator}/files"
    for name, data in (("a.txt", b"alpha"), ("b.txt", b"bravo"), ("sub/c.txt", b"charlie")):
        with FileSystems.create(f"{root}/{name}", compression_type="uncompressed") as f:
            f.write(data)
    with FileSystems.open(f"{root}/a.txt", compression_type="uncompressed") as f:
        assert f.read() == b"alpha"
    assert gcs_emulator_client.bucket(gcs_emulator).blob("files/b.txt").download_as_bytes() == b"bravo"

    (matched,) = FileSystems.match([f"{root}/*.txt"])
    assert sorted((m.path, m.size_in_bytes) for m in matched.metadata_list) == [
        (f"{root}/a.txt", 5),
        (f"{root}/b.txt", 5),
    ]
    assert FileSystems.exists(f"{root}/sub/c.txt")

    # rename is a batch copy then a batch delete
    FileSystems.rename([f"{root}/a.txt", f"{root}/b.txt"], [f"{root}/x.txt", f"{root}/y.txt"])
    assert _names(gcs_emulator_client, gcs_emulator) == ["files/sub/c.txt", "files/x.txt", "files/y.txt"]
    with FileSystems.open(f"{root}/y.txt", compression_type="uncompressed") as f:
        assert f.read() == b"bravo"

    FileSystems.delete([f"{root}/x.txt", f"{root}/y.txt"])
    assert not FileSystems.exists(f"{root}/x.txt")
    assert _names(gcs_emulator_client, gcs_emulator) == ["files/sub/c.txt"]


def test_state_store_commit_and_load_round_trip(gcs_emulator, gcs_emulator_client):
    store = StateStore(f"gs://{gcs_emulator}/state")
    assert not store.exists() and store.load() is None
    first = state_pb2.JobState(job_id="job-1", secret_seed=b"s" * 32, rounds_completed=1, created_at="t0")
    first_path = store.commit(first)
    expected = state_pb2.JobState.FromString(first.SerializeToString())
    expected.schema_version = STATE_SCHEMA_VERSION
    expected.written_by = release_version()
    assert store.load() == expected
    second = state_pb2.JobState.FromString(first.SerializeToString())
    second.rounds_completed = 2
    second_path = store.commit(second)
    assert first_path != second_path and second_path.startswith(f"gs://{gcs_emulator}/state/state-0002-")
    loaded = StateStore(f"gs://{gcs_emulator}/state").load()
    assert loaded.rounds_completed == 2 and loaded.job_id == "job-1"
    # The manifest was published by rename: no temporary object is left behind.
    assert _names(gcs_emulator_client, gcs_emulator) == sorted(
        [f"state/{MANIFEST_NAME}", first_path.split(f"{gcs_emulator}/")[1], second_path.split(f"{gcs_emulator}/")[1]]
    )


@pytest.mark.slow
def test_a_discovery_reads_and_writes_gs(gcs_emulator, gcs_emulator_client):
    # Three users, one word each, everyone sampled (m = n = 3), theta = 1: every prefix of every
    # word survives every round, so all three words are discovered.
    records = "".join(
        json.dumps({"user_id": user, "item": word}) + "\n" for user, word in ((1, "hello"), (2, "hey"), (3, "hi"))
    )
    gcs_emulator_client.bucket(gcs_emulator).blob("in/records-00.jsonl").upload_from_string(records)
    config = DiscoveryConfig(
        input_pattern=f"gs://{gcs_emulator}/in/*.jsonl",
        output_dir=f"gs://{gcs_emulator}/out",
        state_dir=f"gs://{gcs_emulator}/private/state",  # required on gs://
        epsilon=1.0,
        delta=1e-6,
        max_length=8,
        theta=1,
        batch_size=3,
        allow_no_guarantee=True, protocol="triehh"
    )
    result = run_discovery(config)
    assert result.output_path == f"gs://{gcs_emulator}/out/heavy_hitters.json"
    assert sorted(result.heavy_hitters) == ["hello", "hey", "hi"]

    document = json.loads(
        gcs_emulator_client.bucket(gcs_emulator).blob("out/heavy_hitters.json").download_as_bytes()
    )
    assert sorted(document["heavy_hitters"]) == ["hello", "hey", "hi"]
    state = StateStore(f"gs://{gcs_emulator}/private/state").load()
    assert not [n for n in _names(gcs_emulator_client, gcs_emulator) if n.startswith("out/state")]
    assert state.finished and state.rounds_completed == len(state.rounds) == 6  # "hello" + terminator
    names = _names(gcs_emulator_client, gcs_emulator)
    assert "out/trie.pb" in names
    assert not [n for n in names if n.endswith(".tmp") or "/census/" in n or "/rounds/" in n], names

    resumed = run_discovery(config)  # the finished job on gs:// is resumed, not re-run
    assert resumed.resumed_from_round == 6
    assert sorted(resumed.heavy_hitters) == ["hello", "hey", "hi"]


@pytest.mark.slow
def test_a_rewritten_gcs_object_is_refused_by_its_generation(gcs_emulator, gcs_emulator_client):
    # Issue 10, finding 1: the state records each object's generation; the same bytes uploaded
    # again (same name, same size) are a new generation, and a round on them is refused.
    records = "".join(
        json.dumps({"user_id": user, "item": word}) + "\n" for user, word in ((1, "hello"), (2, "hey"), (3, "hi"))
    )
    blob = gcs_emulator_client.bucket(gcs_emulator).blob("changing/records-00.jsonl")
    blob.upload_from_string(records)
    config = DiscoveryConfig(
        input_pattern=f"gs://{gcs_emulator}/changing/*.jsonl", output_dir=f"gs://{gcs_emulator}/changing-out",
        state_dir=f"gs://{gcs_emulator}/private/changing-state",  # required on gs://
        epsilon=1.0, delta=1e-6, max_length=8, theta=1, batch_size=3, allow_no_guarantee=True, protocol="triehh"
    )

    with pytest.raises(StoppedAfterRound):
        run_discovery(config, events=stop_after_round(1))
    state = StateStore(config.resolved_state_dir).load()
    (recorded,) = state.input_snapshot.files
    assert recorded.path == f"gs://{gcs_emulator}/changing/records-00.jsonl"
    assert recorded.generation == gcs_emulator_client.bucket(gcs_emulator).get_blob("changing/records-00.jsonl").generation
    assert recorded.size_bytes == len(records) and state.input_snapshot.records == 3

    gcs_emulator_client.bucket(gcs_emulator).blob("changing/records-00.jsonl").upload_from_string(records)
    with pytest.raises(InputChangedError, match=r"records-00\.jsonl (was rewritten \(generation|was modified)"):
        run_discovery(config)
    assert StateStore(config.resolved_state_dir).load().rounds_completed == 1
