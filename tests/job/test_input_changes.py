"""Input that changes under a job (issue 10, finding 1): the state records what the census read
(the files with their sizes, modification times or GCS generations, and the records counted),
and a round or a resume whose input differs is refused with a one-line reason (exit code 2),
as is a round that did not rank exactly the records the census counted."""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.driver_events import StoppedAfterRound, stop_after_round
from triehh_beam.io.write import write_records
from triehh_beam.job.batch import graphs
from triehh_beam.job.batch.driver import DiscoveryConfig, InputChangedError, run_discovery
from triehh_beam.job.state.state_store import StateStore

SEED = hashlib.sha256(b"triehh-beam input change tests").digest()  # public: tests only
EPSILON, DELTA, L = 4.0, 1e-6, 6


def _config(pattern, output, **overrides) -> DiscoveryConfig:
    fields = dict(epsilon=EPSILON, delta=DELTA, max_length=L, seed=SEED)
    fields.update(overrides)
    return DiscoveryConfig(input_pattern=str(pattern), output_dir=str(output), **{"protocol": "triehh", **fields})


def _stopped_after_round_1(config: DiscoveryConfig):
    with pytest.raises(StoppedAfterRound):
        run_discovery(config, events=stop_after_round(1))
    state = StateStore(config.resolved_state_dir).load()
    assert state.rounds_completed == 1 and not state.finished
    return state


@pytest.fixture(scope="module")
def _four_thousand_once(tmp_path_factory, make_population):
    """The job stopped after round 1, once per module, with pristine copies of its input and
    state (its census, sampling pass and round 1 are most of a test's time)."""
    root = tmp_path_factory.mktemp("four-thousand")
    pattern = make_population(4000, max_chars=L - 1).write(root / "records", shards=2)
    config = _config(pattern, root / "out")
    _stopped_after_round_1(config)
    shutil.copytree(root / "records", root / "pristine-records")  # copy2: sizes and mtimes kept
    shutil.copytree(config.resolved_state_dir, root / "pristine-state")
    return root, pattern, config


@pytest.fixture
def four_thousand(_four_thousand_once):
    """The issue's population: 4,000 users in two files, the job stopped after round 1. Each
    test gets the input and state as the stop left them (restored byte for byte, with their
    modification times, at the paths the job's identity names), whatever the last one did."""
    root, pattern, config = _four_thousand_once
    for name, pristine in (("records", "pristine-records"), (config.resolved_state_dir, "pristine-state")):
        shutil.rmtree(root / name, ignore_errors=True)
        shutil.copytree(root / pristine, root / name)
    shutil.rmtree(config.output_dir, ignore_errors=True)
    state = StateStore(config.resolved_state_dir).load()
    assert state.rounds_completed == 1 and not state.finished
    return pattern, config, state


def test_the_state_records_what_the_census_read(four_thousand, tmp_path):
    pattern, config, state = four_thousand
    files = sorted(pathlib.Path(pattern).parent.glob("*.parquet"))
    recorded = state.input_snapshot
    assert [f.path for f in recorded.files] == [str(f) for f in files]
    for entry, path in zip(recorded.files, files):
        assert entry.size_bytes == path.stat().st_size
        assert entry.last_updated == pytest.approx(path.stat().st_mtime)
        assert entry.generation == 0  # local files have none
    assert recorded.records == 4000  # one record per user


def test_resuming_after_half_the_input_was_deleted_is_refused_with_exit_2(four_thousand, tmp_path, subprocess_env):
    # The reproduction: stop after round 1, delete half the input, resume. It used to
    # sample from the 2,000 users left under a plan made for 4,000.
    pattern, config, state = four_thousand
    deleted = pathlib.Path(pattern).parent / "records-01.parquet"
    deleted.unlink()
    with pytest.raises(InputChangedError, match=f"{deleted} is gone"):
        run_discovery(config)
    resumed = subprocess.run(
        [sys.executable, "-m", "triehh_beam.cli", "discover", "--protocol", "triehh", "--input", pattern, "--output", config.output_dir,
         "--epsilon", str(EPSILON), "--delta", str(DELTA), "--max-length", str(L)],
        capture_output=True, text=True, env=subprocess_env, cwd=tmp_path, timeout=240,
    )
    assert resumed.returncode == 2, resumed.stderr
    lines = resumed.stderr.strip().splitlines()
    assert len(lines) == 1, resumed.stderr
    assert "the input changed since the census" in lines[0] and f"{deleted} is gone" in lines[0]
    after = StateStore(config.resolved_state_dir).load()
    assert after.rounds_completed == 1 and len(after.rounds) == len(state.rounds)  # no round ran
    assert not pathlib.Path(config.output_dir, "heavy_hitters.json").exists()


