"""Whole discoveries on Prism (Beam's portable runner in Go: its own fusion, shuffle, side inputs
and bundle splitting) equal the in-process ones, byte for byte, for the same release.

Each test runs ``triehh discover`` twice as a subprocess (``tests/e2e/prism_child.py``, which
draws release nonces from a fixed seed, so that both runs are one release): once in process, once
with ``--runner PrismRunner`` (the product finds the local binary itself: no ``--prism_location``)
inside a network namespace with only loopback (Prism binds every interface and its data plane
carries raw records). Equal: ``trie.pb``, ``heavy_hitters.json`` (its job id and time aside), the
operator report's counters, and the lines printed (timings aside); none of Prism's own log lines
reach the console (they are in the state directory's ``prism.log``). One test runs the discovery
through Beam's ``PortableRunner`` with Prism as the job service and an SDK worker pool.

Skipped, with a one-line reason, where Prism is not installed (``.ci/run`` builds it) or
``unshare -n`` is not permitted.
"""

import contextlib
import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests import prism_runner
from triehh_beam.io.write import write_records

pytestmark = [pytest.mark.prism, pytest.mark.slow]

SEED = bytes(range(40, 72))
RUN_TIMEOUT_S = 240
_TIMING = re.compile(r"\b[0-9]+(\.[0-9]+)? s\b")
_UNSTABLE = {"job_id", "created_at", "elapsed_seconds"}


@pytest.fixture(autouse=True)
def prism_here():
    reason = prism_runner.skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def records(tmp_path, make_population):
    """1,500 users holding one word each, Zipf over 30 words of at most 5 letters."""
    return make_population(1500, 5, vocabulary=30, seed=37).write(tmp_path / "in")


def _run(tmp_path, args, env, runner: str) -> subprocess.CompletedProcess:
    head = ["--job-service"] if runner == "job_service" else []
    tail = ["--runner", "PrismRunner"] if runner == "prism" else []
    command = [sys.executable, "-m", "tests.e2e.prism_child", "7", *head, "--", "discover", *args, *tail]
    if runner != "in_process":
        command = prism_runner.in_loopback_namespace(command)
    # Its own process group, so that a run that hangs is stopped with every process it started.
    child = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        stdout, stderr = child.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # nothing of a finished run is left either
    assert child.returncode == 0, f"{runner}: exit {child.returncode}\n{stdout[-3000:]}\n{stderr[-5000:]}"
    return subprocess.CompletedProcess(command, child.returncode, stdout, stderr)


def _stable(document):
    """A JSON document without its job id, times and durations, nor its workers' memory (each
    process's own: ``worker_peak_rss_mb`` and its per-worker counters), nor the most rows a step
    held at once (``largest_rows_held``: how many partial results a merge meets at once depends
    on how the runner cut its bundles; a fresh-clone run on Prism's job service saw them differ
    once from in-process, with the same trie and every other count equal)."""
    if isinstance(document, dict):
        return {k: _stable(v) for k, v in document.items()
                if k not in _UNSTABLE and not k.startswith(("worker_peak_rss_mb", "largest_rows_held"))}
    if isinstance(document, list):
        return [_stable(v) for v in document]
    return document


def _outputs(root: pathlib.Path, names):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.name in names}


def compare_runners(tmp_path, records, env, args, runner="prism"):
    """Runs ``triehh discover --input records --output OUT args`` in process and on ``runner``
    (``prism``: PrismRunner; ``job_service``: PortableRunner against Prism), one release; asserts
    the outputs equal; returns the two runs' (stdout, state directory)."""
    out, seed_file = tmp_path / "out", tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    ran = {}
    for where in ("in_process", runner):
        ran[where] = _run(tmp_path, ["--input", records, "--output", str(out), "--seed-file", str(seed_file), *args],
                          env, where)
        out.rename(tmp_path / where)
        pathlib.Path(f"{out}.state").rename(tmp_path / f"{where}.state")
    published = [_outputs(tmp_path / where, {"trie.pb", "heavy_hitters.json"}) for where in ("in_process", runner)]
    assert published[0] and published[0].keys() == published[1].keys()
    for name, expected in published[0].items():
        if name.endswith(".pb"):
            assert published[1][name] == expected, name
        else:
            assert _stable(json.loads(published[1][name])) == _stable(json.loads(expected)), name
    reports = [_outputs(tmp_path / f"{where}.state", {"operator_report.json"}) for where in ("in_process", runner)]
    assert reports[0] and reports[0].keys() == reports[1].keys()
    for name, expected in reports[0].items():
        mine, theirs = json.loads(expected), json.loads(reports[1][name])
        assert _stable(theirs) == _stable(mine), name
    lines = [_TIMING.sub("T s", ran[where].stdout) for where in ("in_process", runner)]
    assert lines[1] == lines[0]
    for stream in (ran[runner].stdout, ran[runner].stderr):
        assert "PrismRunner" not in stream and "Really starting service" not in stream
    return {where: (ran[where].stdout, tmp_path / f"{where}.state") for where in ran}


