"""Crash safety: a driver killed with SIGKILL anywhere, then re-run, ends exactly like an
unbroken run with the same seed, and the ledger charges the job once."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from triehh_beam.job import cas, ledger
from triehh_beam.job.lease import Lease
from triehh_beam.io.write import write_records

sys.path.insert(0, os.path.dirname(__file__))
from fault_harness import FIXED_NONCE, ONE_JOB_POINTS, POINTS  # noqa: E402

pytestmark = pytest.mark.slow  # whole discoveries in subprocesses or many rounds: see README, Tests

REPO = pathlib.Path(__file__).resolve().parents[2]
HARNESS = str(REPO / "tests" / "job" / "fault_harness.py")
WORDS = ["apple", "apply", "ample", "maple", "mango", "man", "map", "zebra", "zero", "zoo"]


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """4,000 users, one word each (Zipf-like), in two JSONL files; and a seed file."""
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
        "discover", "--input", str(population / "part-*.jsonl"), "--output", str(out),
        "--epsilon", "6", "--delta", "1e-5", "--max-length", "6",
        "--seed-file", str(population / "seed.bin"), "--rounds-per-job", mode,
    ]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _run(args, *, harness_point=None):
    # Through the harness always: it fixes the release nonce, so that every run of a test is one
    # release (a fresh nonce would make the rerun after a kill before the commit another one).
    command = [sys.executable, HARNESS, harness_point or "none", "--", *args]
    return subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=300, cwd=str(REPO))


def _outputs(out):
    document = json.loads((out / "heavy_hitters.json").read_text())
    for volatile in ("job_id", "created_at"):
        document.pop(volatile)
    return document, (out / "trie.pb").read_bytes()


def _clear(out) -> None:
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(f"{out}.state", ignore_errors=True)


@pytest.fixture(scope="module")
def unbroken(population, tmp_path_factory):
    """The unbroken run's outputs, and its output path: the killed runs use the same one (the
    job's identity, output included, keys its samples), one at a time (a worker runs a module's
    tests in turn), each clearing it first."""
    out = tmp_path_factory.mktemp("unbroken") / "out"
    result = _run(_argv(population, out))
    assert result.returncode == 0, result.stderr
    document, trie = _outputs(out)
    assert document["rounds_run"] >= 3, "the fault points need a run of several rounds"
    assert document["heavy_hitters"], "the population must have heavy hitters to compare"
    _clear(out)
    return (document, trie), out


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_then_rerun_gives_the_unbroken_result_and_one_charge(point, population, unbroken, tmp_path):
    unbroken, out = unbroken
    _clear(out)
    # Killed in one mode, re-run in the same mode: the result is the unbroken one-job-per-round
    # run's, byte for byte (the two modes give the same trie).
    mode = "all" if point in ONE_JOB_POINTS else "1"
    killed = _run(_argv(population, out, mode), harness_point=point)
    assert killed.returncode == -signal.SIGKILL, (
        f"the point {point} was not reached (exit {killed.returncode}): {killed.stderr[-2000:]}"
    )
    rerun = _run(_argv(population, out, mode))
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert _outputs(out) == unbroken
    records = ledger.Ledger(str(out) + ".state").records()
    assert len(records) == 1, records
    assert records[0]["record_id"].endswith("/release=" + FIXED_NONCE.hex())
    assert records[0]["epsilon"] <= 6
    # The lease was released by the re-run: a third run starts (and finds the job finished).
    assert Lease(cas.cas_store_for(str(out) + ".state"), "LEASE").current().released