@pytest.mark.parametrize("change", ["size", "mtime"])
def test_a_file_modified_in_place_is_refused(four_thousand, tmp_path, change):
    pattern, config, state = four_thousand
    modified = pathlib.Path(pattern).parent / "records-00.parquet"
    if change == "size":  # same name, other content
        write_records(str(modified), [(user, "other") for user in range(10)])
    else:  # same name, same bytes, touched
        stat = modified.stat()
        os.utime(modified, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(InputChangedError, match=f"{modified} (changed size|was modified)"):
        run_discovery(config)
    assert StateStore(config.resolved_state_dir).load().rounds_completed == 1


def test_a_new_file_matching_the_pattern_is_refused(four_thousand, tmp_path):
    pattern, config, state = four_thousand
    added = pathlib.Path(pattern).parent / "records-02.parquet"
    write_records(str(added), [(10_000 + user, "the") for user in range(50)])
    with pytest.raises(InputChangedError, match=f"{added} is new"):
        run_discovery(config)


def _write_jsonl(path: pathlib.Path, rows) -> None:
    path.write_text("".join(json.dumps({"user_id": u, "item": w}) + "\n" for u, w in rows), encoding="utf-8")


def test_input_that_changes_while_the_census_reads_it_is_refused(tmp_path, monkeypatch):
    records = tmp_path / "records.jsonl"
    _write_jsonl(records, [(1, "hello"), (2, "hey"), (3, "hi")])
    config = _config(records, tmp_path / "out", epsilon=1.0, theta=1, batch_size=3, allow_no_guarantee=True)
    original = graphs.build_first_pass

    def build_first_pass_then_append(*args, **kwargs):
        original(*args, **kwargs)
        with open(records, "a", encoding="utf-8") as f:
            f.write(json.dumps({"user_id": 4, "item": "ho"}) + "\n")

    monkeypatch.setattr(graphs, "build_first_pass", build_first_pass_then_append)
    with pytest.raises(InputChangedError, match="while the census read it: .*records.jsonl changed size"):
        run_discovery(config)
    assert StateStore(config.resolved_state_dir).load() is None  # no plan, no seed committed


def test_a_finished_job_republishes_without_its_input(tmp_path):
    # Nothing is read or sampled again: deleting the raw data after a job is allowed.
    records = tmp_path / "records.jsonl"
    _write_jsonl(records, [(1, "hello"), (2, "hey"), (3, "hi")])
    config = _config(records, tmp_path / "out", epsilon=1.0, theta=1, batch_size=3, allow_no_guarantee=True)
    first = run_discovery(config)
    records.unlink()
    records.write_text("", encoding="utf-8")  # the pattern still matches (a file), now empty
    again = run_discovery(config)
    assert again.heavy_hitters == first.heavy_hitters and again.resumed_from_round == first.rounds_run


# A test-only wrapper (the product has no hooks): after the first read, the samples are drawn by
# a pass over the records, as a resume draws them, and the input file becomes unreadable just
# before, with its size and modification time kept, so that only reading it can tell. Then
# ``triehh discover`` runs with the given arguments.
_CORRUPT_THEN_DISCOVER = """
import os, sys
from triehh_beam.job.batch import driver
path = sys.argv[1]
def sample_by_reading_again(self, state, run_rounds):
    data = open(path, "rb").read()
    stat = os.stat(path)
    with open(path, "wb") as f:
        f.write(b"\\x00" * len(data))  # no longer a gzip stream, same length
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    rounds = list(range(1, state.plan.max_length + 1))
    return self._sampling_job(state, rounds, self.population(state), run_rounds)
driver.Driver._cut_job = sample_by_reading_again
from triehh_beam.cli.dispatch import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("runner", [[], ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]],
                         ids=["in-process", "multi-process"])
def test_input_unreadable_in_the_sampling_pass_is_one_line_and_exit_2_on_every_runner(tmp_path, subprocess_env, runner):
    records = tmp_path / "records.jsonl.gz"
    import gzip

    records.write_bytes(gzip.compress(
        "".join(json.dumps({"user_id": u, "item": w}) + "\n" for u, w in ((1, "hello"), (2, "hey"), (3, "hi"))).encode()
    ))
    command = [
        sys.executable, "-c", _CORRUPT_THEN_DISCOVER, str(records),
        "discover", "--input", str(records), "--output", str(tmp_path / "out"),
        "--epsilon", "1", "--delta", "1e-6", "--max-length", "4", "--protocol", "triehh", "--theta", "1", "--batch-size", "3",
        "--allow-no-guarantee", *runner,
    ]
    run = subprocess.run(command, capture_output=True, text=True, env=subprocess_env, cwd=tmp_path, timeout=240)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"sampling: input the census read is now unreadable: {records}" in lines[0]
    assert StateStore(f"{tmp_path / 'out'}.state").load().rounds_completed == 0