def _round_counters(state: pathlib.Path):
    report = json.loads((state / "operator_report.json").read_text())
    return [r["counters"] for r in report["rounds"]]


TRIEHH = ["--protocol", "triehh", "--epsilon", "4", "--delta", "1e-6", "--max-length", "6", "--theta", "6",
          "--batch-size", "400", "--allow-no-guarantee"]
TRIEHH_PP = ["--protocol", "triehh++", "--epsilon", "4", "--delta", "1e-5", "--max-length", "6"]


def test_triehh_on_prism_equals_in_process(tmp_path, records, subprocess_env):
    ran = compare_runners(tmp_path, records, subprocess_env, TRIEHH)
    counters = _round_counters(ran["prism"][1])
    assert len(counters) >= 3 and all(c["users_sampled"] == 400 for c in counters)
    assert (ran["prism"][1] / "prism.log").stat().st_size > 0  # Prism's lines, off the console


def test_triehh_plus_plus_with_estimates_on_prism_equals_in_process(tmp_path, records, subprocess_env):
    ran = compare_runners(tmp_path, records, subprocess_env, TRIEHH_PP + ["--estimate-frequencies", "1"])
    document = json.loads((tmp_path / "prism" / "heavy_hitters.json").read_text())
    assert document["heavy_hitters"] and all(
        isinstance(entry["estimate"], int) and len(entry["interval"]) == 2 for entry in document["heavy_hitters"])
    assert "frequency_estimates" in document
    assert _round_counters(ran["prism"][1])


def test_whole_items_on_prism_equal_in_process(tmp_path, records, subprocess_env):
    compare_runners(tmp_path, records, subprocess_env,
                    ["--protocol", "sample-threshold", "--epsilon", "1", "--delta", "1e-5", "--max-length", "6"])
    assert json.loads((tmp_path / "prism" / "heavy_hitters.json").read_text())["heavy_hitters"]


def test_a_deny_list_and_one_job_per_round_on_prism_equal_in_process(tmp_path, records, subprocess_env):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    _run(earlier, ["--input", records, "--output", str(earlier / "out"), *TRIEHH_PP], subprocess_env, "in_process")
    deny = str(earlier / "out" / "heavy_hitters.json")
    assert json.loads(pathlib.Path(deny).read_text())["heavy_hitters"]
    ran = compare_runners(tmp_path, records, subprocess_env, TRIEHH_PP + ["--deny-list", deny, "--rounds-per-job", "1"])
    assert "deny list:" in ran["prism"][0]
    assert "(run in the samples' job)" not in ran["prism"][0]  # a job per round


def test_a_windowed_replay_on_prism_equals_in_process(tmp_path, subprocess_env):
    rng = np.random.default_rng(5)
    words = ["tea", "toast", "jam", "eggs", "ham", "figs"]
    weights = np.array([6, 5, 4, 3, 2, 1]) / 21
    start = np.datetime64("2025-11-23T10:00:00", "s")
    lines = []
    for window in range(2):
        for user in rng.permutation(1200):
            stamp = start + np.timedelta64(window * 3600 + int(rng.integers(0, 3600)), "s")
            lines.append(json.dumps({"user_id": f"w{window}u{user}", "item": str(rng.choice(words, p=weights)),
                                     "ts": str(stamp) + "Z"}))
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(lines) + "\n")
    compare_runners(tmp_path, str(records), subprocess_env,
                    TRIEHH_PP + ["--window", "1h", "--timestamp-column", "ts",
                                 "--windows", "2025-11-23T10:00:00Z..2025-11-23T12:00:00Z"])
    assert len(list((tmp_path / "prism").rglob("trie.pb"))) == 2


def test_the_portable_runner_with_prism_as_the_job_service_equals_in_process(tmp_path, records, subprocess_env):
    ran = compare_runners(tmp_path, records, subprocess_env, TRIEHH, runner="job_service")
    counters = _round_counters(ran["job_service"][1])
    assert len(counters) >= 3 and all(c["users_sampled"] == 400 for c in counters)
    assert "Starting worker with command" in (tmp_path / "worker_pool.log").read_text()
