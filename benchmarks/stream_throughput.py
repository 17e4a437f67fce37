#!/usr/bin/env python
"""Streaming discovery through the Pub/Sub emulator (issue 12): how many records per second get
in, and how long after a window closes its result is released, on Beam's Python
BundleBasedDirectRunner (the default of ``triehh stream``, Beam's native read) or, with
``--runner prism``, on Prism with the product's own read (run the script inside ``unshare -n``:
Prism binds every interface).

Two measurements, each against a fresh topic of one emulator (started here, on loopback):

* ``ingest``: ``ReadFromPubSub | ParseMessages`` alone, in this process: a backlog of messages
  of R records each (JSON and DeviceRecords) is read and parsed into record batches; records
  and messages per second from ``run()`` to the last record, and this process's CPU seconds.
* ``job``: ``triehh stream`` in a subprocess, two event-time windows of U users (one record
  each, P records per message) published ahead of the wall clock (the runner's watermark),
  a malformed sentinel message last. Ingest rate: 2U records over the time from the job's first
  progress line to the sentinel's dead-letter file (the one worker thread takes every message
  through the graph before it pulls again). Delay: each window's ``_RELEASED`` marker against
  its close (end + allowed lateness) on the wall clock. Empty messages every 0.5 s keep the
  watermark moving, as a live stream would.
* ``sustained``: ``triehh stream`` in a subprocess on an open-ended range while records are
  published at a steady rate (each stamped with the time it is sent, P records per message),
  for each rate of ``--rates`` over ``--sustain-windows`` windows: per window, the records
  published and counted, those dead-lettered late, and its ``_RELEASED`` marker against its
  close; the job's CPU seconds. A rate is sustained when every window counts what was
  published into it, none late.

Usage (from the repository root)::

  python benchmarks/stream_throughput.py
  python benchmarks/stream_throughput.py --kinds job --window-users 100000 --per-message 1000
  python benchmarks/stream_throughput.py --kinds sustained --rates 2000,5000,10000 --per-message 100
  unshare -n sh -c 'ip link set lo up && python benchmarks/stream_throughput.py --kinds job --runner prism'
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import pathlib
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Sequence

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from tests.pubsub_emulator import PubsubEmulator, emulator_missing, start_pubsub_emulator  # noqa: E402

_SEED = bytes(range(32))


def _words(users: int, seed: int) -> List[str]:
    """One Zipf(1.1) word per user over 2,000 words ``w0``..``w1999``."""
    import numpy as np

    ranks = np.arange(1, 2001)
    weights = ranks ** -1.1
    rng = np.random.default_rng(seed)
    return [f"w{i}" for i in rng.choice(len(ranks), size=users, p=weights / weights.sum())]


def _payload(records, message_format: str) -> bytes:
    if message_format == "json":
        return json.dumps([{"user_id": u, "item": i} for u, i in records]).encode()
    from triehh_beam.proto import stream_pb2 as pb

    return pb.DeviceRecords(records=[pb.DeviceRecord(user_id=u, text=i) for u, i in records]).SerializeToString()


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---- ingest: ReadFromPubSub | ParseMessages ------------------------------------------------


class _CountRows:
    """A sink appending each bundle's number of rows to a file. (The streaming DirectRunner's
    counters cannot be used: ``result.metrics()`` there holds only each step's first bundle.)"""

    def __init__(self, path: str):
        self.path = path

    def total(self) -> int:
        with open(self.path) as f:
            return sum(int(line) for line in f)


def _count_dofn(path: str):
    import apache_beam as beam

    class _CountDoFn(beam.DoFn):
        def start_bundle(self):
            self._rows = 0

        def process(self, batch):
            self._rows += batch.num_rows

        def finish_bundle(self):
            if self._rows:
                with open(path, "a") as f:
                    f.write(f"{self._rows}\n")

    return _CountDoFn()


