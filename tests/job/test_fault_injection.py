"""Crash safety: a driver killed with SIGKILL anywhere, then re-run, ends exactly like an
unbroken run with the same seed, and the ledger charges the job once. Every run is a process
forked by the harness's fork server (``fault_harness.py --serve``: Beam imported once per
module, not twice per test), on the smallest job that reaches every point: L = 3 (the last
points are in round 3), two-letter words so that each is a heavy hitter at L = 3."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import types

import numpy as np
import pytest

from triehh_beam.io.write import write_records
from triehh_beam.job.state import cas, ledger
from triehh_beam.job.state.lease import Lease

sys.path.insert(0, os.path.dirname(__file__))
from fault_harness import FIXED_NONCE, ONE_JOB_POINTS, POINTS  # noqa: E402

pytestmark = pytest.mark.slow  # whole discoveries in subprocesses or many rounds: see README, Tests

REPO = pathlib.Path(__file__).resolve().parents[2]
HARNESS = str(REPO / "tests" / "job" / "fault_harness.py")
# Words of two letters: with --max-length 3 each fills the trie (2 letters, then the terminator)
# in exactly the 3 rounds the points need (one_job_mid_round_3 is the deepest).
WORDS = ["an", "am", "as", "at", "ma", "me", "my", "no", "on", "ox"]
MAX_LENGTH = 3


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """4,000 users, one word each (Zipf-like), in two JSONL files; and a seed file. (The data
    is not what a run spends its time on: each of its Beam jobs costs about a second anyway.)"""
    root = tmp_path_factory.mktemp("population")
    rng = np.random.default_rng(11)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    words = rng.choice(WORDS, size=4000, p=weights / weights.sum())
    rows = [(f"user-{i}", str(w), 1) for i, w in enumerate(words)]
    write_records(str(root / "part-0.jsonl"), rows[:2000])
    write_records(str(root / "part-1.jsonl"), rows[2000:])
    seed = root / "seed.bin"
    seed.write_bytes(bytes(range(100, 132)))
    return root


def _argv(population, out, mode="1"):
    return [
        "discover", "--protocol", "triehh", "--input", str(population / "part-*.jsonl"), "--output", str(out),
        "--epsilon", "6", "--delta", "1e-5", "--max-length", str(MAX_LENGTH),
        "--seed-file", str(population / "seed.bin"), "--rounds-per-job", mode,
    ]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """``run(args, harness_point=None)``: ``triehh args`` in a process forked by the harness's
    fork server, killed at the point if one is given; returns its returncode and stderr (its
    output). Through the harness always: it fixes the release nonce, so that every run of a test
    is one release (a fresh nonce would make the rerun after a kill before the commit another)."""
    logs = tmp_path_factory.mktemp("fault-logs")
    server = subprocess.Popen([sys.executable, HARNESS, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=_env(), cwd=str(REPO))
    count = [0]

    def run(args, *, harness_point=None):
        count[0] += 1
        log = logs / f"run-{count[0]}.log"
        request = dict(point=harness_point or "none", argv=[str(a) for a in args], log=str(log))
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        assert answer, f"the fault server exited with {server.poll()}"
        output = log.read_text(errors="replace") if log.exists() else ""
        return types.SimpleNamespace(returncode=json.loads(answer)["returncode"], stderr=output)

    yield run
    server.stdin.close()
    try:
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def _outputs(out):
    document = json.loads((out / "heavy_hitters.json").read_text())
    for volatile in ("job_id", "created_at"):
        document.pop(volatile)
    return document, (out / "trie.pb").read_bytes()


def _clear(out) -> None:
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(f"{out}.state", ignore_errors=True)


@pytest.fixture(scope="module")
def unbroken(population, harness, tmp_path_factory):
    """The unbroken run's outputs, and its output path: the killed runs use the same one (the
    job's identity, output included, keys its samples), one at a time (a worker runs a module's
    tests in turn), each clearing it first."""
    out = tmp_path_factory.mktemp("unbroken") / "out"
    result = harness(_argv(population, out))
    assert result.returncode == 0, result.stderr
    document, trie = _outputs(out)
    assert document["rounds_run"] == MAX_LENGTH == 3, "the fault points need a run of 3 rounds"
    assert document["heavy_hitters"], "the population must have heavy hitters to compare"
    _clear(out)
    return (document, trie), out


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_then_rerun_gives_the_unbroken_result_and_one_charge(point, population, harness, unbroken):
    unbroken, out = unbroken
    _clear(out)
    # Killed in one mode, re-run in the same mode: the result is the unbroken one-job-per-round
    # run's, byte for byte (the two modes give the same trie).
    mode = "all" if point in ONE_JOB_POINTS else "1"
    killed = harness(_argv(population, out, mode), harness_point=point)
    assert killed.returncode == -signal.SIGKILL, (
        f"the point {point} was not reached (exit {killed.returncode}): {killed.stderr[-2000:]}"
    )
    spills = lambda: list(pathlib.Path(f"{out}.state", "census").glob("spill-*"))
    assert bool(spills()) == (point == "census_job")  # a killed census leaves its fingerprints
    rerun = harness(_argv(population, out, mode))
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert not spills()  # the re-run deleted them
    assert _outputs(out) == unbroken
    records = ledger.Ledger(str(out) + ".state").records()
    assert len(records) == 1, records
    assert records[0]["record_id"].endswith("/release=" + FIXED_NONCE.hex())
    assert records[0]["epsilon"] <= 6
    # The lease was released by the re-run: a third run starts (and finds the job finished).
    assert Lease(cas.cas_store_for(str(out) + ".state"), "LEASE").current().released
