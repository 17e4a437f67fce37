"""Where a job's private state lives (README: Secrets and state): outside the published output,
owner-only on a local disk whatever the umask, required explicitly for a ``gs://`` output; and a
state an earlier release wrote refused in one line naming that release."""

import hashlib
import json
import os
import pathlib
import stat

import numpy as np
import pytest

from tests.old_states import as_written_by_0_1_0
from triehh_beam import cli
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import DiscoveryConfig, run_discovery
from triehh_beam.job.state.state_store import StateStore

SEED = hashlib.sha256(b"triehh-beam state location tests").digest()  # public: tests only
WORDS = ["apple", "bread", "cider", "dough", "eggs"]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path = tmp_path_factory.mktemp("records") / "records.jsonl"
    words = np.random.default_rng(11).choice(WORDS, size=3000, p=[0.4, 0.25, 0.2, 0.1, 0.05])
    write_records(str(path), [(i, str(w), 1) for i, w in enumerate(words)])
    return str(path)


def _config(records, output, **overrides) -> DiscoveryConfig:
    fields = dict(input_pattern=records, output_dir=str(output), epsilon=3.0, delta=1e-6, max_length=6, seed=SEED)
    fields.update(overrides)
    return DiscoveryConfig(**{"protocol": "triehh", **fields})


@pytest.fixture
def umask_zero():
    """The loosest umask: whatever the job makes private, it makes so by itself."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_the_default_state_directory_is_beside_a_local_output(tmp_path):
    config = _config("records.jsonl", tmp_path / "out")
    assert config.resolved_state_dir == str(tmp_path / "out") + ".state"
    relative = _config("records.jsonl", "out/")
    assert relative.resolved_state_dir == os.path.abspath("out") + ".state"


def test_a_gs_output_needs_an_explicit_state_directory():
    with pytest.raises(ValueError, match=r"a gs:// output needs --state-dir"):
        _config("gs://b/in/*.jsonl", "gs://b/out")
    assert _config("gs://b/in/*.jsonl", "gs://b/out", state_dir="gs://private/state").resolved_state_dir == (
        "gs://private/state"
    )


@pytest.mark.parametrize("state_dir", ["{out}", "{out}/state", "{out}/deep/private"])
def test_a_state_directory_inside_the_output_is_refused(tmp_path, state_dir):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="inside the output"):
        _config("records.jsonl", out, state_dir=state_dir.format(out=out))
    with pytest.raises(ValueError, match="inside the output"):
        _config("gs://b/in", "gs://b/out", state_dir="gs://b/out/state")
    _config("records.jsonl", out, state_dir=str(tmp_path / "out-private"))  # a mere shared prefix is fine


def test_a_run_keeps_its_state_owner_only_and_out_of_the_output(records, tmp_path, umask_zero, grep_files):
    out = tmp_path / "out"
    result = run_discovery(_config(records, out))
    assert result.heavy_hitters
    state_dir = pathlib.Path(str(out) + ".state")
    assert StateStore(str(state_dir)).load().secret_seed == SEED
    # The output holds what is published, and not the seed in any form.
    assert sorted(p.name for p in out.iterdir()) == ["heavy_hitters.json", "trie.pb"]
    # ... nor what the records' processing measured (each worker's peak memory was published).
    published = json.loads((out / "heavy_hitters.json").read_text())
    assert sorted(published) == ["created_at", "encoding", "frequent_prefixes", "heavy_hitters", "job_id",
                                 "privacy", "rounds_run", "stop_reason"], sorted(published)
    report = json.loads((pathlib.Path(str(out) + ".state") / "operator_report.json").read_text())
    assert report["worker_peak_rss_mb"]["census"]  # the operator's, in the private report
    for form in (SEED, SEED.hex().encode()):
        assert grep_files(out, form) == []
    assert grep_files(state_dir, SEED)  # the search works
    # Owner-only, although the umask let everything be world-readable.
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    entries = list(state_dir.rglob("*"))
    assert any(p.name == "MANIFEST.json" for p in entries) and any(p.name.startswith("state-") for p in entries)
    loose = [(str(p), oct(stat.S_IMODE(p.stat().st_mode))) for p in entries
             if stat.S_IMODE(p.stat().st_mode) & 0o077]
    assert loose == []
    files = [p for p in entries if p.is_file()]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), files


def _loose_entries(state_dir: pathlib.Path):
    """Entries other users could read: directories not 0700, files not 0600."""
    return [(str(p), oct(stat.S_IMODE(p.stat().st_mode))) for p in state_dir.rglob("*")
            if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)]


@pytest.mark.parametrize("umask", [0o022, 0])
def test_a_windowed_run_keeps_its_state_and_dead_letter_owner_only(tmp_path, umask):
    # The windowed replay's census (input checks) and window folders, and a dead letter (a row
    # without a user) in the state directory: census/ was 0755 and dead_letter.jsonl 0644; a
    # record after the declared windows made window=2026-11-02T00:00:00Z/ 0755 (its admitted count).
    records = tmp_path / "records.csv"
    rows = [f"u{user},{WORDS[user % len(WORDS)]},2026-11-01T00:{user % 60:02d}:00Z" for user in range(2000)]
    rows += [",apple,2026-11-01T00:01:00Z", "u-later,apple,2026-11-02T00:01:00Z"]
    records.write_text("user_id,item,ts\n" + "\n".join(rows) + "\n")
    previous = os.umask(umask)
    try:
        _run_windowed(records, tmp_path / "out")
    finally:
        os.umask(previous)
    state_dir = pathlib.Path(str(tmp_path / "out") + ".state")
    assert (state_dir / "dead_letter.jsonl").read_text().count("\n") == 1
    assert any(p.name == "census" for p in state_dir.iterdir())
    assert (state_dir / "windows" / "window=2026-11-02T00:00:00Z").is_dir()  # the case that was 0755
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700 and _loose_entries(state_dir) == []


def _run_windowed(records, out):
    assert cli.main(["discover", "--input", str(records), "--output", str(out), "--epsilon", "4",
                     "--delta", "1e-6", "--max-length", "6", "--window", "1h", "--timestamp-column", "ts",
                     "--windows", "2026-11-01T00:00:00Z..2026-11-01T01:00:00Z"]) == 0


def test_a_state_directory_left_open_is_tightened(records, tmp_path, umask_zero):
    state_dir = tmp_path / "moved-in"
    state_dir.mkdir(mode=0o755)
    os.chmod(state_dir, 0o755)
    run_discovery(_config(records, tmp_path / "out", state_dir=str(state_dir)))
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700


def test_a_state_written_by_0_1_0_is_refused_in_one_line_naming_the_version(records, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["discover", "--protocol", "triehh", "--input", records, "--output", str(out), "--epsilon", "3", "--delta", "1e-6",
            "--max-length", "6"]
    assert cli.main(argv) == 0
    assert StateStore(str(out) + ".state").load().written_by  # this release records itself
    as_written_by_0_1_0(str(out) + ".state")
    capsys.readouterr()
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert "written by triehh-beam 0.1.0" in lines[0] and "start the job again in a new output" in lines[0]
    assert "census" not in captured.out and "resuming" not in captured.out