def measure_ingest(emulator: PubsubEmulator, total: int, per_message: int, message_format: str,
                   work: str) -> Dict:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

    from triehh_beam.beam.pubsub.messages import ParseMessages
    from triehh_beam.io.schema import RecordOptions

    paths = emulator.topic(f"ingest-{message_format}-{per_message}")
    words = _words(total, 7)
    now_ms = int(time.time() * 1000) + 3_600_000  # ahead of the watermark: nothing is late
    futures = []
    for i in range(0, total, per_message):
        records = [(f"user-{j}", words[j]) for j in range(i, min(i + per_message, total))]
        futures.append(emulator.publisher.publish(paths["topic"], _payload(records, message_format), ts=str(now_ms)))
    for future in futures:
        future.result(timeout=120)
    messages = len(futures)
    counts = _CountRows(os.path.join(work, f"count-{message_format}-{per_message}"))
    open(counts.path, "w").close()
    pipeline = beam.Pipeline(runner=BundleBasedDirectRunner(), options=PipelineOptions(["--streaming"]))
    (
        pipeline
        | "ReadFromPubSub" >> beam.io.ReadFromPubSub(subscription=paths["subscription"], with_attributes=True)
        | "ParseMessages" >> ParseMessages(RecordOptions(), message_format, timestamp_attribute="ts")
    )["records"] | "CountRows" >> beam.ParDo(_count_dofn(counts.path))
    cpu0, t0 = _cpu(), time.monotonic()
    result = pipeline.run()
    deadline = t0 + 600
    records = 0
    while records < total and time.monotonic() < deadline:
        time.sleep(0.05)
        records = counts.total()
    wall, cpu = time.monotonic() - t0, _cpu() - cpu0
    _cancel(result, emulator, paths["topic"])
    return {
        "kind": "ingest", "format": message_format, "records_per_message": per_message, "records": records,
        "messages": messages, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
        "records_per_s": round(records / wall), "messages_per_s": round(messages / wall, 1),
    }


def _cancel(result, emulator: PubsubEmulator, topic: str) -> None:
    """The runner's one worker waits up to 30 s in a pull: a message wakes it for the cancel."""
    stopper = threading.Thread(target=result.cancel, daemon=True)
    stopper.start()
    for _ in range(50):
        emulator.publish(topic, b"[]")
        stopper.join(0.2)
        if not stopper.is_alive():
            return


# ---- job: triehh stream ----------------------------------------------------------------------


