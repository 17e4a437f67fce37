"""Each worker's peak memory, per Beam job of a discovery, in the operator report
(``worker_peak_rss_mb``): on the multi-process runner with 2 workers, both worker processes of the
first read and of the sampling job (the cut), each under its own ``host:pid`` (neither the
driver's process), with a peak between a Python process with Beam imported and the machine's
memory; with ``--rounds-per-job 1``, each round's job too (the workers that voted: a round of one
table keeps one busy); in-process, the one process that runs everything."""

from __future__ import annotations

import json
import os
import pathlib
import resource
import socket

import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tests.one_pass_jobs import discovery_config, job_seed, word_rows
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import run_discovery


def _report(tmp_path, name, options=None, **fields):
    path = tmp_path / "records"
    path.mkdir(exist_ok=True)
    for shard in range(2):  # two files of different users: both workers read
        rows = [(f"s{shard}{user}", item, count) for user, item, count in word_rows(1500, np.random.default_rng(shard))]
        write_records(str(path / f"part-{shard}.parquet"), rows)
    config = discovery_config(f"{path}/*.parquet", tmp_path / name, job_seed("memory"), protocol="triehh++", **fields)
    run_discovery(config, options)
    return json.loads(pathlib.Path(config.resolved_state_dir, "operator_report.json").read_text())


def _plausible(peaks):
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    return all(100 <= mb <= total_mb for mb in peaks.values())


def test_in_process_the_one_process_reports_each_job(tmp_path):
    report = _report(tmp_path, "in-process")
    memory = report["worker_peak_rss_mb"]
    me = f"{socket.gethostname()}:{os.getpid()}"
    ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    for job in ("census", "sampling"):
        assert list(memory[job]) == [me] and _plausible(memory[job])
        assert memory[job][me] <= ours  # this process's peak so far, as the job saw it
    assert memory["rounds"] == {}  # every round ran in the sampling job


@pytest.mark.slow
def test_two_worker_processes_each_report_their_peak_in_every_job(tmp_path, monkeypatch, subprocess_env):
    # The multi-process runner's workers are subprocesses: they must import triehh_beam.
    monkeypatch.setenv("PYTHONPATH", subprocess_env["PYTHONPATH"])
    options = PipelineOptions(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    report = _report(tmp_path, "two-workers", options, rounds_per_job="1")
    memory, driver = report["worker_peak_rss_mb"], f"{socket.gethostname()}:{os.getpid()}"
    jobs = {"census": memory["census"], "sampling": memory["sampling"], **memory["rounds"]}
    assert len(memory["rounds"]) == report["rounds_run"] >= 2  # every round's own job
    for job, peaks in jobs.items():
        assert len(peaks) == (2 if job in ("census", "sampling") else len(peaks)) >= 1, (job, peaks)
        assert driver not in peaks and _plausible(peaks), (job, peaks)
    # Each job starts its worker processes anew: no worker of one job is another's.
    workers = [worker for peaks in jobs.values() for worker in peaks]
    assert len(set(workers)) == len(workers)
