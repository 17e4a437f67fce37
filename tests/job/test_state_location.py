"""Where a job's private state lives (README: Secrets and state): outside the published output,
owner-only on a local disk whatever the umask, required explicitly for a ``gs://`` output, and a
job left in the old default ``OUTPUT/state`` refused until it is moved out (then it resumes)."""

import hashlib
import os
import pathlib
import shutil
import stat

import numpy as np
import pytest
from apache_beam.io.filesystems import FileSystems

from triehh_beam import cli
from triehh_beam.io.write import write_records
from triehh_beam.job import config as config_lib
from triehh_beam.job import driver, ledger
from triehh_beam.job.driver import DiscoveryConfig, StateLocationError, run_discovery
from triehh_beam.job.state_store import StateStore

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
    return DiscoveryConfig(**fields)


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


def test_a_state_directory_left_open_is_tightened(records, tmp_path, umask_zero):
    state_dir = tmp_path / "moved-in"
    state_dir.mkdir(mode=0o755)
    os.chmod(state_dir, 0o755)
    run_discovery(_config(records, tmp_path / "out", state_dir=str(state_dir)))
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700


class _Stop(Exception):
    pass


def _stop_after_round_1(line: str) -> None:
    if line.startswith("round 1/"):
        raise _Stop()  # round 1 is committed before its line is printed


def _legacy_job(records, out, monkeypatch) -> None:
    """A job stopped after round 1 with its state where releases before 0.2 kept it by default,
    OUTPUT/state (its default ledger there too), made by the old defaults."""
    with monkeypatch.context() as old:
        old.setattr(DiscoveryConfig, "resolved_state_dir",
                    property(lambda c: c.state_dir or FileSystems.join(c.output_dir, "state")))
        old.setattr(config_lib, "is_inside", lambda path, directory: False)
        old.setattr(driver, "check_state_location", lambda config: None)
        old.setattr(driver.release_lib, "check_locations", lambda output, state: None)
        with pytest.raises(_Stop):
            run_discovery(_config(records, out), progress=_stop_after_round_1)
    legacy = StateStore(str(out / "state")).load()
    assert legacy.rounds_completed == 1 and legacy.ledger == str(out / "state")


def test_a_job_in_the_old_default_location_is_refused_then_resumes_once_moved(records, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    _legacy_job(records, out, monkeypatch)
    legacy = StateStore(str(out / "state")).load()
    job_id = legacy.job_id
    with pytest.raises(StateLocationError, match=r"holds a job's private state .* move it out to .*out\.state"):
        run_discovery(_config(records, out))
    # The command-line tool: one line, exit code 2, nothing run.
    argv = ["discover", "--input", records, "--output", str(out), "--epsilon", "3", "--delta", "1e-6",
            "--max-length", "6"]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    assert f"move it out to {out}.state" in captured.err and "census" not in captured.out
    assert not pathlib.Path(str(out) + ".state").exists()

    # Moved as the message says (mv keeps the old, open mode), the job resumes after round 1 and
    # is not charged again: its default ledger moved with it.
    shutil.move(str(out / "state"), str(out) + ".state")
    result = run_discovery(_config(records, out))
    assert result.resumed_from_round == 1
    moved = pathlib.Path(str(out) + ".state")
    assert StateStore(str(moved)).load().job_id == job_id
    assert [r["record_id"] for r in ledger.Ledger(str(moved)).records()] == [legacy.ledger_record]
    assert stat.S_IMODE(moved.stat().st_mode) == 0o700