def measure_job(emulator: PubsubEmulator, users: int, per_message: int, window: int, lateness: int,
                message_format: str, work: pathlib.Path, runner_args: Sequence[str] = ()) -> Dict:
    paths = emulator.topic("job")
    (work / "seed.bin").write_bytes(_SEED)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, PUBSUB_EMULATOR_HOST=emulator.host, PUBSUB_PROJECT_ID=emulator.project)
    # Both windows start after the publishing and the job's start-up, on the wall clock; the job
    # declares them (--windows) and plans them for their users (--population).
    base = math.ceil((time.time() + 15 + 2 * users / 100_000) / window) * window
    declared = "..".join(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) for t in (base, base + 2 * window))
    command = [sys.executable, "-m", "triehh_beam.cli", "stream", "--subscription", paths["subscription"],
               "--output", str(work / "out"), "--seed-file", str(work / "seed.bin"), "--window", f"{window}s",
               "--allowed-lateness", f"{lateness}s", "--epsilon", "4", "--delta", "1e-8", "--max-length", "10",
               "--timestamp-attribute", "ts", "--message-format", message_format, "--dead-letter", str(work / "dead"),
               "--stop-after-windows", "2", "--windows", declared, "--population", str(users), *runner_args]
    lines: List[tuple] = []
    started = time.time()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def collect():
        for line in process.stdout:
            lines.append((time.time(), line.rstrip("\n")))
            print(f"  [job +{time.time() - started:6.1f} s] {line.rstrip()}", flush=True)

    threading.Thread(target=collect, daemon=True).start()
    futures = []
    for k in range(2):
        words = _words(users, 11 + k)
        start_ms = (base + k * window) * 1000
        for i in range(0, users, per_message):
            records = [(f"w{k}-user-{j}", words[j]) for j in range(i, min(i + per_message, users))]
            futures.append(emulator.publisher.publish(paths["topic"], _payload(records, message_format),
                                                      ts=str(start_ms + i // per_message)))
    futures.append(emulator.publisher.publish(paths["topic"], b"sentinel: the last message"))
    for future in futures:
        future.result(timeout=120)
    published = time.time()
    stop = threading.Event()

    def tick():
        while not stop.wait(0.5):
            emulator.publisher.publish(paths["topic"], b"[]")

    threading.Thread(target=tick, daemon=True).start()
    sentinel_at = None
    while process.poll() is None:
        if sentinel_at is None:
            found = list((work / "dead" / "malformed_message").glob("*.jsonl")) if (work / "dead").exists() else []
            if found:
                sentinel_at = min(p.stat().st_mtime for p in found)
        time.sleep(0.05)
        if time.time() - started > 900:
            process.kill()
            raise SystemExit("triehh stream did not end within 15 minutes")
    stop.set()
    time.sleep(0.2)
    job_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    first_line = next((t for t, line in lines if line.startswith("streaming from")), started)
    windows = []
    for k in range(2):
        start = base + k * window
        name = f"window={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(start))}"
        marker = work / "out" / name / "_RELEASED"
        closes = start + window + lateness
        windows.append({
            "window": name, "released": marker.exists(),
            "delay_after_close_s": round(marker.stat().st_mtime - closes, 2) if marker.exists() else None,
        })
    ingest_s = (sentinel_at - first_line) if sentinel_at else None
    return {
        "kind": "job", "runner": "prism" if runner_args else "direct", "format": message_format, "users_per_window": users, "records_per_message": per_message,
        "window_s": window, "lateness_s": lateness, "exit_code": process.returncode,
        "publish_s": round(published - started, 2),
        "ingest_s": round(ingest_s, 2) if ingest_s else None,
        "ingest_records_per_s": round(2 * users / ingest_s) if ingest_s else None,
        "job_cpu_s": round(job_cpu.ru_utime + job_cpu.ru_stime, 1),
        "windows": windows,
    }


# ---- sustained: triehh stream fed at a steady rate ----------------------------------------


def _publish_steadily(emulator: PubsubEmulator, topic: str, first: float, until: float, rate: int,
                      per_message: int, window: int, published: Dict[int, int]) -> None:
    """``rate`` records a second from ``first`` to ``until`` (seconds), stamped with the time each
    message is sent; ``published`` receives the records per window start."""
    sent = 0
    words = _words(10_000, 7)
    while time.time() < until:
        now = time.time()
        if now < first or sent >= (now - first) * rate:
            time.sleep(0.002)
            continue
        records = [(f"u{sent + j}", words[(sent + j) % len(words)]) for j in range(per_message)]
        emulator.publisher.publish(topic, _payload(records, "json"), ts=str(int(now * 1000)))
        start = int(now) // window * window
        published[start] = published.get(start, 0) + per_message
        sent += per_message


def measure_sustained(emulator: PubsubEmulator, rate: int, per_message: int, window: int, lateness: int,
                      windows: int, work: pathlib.Path) -> Dict:
    paths = emulator.topic("sustained")
    work.mkdir(parents=True)
    (work / "seed.bin").write_bytes(_SEED)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, PUBSUB_EMULATOR_HOST=emulator.host, PUBSUB_PROJECT_ID=emulator.project)
    first = math.ceil((time.time() + 12) / window) * window
    command = [sys.executable, "-m", "triehh_beam.cli", "stream", "--subscription", paths["subscription"],
               "--output", str(work / "out"), "--seed-file", str(work / "seed.bin"), "--window", f"{window}s",
               "--allowed-lateness", f"{lateness}s", "--protocol", "triehh++", "--epsilon", "4", "--delta", "1e-8",
               "--max-length", "10", "--timestamp-attribute", "ts", "--dead-letter", str(work / "dead"),
               "--windows", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(first)) + "..",
               "--stop-after-windows", str(windows)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
    published: Dict[int, int] = {}
    publisher = threading.Thread(target=_publish_steadily, daemon=True, args=(
        emulator, paths["topic"], first, first + windows * window, rate, per_message, window, published))
    publisher.start()
    try:
        process.wait(timeout=windows * window + 600)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SystemExit("triehh stream did not end within 10 minutes of its last window")
    publisher.join()
    job_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    late: Dict[str, int] = {}
    for path in (work / "dead").glob("late/*.jsonl"):
        for line in path.read_text().splitlines():
            name = line.split("late for ", 1)[1].split('"', 1)[0] if "late for " in line else "?"
            late[name] = late.get(name, 0) + 1
    rows = []
    for k in range(windows):
        start = first + k * window
        name = f"window={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(start))}"
        marker = work / "out" / name / "_RELEASED"
        report = work / "out.state" / "windows" / name / "operator_report.json"
        counted = json.loads(report.read_text())["input"]["records"] if report.exists() else None
        rows.append({"window": name, "published": published.get(start, 0), "counted": counted,
                     "late": late.get(name, 0),
                     "release_after_close_s": round(marker.stat().st_mtime - (start + window + lateness), 2)
                     if marker.exists() else None})
    return {"kind": "sustained", "rate": rate, "records_per_message": per_message, "window_s": window,
            "lateness_s": lateness, "exit_code": process.returncode,
            "sustained": all(r["counted"] == r["published"] and not r["late"] for r in rows),
            "job_cpu_s": round(job_cpu.ru_utime + job_cpu.ru_stime - before.ru_utime - before.ru_stime, 1),
            "windows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="ingest,job",
                        help="ingest, job and/or sustained, comma-separated (default: %(default)s)")
    parser.add_argument("--rates", default="2000,5000,10000",
                        help="sustained: records per second, comma-separated (default: %(default)s)")
    parser.add_argument("--sustain-windows", type=int, default=4, help="sustained: windows per rate")
    parser.add_argument("--ingest-records", type=int, default=200_000)
    parser.add_argument("--ingest-sizes", default="100,1000", help="records per message, comma-separated")
    parser.add_argument("--formats", default="json,proto")
    parser.add_argument("--window-users", type=int, default=50_000, help="users (records) per window")
    parser.add_argument("--per-message", type=int, default=500)
    parser.add_argument("--window", type=int, default=30, help="seconds")
    parser.add_argument("--lateness", type=int, default=2, help="seconds")
    parser.add_argument("--job-format", default="json")
    parser.add_argument("--runner", choices=("direct", "prism"), default="direct",
                        help="the job's runner: the in-process streaming DirectRunner (Beam's native read) or "
                             "Prism (the product's read; run the script inside `unshare -n`, Prism binds every "
                             "interface)")
    parser.add_argument("--prism", default=os.environ.get("TRIEHH_PRISM", "/root/.cache/triehh-prism/bin/prism"),
                        help="the Prism binary (default: $TRIEHH_PRISM, else %(default)s)")
    parser.add_argument("--out", help="also write the results here as JSON")
    args = parser.parse_args(argv)
    # A SIGTERM unwinds the contexts, so the emulator (its own process group) is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    missing = emulator_missing()
    if missing:
        raise SystemExit(missing)
    kinds = args.kinds.split(",")
    results = []
    with tempfile.TemporaryDirectory(prefix="stream-bench-") as tmp, contextlib.ExitStack() as stack:
        host = stack.enter_context(start_pubsub_emulator(pathlib.Path(tmp) / "emulator.log"))
        os.environ.update(PUBSUB_EMULATOR_HOST=host, PUBSUB_PROJECT_ID="test-project")
        emulator = PubsubEmulator(host)
        stack.callback(emulator.close)
        if "ingest" in kinds:
            for message_format in args.formats.split(","):
                for size in map(int, args.ingest_sizes.split(",")):
                    result = measure_ingest(emulator, args.ingest_records, size, message_format, tmp)
                    print(json.dumps(result), flush=True)
                    results.append(result)
        if "job" in kinds:
            work = pathlib.Path(tmp) / "job"
            work.mkdir()
            runner_args = ["--runner", "PrismRunner", "--prism_location", args.prism] if args.runner == "prism" else []
            result = measure_job(emulator, args.window_users, args.per_message, args.window, args.lateness,
                                 args.job_format, work, runner_args)
            print(json.dumps(result), flush=True)
            results.append(result)
        if "sustained" in kinds:
            for rate in map(int, args.rates.split(",")):
                result = measure_sustained(emulator, rate, args.per_message, args.window, args.lateness,
                                           args.sustain_windows, pathlib.Path(tmp) / f"sustained-{rate}")
                print(json.dumps(result), flush=True)
                results.append(result)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
